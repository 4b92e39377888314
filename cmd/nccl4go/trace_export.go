package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nccl4go/nccl/trace"
)

// runTraceExport is `nccl4go trace export -format torch -o DIR DUMPS...`.
func runTraceExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace export", "[-format torch] -o DIR [-prefix P] DUMP|DIR...",
		"Convert the flight-recorder dumps of the ranks of a job (files, or directories holding\n"+
			"nccl4go-trace-*.json files) into another tool's format. -format torch writes one file\n"+
			"per rank, <prefix><rank>, in the format of PyTorch's flight recorder (version "+trace.TorchVersion+"), for\n"+
			"its analyzer and the tools built on it:\n\n"+
			"  nccl4go trace export -format torch -o fr/ dumps/\n"+
			"  python -m torch.distributed.flight_recorder.fr_trace fr/ -p "+trace.TorchPrefix+" --allow-incomplete-ranks\n\n"+
			"Give it the dumps of all ranks together: they map each communicator's ranks to process ranks.")
	format := fs.String("format", "torch", "output format: torch")
	out := fs.String("o", "", "directory to write into (created if missing)")
	prefix := fs.String("prefix", trace.TorchPrefix, "file-name prefix; the rank follows it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(stdout)
			return err
		}
		return &usageError{msg: fmt.Sprintf("%s: %v", fs.Name(), err), usage: fs.usage}
	}
	switch {
	case *format != "torch":
		return &usageError{msg: fmt.Sprintf("trace export: unknown format %q (known: torch)", *format), usage: fs.usage}
	case *out == "":
		return &usageError{msg: "trace export: no output directory (-o DIR)", usage: fs.usage}
	case fs.NArg() == 0:
		return &usageError{msg: "trace export: no dump given", usage: fs.usage}
	}
	paths, err := dumpPaths("trace export", fs.Args())
	if err != nil {
		return err
	}
	// As trace analyze does: a bad dump found in a directory is skipped and
	// named; the others are exported.
	dumps, err := readDumps(ctx, paths, func(path string, err error) {
		fmt.Fprintf(stderr, "trace export: skipping %s: %v\n", path, err)
	})
	if err != nil {
		return err
	}
	written, err := trace.WriteTorchDir(*out, *prefix, dumps)
	for _, w := range written {
		fmt.Fprintln(stdout, w)
	}
	return err
}

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/trace"
)

// traceExportCommand is `nccl4go trace export --format torch -o DIR DUMPS...`.
var traceExportCommand = &command{
	name:     "export",
	summary:  "convert the ranks' dumps for PyTorch's flight-recorder analyzer",
	synopsis: "[--format torch] -o DIR [--prefix P] DUMP|DIR...",
	about: `Convert the flight-recorder dumps of the ranks of a job (files, or directories holding
nccl4go-trace-*.json files) into another tool's format. --format torch writes one file
per rank, <prefix><rank>, in the format of PyTorch's flight recorder (version ` + trace.TorchVersion + `), for
its analyzer and the tools built on it:

  nccl4go trace export --format torch -o fr/ dumps/
  python -m torch.distributed.flight_recorder.fr_trace fr/ -p ` + trace.TorchPrefix + ` --allow-incomplete-ranks

Give it the dumps of all ranks together: they map each communicator's ranks to process ranks.`,
	flags: func(fs *pflag.FlagSet) action {
		format := fs.String("format", "torch", "output `format`: torch")
		out := fs.StringP("output", "o", "", "`directory` to write into (created if missing)")
		prefix := fs.String("prefix", trace.TorchPrefix, "file-name `prefix`; the rank follows it")
		return func(ctx context.Context, in *invocation) error {
			switch {
			case *format != "torch":
				return usagef("unknown format %q (known: torch)", *format)
			case *out == "":
				return usagef("no output directory (-o DIR)")
			case len(in.args) == 0:
				return usagef("no dump given")
			}
			return runTraceExport(ctx, in.args, *out, *prefix, in.stdout, in.stderr)
		}
	},
}

// runTraceExport writes the dumps at args into out in torch's format.
func runTraceExport(ctx context.Context, args []string, out, prefix string, stdout, stderr io.Writer) error {
	paths, err := dumpPaths("trace export", args)
	if err != nil {
		return err
	}
	// As trace analyze does: a bad dump found in a directory is skipped and
	// named; the others are exported.
	dumps, err := readDumps(ctx, paths, func(path string, err error) {
		fmt.Fprintf(stderr, "nccl4go trace export: skipping %s: %s\n", path, skipReason(err))
	})
	if err != nil {
		return err
	}
	written, err := trace.WriteTorchDir(out, prefix, dumps)
	for _, w := range written {
		fmt.Fprintln(stdout, w)
	}
	return err
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nccl4go/nccl/trace"
)

// traceCommands are trace's subcommands.
var traceCommands = []command{
	{"analyze", "read the flight-recorder dumps of all ranks and say what went wrong", runTraceAnalyze},
	{"export", "convert the dumps of all ranks for another tool (PyTorch's flight-recorder analyzer)", runTraceExport},
}

// runTrace is `nccl4go trace <subcommand>`.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "trace: ", traceCommands, printTraceUsage, args, stdout, stderr)
}

// printTraceUsage lists trace's subcommands.
func printTraceUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: nccl4go trace <subcommand> [flags]\n\nSubcommands:\n")
	for _, c := range traceCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nThe flight recorder dumps on a watchdog timeout, on %s (kill -USR1 <pid>) where the\n"+
		"program enabled it, and on demand (trace.Default().DumpFile). Set %s to size it (entries\n"+
		"per communicator, 0 to turn it off).\n", "SIGUSR1", trace.BufferEnv)
}

// runTraceAnalyze is `nccl4go trace analyze [-json] DUMPS...`.
func runTraceAnalyze(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace analyze", "[-json] DUMP|DIR...",
		"Read the flight-recorder dumps of the ranks of a job (files, or directories holding\n"+
			"nccl4go-trace-*.json files) and say, for every communicator, where the ranks disagree:\n"+
			"the first operation some rank did not enqueue or enqueued differently, which ranks are\n"+
			"behind, and what each rank was doing last. Give it the dumps of all ranks: a rank\n"+
			"without a dump is reported as such. A dump of a directory that cannot be read is\n"+
			"skipped and named (on stderr and in the report's notes); a dump named on the command\n"+
			"line that cannot be read is an error.")
	jsonOut := fs.Bool("json", false, "print the report as one JSON document")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(stdout)
			return err
		}
		return &usageError{msg: fmt.Sprintf("%s: %v", fs.Name(), err), usage: fs.usage}
	}
	if fs.NArg() == 0 {
		return &usageError{msg: "trace analyze: no dump given", usage: fs.usage}
	}
	paths, err := dumpPaths("trace analyze", fs.Args())
	if err != nil {
		return err
	}
	var skipped []string
	dumps, err := readDumps(ctx, paths, func(path string, err error) {
		why := err.Error()
		if de := (*trace.DumpError)(nil); errors.As(err, &de) {
			why = de.Err.Error()
		}
		fmt.Fprintf(stderr, "nccl4go trace analyze: skipping %s: %s\n", path, why)
		skipped = append(skipped, fmt.Sprintf("skipped %s, which cannot be read: %s", path, why))
	})
	if err != nil {
		return err
	}
	if len(dumps) == 0 {
		return fmt.Errorf("trace analyze: no readable dump (%d skipped)", len(skipped))
	}
	rep := trace.Analyze(dumps)
	rep.Notes = append(skipped, rep.Notes...)
	if *jsonOut {
		return writeJSON(stdout, rep)
	}
	return rep.WriteText(stdout)
}

// dumpPath is a dump to read: named on the command line, or found in a
// directory.
type dumpPath struct {
	path  string
	named bool
}

// dumpPaths expands the arguments: a file stands for itself, a directory
// for the nccl4go-trace-*.json files in it.
func dumpPaths(cmd string, args []string) ([]dumpPath, error) {
	var paths []dumpPath
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		if !st.IsDir() {
			paths = append(paths, dumpPath{filepath.Clean(a), true})
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		n := 0
		for _, e := range ents {
			if !e.IsDir() && strings.HasPrefix(e.Name(), "nccl4go-trace-") && strings.HasSuffix(e.Name(), ".json") {
				paths = append(paths, dumpPath{filepath.Join(a, e.Name()), false})
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: no nccl4go-trace-*.json file in directory %s", cmd, a)
		}
	}
	// Sorted by path, each once: named first where a directory holds it too.
	slices.SortFunc(paths, func(a, b dumpPath) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		if a.named == b.named {
			return 0
		}
		if a.named {
			return -1
		}
		return 1
	})
	return slices.CompactFunc(paths, func(a, b dumpPath) bool { return a.path == b.path }), nil
}

// readDumps reads the dumps at paths in order, checking ctx before each.
// A dump named on the command line that cannot be read is an error; one
// found in a directory is skipped, and skip is told its path and error.
func readDumps(ctx context.Context, paths []dumpPath, skip func(path string, err error)) ([]*trace.Dump, error) {
	var dumps []*trace.Dump
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := trace.ReadDumpFile(p.path)
		if err != nil {
			if p.named {
				return nil, err
			}
			skip(p.path, err)
			continue
		}
		dumps = append(dumps, d)
	}
	return dumps, nil
}

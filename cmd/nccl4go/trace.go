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
			"without a dump is reported as such.")
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
	paths, err := dumpPaths(fs.Args())
	if err != nil {
		return err
	}
	var dumps []*trace.Dump
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := trace.ReadDumpFile(p)
		if err != nil {
			return err
		}
		dumps = append(dumps, d)
	}
	rep := trace.Analyze(dumps)
	if *jsonOut {
		return writeJSON(stdout, rep)
	}
	return rep.WriteText(stdout)
}

// dumpPaths expands the arguments: a file stands for itself, a directory
// for the nccl4go-trace-*.json files in it.
func dumpPaths(args []string) ([]string, error) {
	var paths []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("trace analyze: %w", err)
		}
		if !st.IsDir() {
			paths = append(paths, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("trace analyze: %w", err)
		}
		n := 0
		for _, e := range ents {
			if !e.IsDir() && strings.HasPrefix(e.Name(), "nccl4go-trace-") && strings.HasSuffix(e.Name(), ".json") {
				paths = append(paths, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("trace analyze: no nccl4go-trace-*.json file in directory %s", a)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

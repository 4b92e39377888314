package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/trace"
)

// traceCommand is `nccl4go trace`, a group.
var traceCommand = &command{
	name:    "trace",
	summary: "read the flight recorder's dumps of all ranks",
	about: fmt.Sprintf(`The flight recorder dumps on a watchdog timeout, on SIGUSR1 (kill -USR1 <pid>) where
the program enabled it, and on demand (trace.Default().DumpFile). Set %s to
size it (entries per communicator, 0 to turn it off).`, trace.BufferEnv),
	subs: []*command{traceAnalyzeCommand, traceExportCommand},
}

// traceAnalyzeCommand is `nccl4go trace analyze [--json] DUMPS...`.
var traceAnalyzeCommand = &command{
	name:     "analyze",
	summary:  "say where the ranks' dumps disagree, who is behind and what each rank did last",
	synopsis: "[--json] DUMP|DIR...",
	about: `Read the flight-recorder dumps of the ranks of a job (files, or directories holding
nccl4go-trace-*.json files) and say, for every communicator, where the ranks disagree:
the first operation some rank did not enqueue or enqueued differently, which ranks are
behind, and what each rank was doing last. Give it the dumps of all ranks: a rank
without a dump is reported as such. A dump of a directory that cannot be read is
skipped and named (on stderr and in the report's notes); a dump named on the command
line that cannot be read is an error.`,
	flags: func(fs *pflag.FlagSet) action {
		var jsonOut bool
		boolFlag(fs, &jsonOut, "json", "", "print the report as one JSON document")
		return func(ctx context.Context, in *invocation) error {
			return runTraceAnalyze(ctx, in.args, jsonOut, in.stdout, in.stderr)
		}
	},
}

// runTraceAnalyze analyzes the dumps at args.
func runTraceAnalyze(ctx context.Context, args []string, jsonOut bool, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("no dump given")
	}
	paths, err := dumpPaths("trace analyze", args)
	if err != nil {
		return err
	}
	var skipped []string
	dumps, err := readDumps(ctx, paths, func(path string, err error) {
		why := skipReason(err)
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
	if jsonOut {
		return writeJSON(stdout, rep)
	}
	return rep.WriteText(stdout)
}

// skipReason is why a dump found in a directory is skipped: the reading
// error without the path, which the message names already.
func skipReason(err error) string {
	if de := (*trace.DumpError)(nil); errors.As(err, &de) {
		return de.Err.Error()
	}
	return err.Error()
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

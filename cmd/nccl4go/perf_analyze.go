package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/perf"
)

const perfAnalyzeUsage = `Usage: nccl4go perf analyze FILE.json... [flags]

Read per-iteration times from JSON files (nccl-tests' -I 1 -J FILE, version 3, or nccl4go
perf's) and say, in words first, then size by size: which process or node straggles, which
iterations spike above the threshold (on every process at once, or on one alone), and how
much iteration 0 (warm-up) weighs. nccl-tests ships this as tools/analyze_perf_json.py.

Flags:
`

// runPerfAnalyze is `nccl4go perf analyze`.
func runPerfAnalyze(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("perf analyze", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	var o perf.AnalyzeOptions
	fs.BoolVar(&o.InPlace, "in-place", false, "analyze the in-place column (default: out-of-place)")
	fs.Float64Var(&o.Threshold, "threshold", 1.5, "a spike is an iteration above this many times the average")
	sizes := fs.String("sizes", "", "only these sizes, comma-separated (`LIST`: 8,1M,1G)")
	fs.IntVar(&o.ProcsPerNode, "procs-per-node", 4, "processes per node when the file names no hosts")
	detail := fs.BoolP("detail", "v", false, "also list every spike, the warm-up table and the nodes")
	jsonOut := fs.Bool("json", false, "print the analyses as JSON for scripts")
	hint := func(format string, a ...any) error {
		return hintedUsageError("Run 'nccl4go perf analyze -h' for the flags.", format, a...)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, perfAnalyzeUsage+fs.FlagUsages())
			return flag.ErrHelp
		}
		return hint("perf analyze: %v", err)
	}
	if fs.NArg() == 0 {
		return hint("perf analyze: no JSON file given")
	}
	if o.Threshold <= 0 {
		return hint("perf analyze: --threshold %g: must be positive", o.Threshold)
	}
	if o.ProcsPerNode < 1 {
		return hint("perf analyze: --procs-per-node %d: must be at least 1", o.ProcsPerNode)
	}
	if *sizes != "" {
		for _, s := range strings.Split(*sizes, ",") {
			n, err := perf.ParseSize(s)
			if err != nil {
				return hint("perf analyze: --sizes: %v", err)
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	var all []*perf.Analysis
	var errs []error
	for i, f := range fs.Args() {
		a, err := perf.AnalyzeFile(f, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, a)
		if *jsonOut {
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := perf.WriteAnalysis(stdout, a, *detail); err != nil {
			return err
		}
	}
	if *jsonOut {
		if all == nil {
			all = []*perf.Analysis{}
		}
		if err := writeJSON(stdout, all); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/perf"
)

// perfAnalyzeCommand is `nccl4go perf analyze`.
var perfAnalyzeCommand = &command{
	name:     "analyze",
	summary:  "stragglers, spikes and warm-up in per-iteration times (nccl-tests' -I 1 -J FILE)",
	synopsis: "FILE.json... [flags]",
	about: `Read per-iteration times from JSON files (nccl-tests' -I 1 -J FILE, version 3, or nccl4go
perf's) and say, in words first, then size by size: which process or node straggles, which
iterations spike above the threshold (on every process at once, or on one alone), and how
much iteration 0 (warm-up) weighs. nccl-tests ships this as tools/analyze_perf_json.py.`,
	getopt: true,
	flags: func(fs *pflag.FlagSet) action {
		var f analyzeFlags
		boolFlag(fs, &f.o.InPlace, "in-place", "", "analyze the in-place column (default: out-of-place)")
		fs.Float64Var(&f.o.Threshold, "threshold", 1.5, "a spike is an iteration above this many times the average")
		fs.StringVar(&f.sizes, "sizes", "", "only these sizes, comma-separated (`LIST`: 8,1M,1G)")
		fs.IntVar(&f.o.ProcsPerNode, "procs-per-node", 4, "processes per node when the file names no hosts")
		boolFlag(fs, &f.detail, "detail", "v", "also list every spike, the warm-up table and the nodes")
		boolFlag(fs, &f.json, "json", "", "print the analyses as JSON for scripts")
		return func(ctx context.Context, in *invocation) error {
			return runPerfAnalyze(in.args, f, in.stdout)
		}
	},
}

// analyzeFlags are perf analyze's flags.
type analyzeFlags struct {
	o            perf.AnalyzeOptions
	sizes        string
	detail, json bool
}

// runPerfAnalyze analyzes the files.
func runPerfAnalyze(files []string, f analyzeFlags, stdout io.Writer) error {
	o := f.o
	if len(files) == 0 {
		return usagef("no JSON file given")
	}
	if o.Threshold <= 0 {
		return usagef("--threshold %g: must be positive", o.Threshold)
	}
	if o.ProcsPerNode < 1 {
		return usagef("--procs-per-node %d: must be at least 1", o.ProcsPerNode)
	}
	if f.sizes != "" {
		for _, s := range strings.Split(f.sizes, ",") {
			n, err := perf.ParseSize(s)
			if err != nil {
				return usagef("--sizes: %v", err)
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	var all []*perf.Analysis
	var errs []error
	for i, file := range files {
		a, err := perf.AnalyzeFile(file, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, a)
		if f.json {
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := perf.WriteAnalysis(stdout, a, f.detail); err != nil {
			return err
		}
	}
	if f.json {
		if all == nil {
			all = []*perf.Analysis{}
		}
		if err := writeJSON(stdout, all); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

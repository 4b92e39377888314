package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/perf"
)

const perfCompareUsage = `Usage: nccl4go perf compare A.json B.json... [flags]

Compare runs saved with -J (by nccl4go perf or by nccl-tests itself): for each run after
the first, its times and bus bandwidths beside the first's and their ratio, size by size,
then the largest time ratio from --from up; with --plot, every run's curves in one picture.

Flags:
`

// runPerfCompare is `nccl4go perf compare`.
func runPerfCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("perf compare", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	plotOut := fs.String("plot", "", "draw every run into this `file` (.png or .svg)")
	from := fs.String("from", "1M", "report the largest time ratio from this `size` up")
	jsonOut := fs.Bool("json", false, "print the ratios as JSON")
	hint := func(format string, a ...any) error {
		return &usageError{msg: fmt.Sprintf(format, a...), usage: func(w io.Writer) {
			fmt.Fprintln(w, "Run 'nccl4go perf compare -h' for the flags.")
		}}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, perfCompareUsage+fs.FlagUsages())
			return flag.ErrHelp
		}
		return hint("perf compare: %v", err)
	}
	files := fs.Args()
	if len(files) < 2 {
		return hint("perf compare: need at least two JSON files, got %d", len(files))
	}
	minSize, err := perf.ParseSize(*from)
	if err != nil {
		return hint("perf compare: --from: %v", err)
	}
	if *plotOut != "" {
		if _, err := perf.PlotFormat(*plotOut); err != nil {
			return hint("%v", err)
		}
	}
	var series []*perf.Series
	for _, f := range files {
		s, err := perf.ReadJSONFile(f)
		if err != nil {
			return err
		}
		series = append(series, s)
	}
	if *jsonOut {
		type ratioJSON struct {
			A, B string
			Rows []perf.Ratio
		}
		var out []ratioJSON
		for _, s := range series[1:] {
			out = append(out, ratioJSON{A: series[0].Name, B: s.Name, Rows: perf.Compare(series[0], s)})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := perf.WriteComparison(stdout, minSize, series...); err != nil {
		return err
	}
	if *plotOut != "" {
		return perf.PlotFile(*plotOut, "", series...)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/perf"
)

// perfCompareCommand is `nccl4go perf compare`.
var perfCompareCommand = &command{
	name:     "compare",
	summary:  "compare runs saved with -J (nccl4go's or nccl-tests'), size by size",
	synopsis: "A.json B.json... [flags]",
	about: `Compare runs saved with -J (by nccl4go perf or by nccl-tests itself): for each run after
the first, its times and bus bandwidths beside the first's and their ratio, size by size,
then the largest time ratio from --from up; with --plot, every run's curves in one picture.`,
	getopt: true,
	flags: func(fs *pflag.FlagSet) action {
		plotOut := fs.String("plot", "", "draw every run into this `file` (.png or .svg)")
		from := fs.String("from", "1M", "report the largest time ratio from this `size` up")
		var jsonOut bool
		boolFlag(fs, &jsonOut, "json", "", "print the ratios as JSON")
		return func(ctx context.Context, in *invocation) error {
			return runPerfCompare(in.args, *plotOut, *from, jsonOut, in.stdout)
		}
	},
}

// runPerfCompare compares the JSON files.
func runPerfCompare(files []string, plotOut, from string, jsonOut bool, stdout io.Writer) error {
	if len(files) < 2 {
		return usagef("need at least two JSON files, got %d", len(files))
	}
	minSize, err := perf.ParseSize(from)
	if err != nil {
		return usagef("--from: %v", err)
	}
	if plotOut != "" {
		if _, err := perf.PlotFormat(plotOut); err != nil {
			return usagef("%s", strings.TrimPrefix(err.Error(), "perf: "))
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
	if jsonOut {
		out := []compareJSON{}
		for _, s := range series[1:] {
			c := compareJSON{A: series[0].Name, B: s.Name, Rows: []ratioJSON{}}
			for _, r := range perf.Compare(series[0], s) {
				c.Rows = append(c.Rows, ratioJSON{Size: r.Size, Type: r.Type, Op: r.Op, Root: r.Root,
					ATimeOOP: num(r.OutOfPlace.Time), BTimeOOP: num(r.Other.OutOfPlace.Time), TimeOOP: num(r.TimeOOP),
					ATimeIP: num(r.InPlace.Time), BTimeIP: num(r.Other.InPlace.Time), TimeIP: num(r.TimeIP),
					BusBWOOP: num(r.BusBWOOP), BusBWIP: num(r.BusBWIP)})
			}
			out = append(out, c)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if err := perf.WriteComparison(stdout, minSize, series...); err != nil {
		return err
	}
	if plotOut != "" {
		return perf.PlotFile(plotOut, "", series...)
	}
	return nil
}

// compareJSON is one comparison of --json: B against A.
type compareJSON struct {
	A    string      `json:"a"`
	B    string      `json:"b"`
	Rows []ratioJSON `json:"rows"`
}

// ratioJSON is one size: times in microseconds and B/A ratios; null where
// a value is missing or not a number (a cell nccl-tests did not write, a
// time of 0).
type ratioJSON struct {
	Size     uint64   `json:"size"`
	Type     string   `json:"type"`
	Op       string   `json:"redop"`
	Root     int      `json:"root"`
	ATimeOOP *float64 `json:"a_time_us"`
	BTimeOOP *float64 `json:"b_time_us"`
	TimeOOP  *float64 `json:"time_ratio"`
	ATimeIP  *float64 `json:"a_inplace_time_us"`
	BTimeIP  *float64 `json:"b_inplace_time_us"`
	TimeIP   *float64 `json:"inplace_time_ratio"`
	BusBWOOP *float64 `json:"busbw_ratio"`
	BusBWIP  *float64 `json:"inplace_busbw_ratio"`
}

// num is v, or nil when it is NaN or infinite (JSON has neither).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

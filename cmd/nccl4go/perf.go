package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/perf"
	"github.com/nccl4go/nccl/rendezvous"
)

// perfCommand is `nccl4go perf TEST`, with compare and analyze below it.
var perfCommand = &command{
	name:     "perf",
	summary:  "measure bandwidth and latency as nccl-tests does: same flags, same table",
	synopsis: "TEST [flags]",
	about: fmt.Sprintf(`TEST:  %s, or all
TYPE:  %s
Flags are nccl-tests', read as its getopt reads them: -b8, -b 8, --minbytes=8, before or
after TEST.`, strings.Join(perf.Tests(), " "), strings.Join(perf.TypeNames(), " ")),
	getopt: true,
	flags: func(fs *pflag.FlagSet) action {
		p := bindPerfFlags(fs)
		return func(ctx context.Context, in *invocation) error {
			tests, err := p.operands(in.line, in.args)
			if err != nil {
				return err
			}
			return runPerf(ctx, p, tests, in.stdout, in.stderr)
		}
	},
	flagHelp: writePerfFlags,
	subs:     []*command{perfCompareCommand, perfAnalyzeCommand},
}

// runPerf runs tests as p says.
func runPerf(ctx context.Context, p *perfFlags, tests []string, stdout, stderr io.Writer) error {
	var err error
	if p.rootAll {
		fmt.Fprintf(stderr, "nccl4go perf: note: -r all is root 0, as nccl-tests reads it; -r -1 runs every root\n")
	}
	if _, err := nccl.Version(); err != nil {
		return fmt.Errorf("perf: %w", err)
	}
	world, err := p.world(ctx, tests[0], stderr)
	if err != nil {
		return err
	}
	defer world.Close()

	// Every output file is opened before the first measurement: a path
	// that cannot be written fails now, not after the sweep.
	outs := make([]*perfOutputs, len(tests))
	var runErr error
	defer func() {
		for _, o := range outs {
			if err := o.close(runErr); err != nil && runErr == nil {
				fmt.Fprintf(stderr, "nccl4go: %v\n", err)
			}
		}
	}()
	for i, test := range tests {
		if outs[i], err = p.openOutputs(test, len(tests) > 1, world.Proc == 0); err != nil {
			runErr = err
			return err
		}
	}
	var plot *os.File
	if p.plotOut != "" && world.Proc == 0 {
		if plot, err = os.Create(p.plotOut); err != nil {
			runErr = fmt.Errorf("perf: plot: %w", err)
			return runErr
		}
	}
	var reports []*perf.Report
	var failures []string
	for i, test := range tests {
		o := p.o
		o.Test = test
		rep, err := p.runOne(ctx, o, world, outs[i], stdout, stderr)
		if rep != nil && len(rep.Rows) > 0 {
			reports = append(reports, rep)
		}
		if err != nil {
			runErr = err
			break
		}
		if rep.Errors > 0 {
			failures = append(failures, fmt.Sprintf("%s: %d results with wrong elements", test, rep.Errors))
		}
		if rep.BWFailed {
			failures = append(failures, fmt.Sprintf("%s: average bus bandwidth %.2f below 90%% of NCCL_TESTS_MIN_BW %.2f", test, rep.AvgBusBW, o.MinBusBW))
		}
	}
	if plot != nil {
		// Interrupted runs still draw what they measured; with nothing
		// measured, the empty file goes.
		var series []*perf.Series
		for _, r := range reports {
			series = append(series, perf.SeriesOf(r, fmt.Sprintf("%s (%d ranks)", r.Test, r.NRanks)))
		}
		if len(series) == 0 {
			plot.Close()
			os.Remove(p.plotOut)
		} else {
			format, _ := perf.PlotFormat(p.plotOut)
			err := perf.Plot(plot, format, "nccl4go perf", series...)
			if cerr := plot.Close(); err == nil {
				err = cerr
			}
			if err != nil && runErr == nil {
				runErr = err
				return err
			}
		}
	}
	if runErr != nil {
		return runErr
	}
	if world.Proc == 0 && p.summary {
		if err := writeJSON(stdout, perfSummaryOf(reports)); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("perf: %s", strings.Join(failures, "; "))
	}
	return nil
}

// world makes the ranks: one job over the launcher's processes, or the
// GPUs of this process.
func (p *perfFlags) world(ctx context.Context, test string, stderr io.Writer) (*perf.World, error) {
	ictx, cancel := context.WithTimeout(ctx, p.initTimeout)
	defer cancel()
	o := p.o
	o.Test = test
	cfg := o.CommConfig() // nccl-tests' configuration, and -x

	job, jobErr := rendezvous.FromEnv()
	if jobErr == nil && job.WorldSize > 1 {
		if len(p.o.Devices) > 1 || (len(p.o.Devices) == 0 && p.o.GPUs != 1) || p.o.Threads > 1 {
			return nil, fmt.Errorf("perf: under %s each process is one rank: use -g 1 and -t 1 (or one --devices entry)", job.Launcher)
		}
		dev := -1
		if len(p.o.Devices) == 1 {
			dev = p.o.Devices[0]
		} else if v, err := strconv.Atoi(os.Getenv("NCCL_TESTS_DEVICE")); err == nil {
			dev = v
		}
		w, err := perf.JobWorld(ictx, job, dev, cfg)
		if err != nil {
			return nil, fmt.Errorf("perf: joining the %s job: %w", job.Launcher, err)
		}
		return w, nil
	}
	if msg := perf.CollapsedWorld(job); msg != "" {
		fmt.Fprintf(stderr, "nccl4go perf: warning: %s\n", msg)
	}
	if jobErr != nil {
		fmt.Fprintf(stderr, "nccl4go perf: warning: %v; running as one process\n", jobErr)
	}
	devices := p.o.Devices
	if len(devices) == 0 {
		local := 0
		if job != nil {
			local = job.LocalRank
		}
		// -t threads of -g GPUs each: nccl-tests' device of rank i of the
		// process is localRank*nThreads*nGpus + i.
		devices = perf.LocalDevices(p.o.GPUs*max(p.o.Threads, 1), local)
	}
	w, err := perf.LocalWorld(ictx, devices, cfg)
	if err != nil {
		return nil, fmt.Errorf("perf: creating %d communicators on devices %v: %w", len(devices), devices, err)
	}
	return w, nil
}

// perfOutputs are one test's output files, opened before it runs.
type perfOutputs struct {
	json *perf.JSONWriter
	csv  *os.File
}

// testPath is the path of one test's file when several tests run:
// x.json becomes x.all_reduce.json.
func testPath(path, test string, several bool) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + test + ext
}

// openOutputs creates test's -J and -csv files (on the process that
// reports).
func (p *perfFlags) openOutputs(test string, several, reporter bool) (*perfOutputs, error) {
	out := &perfOutputs{}
	if !reporter {
		return out, nil
	}
	if p.jsonOut != "" {
		args := []string{"nccl4go", "perf", test}
		dropped := false
		for _, a := range p.args {
			if a == p.operand && !dropped {
				dropped = true
				continue
			}
			args = append(args, a)
		}
		j, err := perf.CreateJSON(testPath(p.jsonOut, test, several), args)
		if err != nil {
			return out, err
		}
		out.json = j
	}
	if p.csvOut != "" && p.csvOut != "-" {
		f, err := os.Create(testPath(p.csvOut, test, several))
		if err != nil {
			return out, fmt.Errorf("perf: CSV output: %w", err)
		}
		out.csv = f
	}
	return out, nil
}

// close closes the files; runErr, when set, is why the run ended early.
func (o *perfOutputs) close(runErr error) error {
	if o == nil {
		return nil
	}
	var errs []error
	if o.json != nil {
		errs = append(errs, o.json.CloseWithError(runErr))
	}
	if o.csv != nil {
		if err := o.csv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("perf: CSV output: %w", err))
		}
	}
	return errors.Join(errs...)
}

// runOne runs one test with its outputs.
func (p *perfFlags) runOne(ctx context.Context, o perf.Options, world *perf.World, out *perfOutputs, stdout, stderr io.Writer) (*perf.Report, error) {
	var reps []perf.Reporter
	table := &perf.TableWriter{W: stdout}
	if out.json != nil {
		table.JSONPath = out.json.Path
		reps = append(reps, out.json)
	}
	if !p.summary && p.csvOut != "-" {
		reps = append(reps, table)
		if o.Ceiling {
			reps = append(reps, &ceilingTable{w: stdout})
		}
	}
	if p.csvOut == "-" {
		reps = append(reps, perf.NewCSVWriter(stdout))
	} else if out.csv != nil {
		reps = append(reps, perf.NewCSVWriter(out.csv))
	}
	pr := newProgress(p.progress, o, world, stderr, stdout)
	if pr != nil {
		reps = append(reps, pr)
		defer pr.stop() // a run that ends early never calls End
	}
	return perf.Run(ctx, o, world, perf.Reporters(reps...))
}

// perfSummary is what -json prints.
type perfSummary struct {
	Tests []perfTestSummary `json:"tests"`
	OK    bool              `json:"ok"`
}

type perfTestSummary struct {
	Test      string  `json:"test"`
	NRanks    int     `json:"nranks"`
	Rows      int     `json:"rows"`
	AvgBusBW  float64 `json:"avg_busbw_gbs"`
	PeakBusBW float64 `json:"peak_busbw_gbs"`
	// PeakAt is the size in bytes of the peak.
	PeakAt      uint64   `json:"peak_at_bytes"`
	MinTimeUS   float64  `json:"min_time_us"`
	WrongCells  int      `json:"wrong_cells"`
	BusFactor   float64  `json:"bus_factor"`
	NCCLVersion int      `json:"nccl_version"`
	Skipped     []string `json:"skipped,omitempty"`
	// Ceiling is the limit at the largest size that has one (--ceiling).
	Ceiling *ceilingSummary `json:"ceiling,omitempty"`
}

// ceilingSummary is a row's out-of-place algbw against its path's limit.
type ceilingSummary struct {
	Path  string  `json:"path"`
	Size  uint64  `json:"size"`
	AlgBW float64 `json:"algbw_gbs"`
	Limit float64 `json:"limit_algbw_gbs"`
	Ratio float64 `json:"ratio"`
}

func perfSummaryOf(reports []*perf.Report) perfSummary {
	s := perfSummary{OK: true, Tests: []perfTestSummary{}}
	for _, r := range reports {
		t := perfTestSummary{Test: r.Test, NRanks: r.NRanks, Rows: len(r.Rows), AvgBusBW: r.AvgBusBW,
			WrongCells: r.Errors, NCCLVersion: r.NCCLVersion, Skipped: r.Skipped, MinTimeUS: -1}
		if t.AvgBusBW != t.AvgBusBW {
			t.AvgBusBW = 0
		}
		t.BusFactor, _ = perf.BusFactor(r.Test, r.NRanks)
		for _, row := range r.Rows {
			if c := row.Ceiling; c != nil && c.AlgBW > 0 && (t.Ceiling == nil || row.Size >= t.Ceiling.Size) {
				t.Ceiling = &ceilingSummary{Path: c.Path, Size: row.Size, AlgBW: row.OutOfPlace.AlgBW, Limit: c.AlgBW, Ratio: row.OutOfPlace.AlgBW / c.AlgBW}
			}
			for _, c := range []perf.Cell{row.OutOfPlace, row.InPlace} {
				if c.BusBW > t.PeakBusBW {
					t.PeakBusBW, t.PeakAt = c.BusBW, row.Size
				}
				if t.MinTimeUS < 0 || c.Time < t.MinTimeUS {
					t.MinTimeUS = c.Time
				}
			}
		}
		if r.Errors > 0 || r.BWFailed {
			s.OK = false
		}
		s.Tests = append(s.Tests, t)
	}
	return s
}

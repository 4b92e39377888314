package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/perf"
	"github.com/nccl4go/nccl/rendezvous"
)

const perfAbout = `Measure NCCL's bandwidth and latency as nccl-tests does, through the binding: the same
flags (short and long), the same table, the same bus bandwidth. TEST is one of
` + "  %s, or all.\n" + `
One process drives -g GPUs (or -devices, where a device may repeat when NCCL lets ranks share
a GPU: NCCL 2.30.3 with NCCL_MULTI_RANK_GPU_ENABLE=1). Under a launcher (nccl4go run, mpirun,
srun, torchrun) each process is one rank of one job, joined without MPI.

Beyond nccl-tests: -csv FILE, -plot FILE.png|svg, -json (a summary for scripts), a progress
bar on stderr when it is a terminal and stdout is not, and 'nccl4go perf compare A.json B.json'.`

// sizeFlag is a byte count with nccl-tests' K/M/G suffixes.
type sizeFlag struct{ v *uint64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return perf.FormatSize(*s.v)
}

func (s sizeFlag) Set(v string) error {
	n, err := perf.ParseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

// rootFlag is a rank, or "all" (-1).
type rootFlag struct{ v *int }

func (r rootFlag) String() string {
	if r.v == nil {
		return ""
	}
	if *r.v == -1 {
		return "all"
	}
	return strconv.Itoa(*r.v)
}

func (r rootFlag) Set(v string) error {
	if v == "all" {
		*r.v = -1
		return nil
	}
	n, err := strconv.ParseInt(v, 0, 32)
	if err != nil {
		return fmt.Errorf("%q: a rank or all", v)
	}
	*r.v = int(n)
	return nil
}

// perfFlags are the command line of nccl4go perf.
type perfFlags struct {
	fs          *flagSet
	o           perf.Options
	threads     int
	timeout     int
	pinit       int
	stream      int
	cputime     int
	unalign     int
	reg         int
	stamps      int
	mem         int
	periter     int
	jsonOut     string
	csvOut      string
	plotOut     string
	summary     bool
	devices     deviceList
	progress    string
	initTimeout time.Duration
}

// shortWithValue are the one-letter flags that take a value, for -b8.
const shortWithValue = "tgbeifnmwNpcodrzyTGCJaRSMuIKx"

func newPerfFlags() *perfFlags {
	p := &perfFlags{o: perf.DefaultOptions(""), threads: 1}
	fs := newFlagSet("perf", "TEST [flags]  |  nccl4go perf compare A.json B.json ...",
		fmt.Sprintf(perfAbout, strings.Join(perf.Tests(), ", ")))
	p.fs = fs
	o := &p.o
	both := func(short, long string, set func(name string)) { set(short); set(long) }
	intv := func(v *int, short, long string, usage string) {
		both(short, long, func(n string) { fs.IntVar(v, n, *v, usage) })
	}
	size := func(v *uint64, short, long, usage string) {
		both(short, long, func(n string) { fs.Var(sizeFlag{v}, n, usage) })
	}
	strv := func(v *string, short, long, usage string) {
		both(short, long, func(n string) { fs.StringVar(v, n, *v, usage) })
	}
	intv(&p.threads, "t", "nthreads", "threads per process (only 1)")
	intv(&o.GPUs, "g", "ngpus", "GPUs (ranks) this process drives")
	size(&o.MinBytes, "b", "minbytes", "smallest size in bytes (K, M, G suffixes: 1024^n)")
	size(&o.MaxBytes, "e", "maxbytes", "largest size in bytes")
	size(&o.StepBytes, "i", "stepbytes", "size increment when -f is 1")
	both("f", "stepfactor", func(n string) { fs.Uint64Var(&o.StepFactor, n, o.StepFactor, "size multiplier (> 1: geometric sweep)") })
	intv(&o.Iters, "n", "iters", "timed iterations per size")
	intv(&o.AggIters, "m", "agg_iters", "operations grouped per iteration")
	intv(&o.Warmup, "w", "warmup_iters", "warm-up iterations")
	intv(&o.Cycles, "N", "run_cycles", "times to run the sweep (0: until interrupted)")
	intv(&p.pinit, "p", "parallel_init", "accepted for compatibility (one thread)")
	intv(&o.Check, "c", "check", "checked runs per size (0: no check)")
	strv(&o.Op, "o", "op", "reduction: "+strings.Join(perf.OpNames(), ", ")+" or all")
	strv(&o.Type, "d", "datatype", "data type: "+strings.Join(perf.TypeNames(), ", ")+" or all")
	both("r", "root", func(n string) { fs.Var(rootFlag{&o.Root}, n, "root rank of rooted tests, or all") })
	intv(&o.Blocking, "z", "blocking", "1: wait and barrier after each op, 2: wait, 3: wait and barrier each iteration")
	intv(&p.stream, "y", "stream_null", "1: use the legacy default stream")
	intv(&p.timeout, "T", "timeout", "abort a wait longer than this many seconds (0: none)")
	intv(&o.Graph, "G", "cudagraph", "capture the iterations in a CUDA graph, launch it this many times")
	intv(&p.cputime, "C", "report_cputime", "1: report host time to issue the operations")
	intv(&o.Average, "a", "average", "time across processes: 0 rank 0, 1 mean, 2 min, 3 max")
	strv(&p.jsonOut, "J", "output_file", "write nccl-tests' JSON (version 3) to this file")
	intv(&p.reg, "R", "local_register", "buffer registration (unsupported: only 0)")
	intv(&p.stamps, "S", "report_timestamps", "timestamps (unsupported: only 0)")
	intv(&p.mem, "M", "memory", "memory report (unsupported: only 0)")
	intv(&p.unalign, "u", "unalign", "misalignment (unsupported: only 0)")
	intv(&p.periter, "I", "per_iter_timing", "per-iteration timing (unsupported: only 0)")
	fs.Var(&p.devices, "devices", "comma-separated CUDA devices, one rank each (may repeat a device; replaces -g)")
	fs.StringVar(&p.csvOut, "csv", "", "also write the results as CSV to this `file` (- for stdout instead of the table)")
	fs.StringVar(&p.plotOut, "plot", "", "draw bus bandwidth and time against size into this `file` (.png or .svg)")
	fs.BoolVar(&p.summary, "json", false, "print a JSON summary instead of the table")
	fs.StringVar(&p.progress, "progress", "auto", "progress bar on stderr: auto, always or never")
	fs.DurationVar(&p.initTimeout, "init-timeout", 5*time.Minute, "give up joining the job or creating communicators after this `duration`")
	return p
}

// splitShort turns getopt's "-b8" into "-b", "8" for the one-letter flags
// that take a value (Go's flag package wants them apart).
func splitShort(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.IndexByte(shortWithValue, a[1]) >= 0 &&
			!strings.Contains(a, "=") && fs.Lookup(a[1:]) == nil {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// parse reads args: TEST first or last, and the flags.
func (p *perfFlags) parse(args []string, stdout io.Writer) (tests []string, err error) {
	var test string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		test, args = args[0], args[1:]
	}
	if err := p.fs.FlagSet.Parse(splitShort(p.fs.FlagSet, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			p.fs.usage(stdout)
			return nil, err
		}
		return nil, &usageError{msg: fmt.Sprintf("perf: %v", err), usage: p.fs.usage}
	}
	rest := p.fs.Args()
	if test == "" && len(rest) > 0 {
		test, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return nil, &usageError{msg: fmt.Sprintf("perf: unexpected argument %q", rest[0]), usage: p.fs.usage}
	}
	if test == "" {
		return nil, &usageError{msg: "perf: no TEST given (one of " + strings.Join(perf.Tests(), ", ") + ", or all)", usage: p.fs.usage}
	}
	test = strings.TrimSuffix(test, "_perf")
	if test == "all" {
		tests = perf.Tests()
	} else {
		tests = []string{test}
	}
	bad := func(flagName string, v int, why string) error {
		return &usageError{msg: fmt.Sprintf("perf: -%s %d: %s", flagName, v, why), usage: p.fs.usage}
	}
	switch {
	case p.threads != 1:
		return nil, bad("t", p.threads, "one thread per process only (use -g, or one process per GPU under a launcher)")
	case p.reg != 0:
		return nil, bad("R", p.reg, "buffer registration is not supported by nccl4go perf")
	case p.stamps != 0:
		return nil, bad("S", p.stamps, "timestamps are not supported by nccl4go perf")
	case p.mem != 0:
		return nil, bad("M", p.mem, "the memory report is not supported by nccl4go perf")
	case p.unalign != 0:
		return nil, bad("u", p.unalign, "misaligned buffers are not supported by nccl4go perf")
	case p.periter != 0:
		return nil, bad("I", p.periter, "per-iteration timing is not supported by nccl4go perf")
	case p.timeout < 0:
		return nil, bad("T", p.timeout, "negative")
	case p.o.Graph > 0 && p.o.Blocking != 0:
		return nil, bad("G", p.o.Graph, "CUDA graphs and blocking modes (-z) do not mix: a capture cannot wait for its stream")
	}
	switch p.progress {
	case "auto", "always", "never":
	default:
		return nil, &usageError{msg: fmt.Sprintf("perf: -progress %q: auto, always or never", p.progress), usage: p.fs.usage}
	}
	p.o.StreamNull = p.stream != 0
	p.o.CPUTime = p.cputime != 0
	p.o.Timeout = time.Duration(p.timeout) * time.Second
	p.o.Devices = p.devices.list
	if v, err := strconv.ParseFloat(os.Getenv("NCCL_TESTS_MIN_BW"), 64); err == nil {
		p.o.MinBusBW = v
	}
	if p.plotOut != "" {
		if _, err := perf.PlotFormat(p.plotOut); err != nil {
			return nil, &usageError{msg: err.Error(), usage: p.fs.usage}
		}
	}
	for _, t := range tests {
		o := p.o
		o.Test = t
		if err := o.Validate(); err != nil {
			return nil, &usageError{msg: err.Error(), usage: p.fs.usage}
		}
	}
	return tests, nil
}

// runPerf is `nccl4go perf`.
func runPerf(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "compare" {
		return runPerfCompare(ctx, args[1:], stdout, stderr)
	}
	p := newPerfFlags()
	tests, err := p.parse(args, stdout)
	if err != nil {
		return err
	}
	if _, err := nccl.Version(); err != nil {
		return fmt.Errorf("perf: %w", err)
	}
	world, err := p.world(ctx, tests[0], stderr)
	if err != nil {
		return err
	}
	defer world.Close()

	var reports []*perf.Report
	var failures []string
	for _, test := range tests {
		o := p.o
		o.Test = test
		rep, err := p.runOne(ctx, o, world, len(tests) > 1, stdout, stderr)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		if rep.Errors > 0 {
			failures = append(failures, fmt.Sprintf("%s: %d results with wrong elements", test, rep.Errors))
		}
		if rep.BWFailed {
			failures = append(failures, fmt.Sprintf("%s: average bus bandwidth %.2f below 90%% of NCCL_TESTS_MIN_BW %.2f", test, rep.AvgBusBW, o.MinBusBW))
		}
	}
	if world.Proc == 0 {
		if p.summary {
			if err := writeJSON(stdout, perfSummaryOf(reports)); err != nil {
				return err
			}
		}
		if p.plotOut != "" {
			var series []*perf.Series
			for _, r := range reports {
				series = append(series, perf.SeriesOf(r, fmt.Sprintf("%s (%d ranks)", r.Test, r.NRanks)))
			}
			if err := perf.PlotFile(p.plotOut, "nccl4go perf", series...); err != nil {
				return err
			}
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
	cfg := perf.CommConfig(test)
	job, jobErr := rendezvous.FromEnv()
	if jobErr == nil && job.WorldSize > 1 {
		if len(p.o.Devices) > 1 || (len(p.o.Devices) == 0 && p.o.GPUs != 1) {
			return nil, fmt.Errorf("perf: under %s each process is one rank: use -g 1 (or one -devices entry)", job.Launcher)
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
		devices = perf.LocalDevices(p.o.GPUs, local)
	}
	w, err := perf.LocalWorld(ictx, devices, cfg)
	if err != nil {
		return nil, fmt.Errorf("perf: creating %d communicators on devices %v: %w", len(devices), devices, err)
	}
	return w, nil
}

// runOne runs one test with its outputs.
func (p *perfFlags) runOne(ctx context.Context, o perf.Options, world *perf.World, several bool, stdout, stderr io.Writer) (*perf.Report, error) {
	var reps []perf.Reporter
	table := &perf.TableWriter{W: stdout}
	jsonPath := ""
	if p.jsonOut != "" && world.Proc == 0 {
		path := p.jsonOut
		if several {
			ext := filepath.Ext(path)
			path = strings.TrimSuffix(path, ext) + "." + o.Test + ext
		}
		jsonPath = freshPath(path)
		table.JSONPath = jsonPath
	}
	if !p.summary && p.csvOut != "-" {
		reps = append(reps, table)
	}
	var csvFile *os.File
	if p.csvOut == "-" {
		reps = append(reps, perf.NewCSVWriter(stdout))
	} else if p.csvOut != "" && world.Proc == 0 {
		path := p.csvOut
		if several {
			ext := filepath.Ext(path)
			path = strings.TrimSuffix(path, ext) + "." + o.Test + ext
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("perf: %w", err)
		}
		csvFile = f
		defer f.Close()
		reps = append(reps, perf.NewCSVWriter(f))
	}
	if pr := newProgress(p.progress, o, stderr, stdout); pr != nil {
		reps = append(reps, pr)
	}
	rep, err := perf.Run(ctx, o, world, perf.Reporters(reps...))
	if err != nil {
		return nil, err
	}
	if csvFile != nil {
		if err := csvFile.Close(); err != nil {
			return nil, fmt.Errorf("perf: %w", err)
		}
	}
	if jsonPath != "" {
		f, err := os.Create(jsonPath)
		if err != nil {
			return nil, fmt.Errorf("perf: %w", err)
		}
		args := append([]string{"nccl4go", "perf", o.Test}, os.Args[min(len(os.Args), 3):]...)
		if err := perf.WriteJSON(f, rep, args); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("perf: %w", err)
		}
	}
	return rep, nil
}

// freshPath is nccl-tests' choice of JSON file: path, or path.0, path.1...
// when it exists.
func freshPath(path string) string {
	try := path
	for i := 0; ; i++ {
		if _, err := os.Stat(try); errors.Is(err, os.ErrNotExist) {
			return try
		}
		try = fmt.Sprintf("%s.%d", path, i)
	}
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

// runPerfCompare is `nccl4go perf compare`.
func runPerfCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("perf compare", "A.json B.json ... [-plot FILE] [-from SIZE] [-json]",
		"Compare runs saved with -J (by nccl4go perf or by nccl-tests itself): for each run after the\n"+
			"first, a table of times and bus bandwidths side by side with the first's and their ratio,\n"+
			"size by size; with -plot, every run's curves in one picture.")
	plotOut := fs.String("plot", "", "draw every run into this `file` (.png or .svg)")
	from := fs.String("from", "1M", "report the largest time ratio from this `size` up")
	jsonOut := fs.Bool("json", false, "print the ratios as JSON")
	var files []string
	// Flags may come before or after the files.
	rest := args
	for len(rest) > 0 {
		if err := fs.FlagSet.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.usage(stdout)
				return err
			}
			return &usageError{msg: fmt.Sprintf("perf compare: %v", err), usage: fs.usage}
		}
		rest = fs.Args()
		if len(rest) > 0 {
			files = append(files, rest[0])
			rest = rest[1:]
		}
	}
	if len(files) < 2 {
		return &usageError{msg: "perf compare: need at least two JSON files", usage: fs.usage}
	}
	minSize, err := perf.ParseSize(*from)
	if err != nil {
		return &usageError{msg: "perf compare: -from: " + err.Error(), usage: fs.usage}
	}
	if *plotOut != "" {
		if _, err := perf.PlotFormat(*plotOut); err != nil {
			return &usageError{msg: err.Error(), usage: fs.usage}
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

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/perf"
)

// sizeFlag is a byte count as nccl-tests' parsesize reads it.
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

func (sizeFlag) Type() string { return "size" }

// cInt is an int flag read as C's strtol(optarg, NULL, 0) reads it, which
// is how nccl-tests reads all its integer flags: an optional sign, then a
// decimal, 0x hexadecimal or 0 octal number; reading stops at the first
// character that does not fit, and no digits at all is 0. So "-r all" is
// root 0, not every root: nccl-tests' README says -r takes "all", but its
// code reads it as 0, and -1 is what runs every root. nccl4go perf keeps
// the code's meaning so that the same command line measures the same thing.
type cInt struct{ v *int }

func (c cInt) String() string {
	if c.v == nil {
		return ""
	}
	return strconv.Itoa(*c.v)
}

func (c cInt) Set(s string) error {
	*c.v = int(strtol(s))
	return nil
}

func (cInt) Type() string { return "int" }

// strtol is C's strtol(s, NULL, 0), saturated to 32 bits as nccl-tests'
// int casts of it are on a 64-bit long (which wrap; saturating is the
// defined behaviour closest to it).
func strtol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := 10
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[2])):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var n int64
	for _, c := range []byte(s) {
		var d int64
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case c >= 'a' && c <= 'f':
			d = int64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int64(c-'A') + 10
		default:
			d = 99
		}
		if d >= int64(base) {
			break
		}
		n = n*int64(base) + d
		if n > 1<<31 {
			n = 1 << 31
		}
	}
	if neg {
		n = -n
	}
	return max(min(n, 1<<31-1), -1<<31)
}

// rootFlag is -r: a cInt that notes a word ("all"), which strtol reads
// as 0 where a user may expect every root.
type rootFlag struct {
	cInt
	word *bool
}

func (r rootFlag) Set(s string) error {
	t := strings.TrimLeft(s, " \t+-")
	*r.word = t == "" || t[0] < '0' || t[0] > '9'
	return r.cInt.Set(s)
}

// perfFlags are the command line of nccl4go perf.
type perfFlags struct {
	fs          *pflag.FlagSet
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
	periterSkip int
	cta         int
	devImpl     int
	devCTAs     int
	jsonOut     string
	csvOut      string
	plotOut     string
	summary     bool
	devices     deviceList
	progress    string
	initTimeout time.Duration
	rootAll     bool     // -r was given a word ("all"): nccl-tests reads it as 0
	args        []string // the command line after perf, for the JSON file
	operand     string   // TEST as given
}

// perfGroup is the annotation of a perf flag naming its heading in perf -h;
// a flag without one is not shown.
const perfGroup = "perf-group"

// newPerfFlags is perf's command line on a flag set of its own (tests).
func newPerfFlags() *perfFlags {
	fs := pflag.NewFlagSet("perf", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return bindPerfFlags(fs)
}

// bindPerfFlags defines perf's flags on fs, each under its heading of
// perf -h.
func bindPerfFlags(fs *pflag.FlagSet) *perfFlags {
	p := &perfFlags{o: perf.DefaultOptions(""), threads: 1, devCTAs: 16}
	p.fs = fs
	o := &p.o
	group := ""
	begin := func(title string) { group = title }
	add := func(name string) {
		if group != "" {
			fs.SetAnnotation(name, perfGroup, []string{group})
		}
	}
	intv := func(v *int, short, long, usage string) {
		fs.VarP(cInt{v}, long, short, usage)
		add(long)
	}
	size := func(v *uint64, short, long, usage string) {
		fs.VarP(sizeFlag{v}, long, short, usage)
		add(long)
	}
	strv := func(v *string, short, long, usage string) {
		fs.StringVarP(v, long, short, *v, usage)
		add(long)
	}

	begin("Sizes (SIZE: 8, 64K, 32M, 32MB, 1GiB: binary units, first letter counts)")
	size(&o.MinBytes, "b", "minbytes", "smallest `SIZE` in bytes")
	size(&o.MaxBytes, "e", "maxbytes", "largest `SIZE` in bytes")
	fs.VarP(cUint{&o.StepFactor}, "stepfactor", "f", "multiply the size by `N` at each step; 1: add -i instead")
	add("stepfactor")
	size(&o.StepBytes, "i", "stepbytes", "add `SIZE` at each step when -f is 1")

	begin("What runs")
	strv(&o.Op, "o", "op", "`OP`: "+strings.Join(perf.OpNames(), ", ")+" or all")
	strv(&o.Type, "d", "datatype", "`TYPE` (above) or all")
	fs.VarP(rootFlag{cInt{&o.Root}, &p.rootAll}, "root", "r", "`RANK` of rooted tests; -1: every root (\"all\" reads as 0, as in nccl-tests)")
	add("root")
	intv(&o.Iters, "n", "iters", "timed iterations per size")
	intv(&o.Warmup, "w", "warmup_iters", "warm-up iterations")
	intv(&o.AggIters, "m", "agg_iters", "operations grouped in each iteration")
	intv(&o.Cycles, "N", "run_cycles", "sweeps to run (0: until Ctrl-C)")
	intv(&o.Check, "c", "check", "checked runs per size (0: no check)")
	intv(&o.Average, "a", "average", "time across processes: 0 rank 0, 1 mean, 2 min, 3 max")

	begin("How it runs")
	intv(&o.Blocking, "z", "blocking", "1: wait and barrier after each op, 2: wait, 3: wait and barrier per iteration")
	intv(&o.Graph, "G", "cudagraph", "capture the iterations in a CUDA graph, launch it `N` times")
	intv(&p.stream, "y", "stream_null", "1: use the legacy default stream")
	intv(&p.cputime, "C", "report_cputime", "1: report host time to issue the operations")
	intv(&p.timeout, "T", "timeout", "abort a wait longer than `SEC` seconds (0: none)")
	intv(&p.periter, "I", "per_iter_timing", "1: time every iteration with CUDA events (i_min, i_max, i_p99, i_cv% columns)")
	intv(&p.periterSkip, "K", "per_iter_skip", "leave the first `N` iterations out of -I's statistics")
	intv(&p.stamps, "S", "report_timestamps", "1: print the time at the end of each row")
	intv(&p.reg, "R", "local_register", "register the buffers: 1 ncclCommRegister, 2 symmetric windows (NCCL 2.27)")
	intv(&p.unalign, "u", "unalign", "misalign the buffers by `N` elements")
	intv(&p.cta, "x", "cta_policy", "the communicators' NCCL CTA policy `FLAGS`: 1 efficiency, 2 zero, 3 both (0: NCCL's)")
	intv(&p.mem, "M", "memory", "1: report the GPU memory used (init, buffers, collectives)")
	boolFlag(fs, &p.o.Ceiling, "ceiling", "", "measure each row's limit where known (one rank: a device memcpy of the same bytes)")
	add("ceiling")

	begin("Ranks (under nccl4go run, mpirun, srun or torchrun each process is one rank)")
	intv(&o.GPUs, "g", "ngpus", "GPUs (ranks) each thread drives")
	intv(&p.threads, "t", "nthreads", "threads of this process, each on an OS thread of its own")
	fs.Var(&p.devices, "devices", "CUDA devices, one rank each: 0,1,2 (replaces -g; repeats: NCCL_MULTI_RANK_GPU_ENABLE=1)")
	add("devices")
	fs.DurationVar(&p.initTimeout, "init-timeout", 5*time.Minute, "give up joining the job after `DUR`")
	add("init-timeout")

	begin("Output (the table goes to stdout, as nccl-tests prints it)")
	strv(&p.jsonOut, "J", "output_file", "write nccl-tests' JSON to `FILE` (path.0, path.1... if it exists)")
	fs.StringVar(&p.csvOut, "csv", "", "also write CSV to `FILE` (-: on stdout, instead of the table)")
	add("csv")
	fs.StringVar(&p.plotOut, "plot", "", "draw bandwidth and time against size into `FILE` (.png, .svg)")
	add("plot")
	boolFlag(fs, &p.summary, "json", "", "print a JSON summary for scripts instead of the table")
	add("json")
	fs.StringVar(&p.progress, "progress", "auto", "progress bar on stderr: `auto`, always or never")
	add("progress")

	// nccl-tests' flags nccl4go perf does not do yet: accepted with their
	// default so that nccl-tests command lines run, refused otherwise with
	// the reason (perfAccepted, [perf.Unsupported]).
	begin("")
	hidden := func(v *int, short, long string) {
		fs.VarP(cInt{v}, long, short, "")
		add(long)
	}
	hidden(&p.pinit, "p", "parallel_init")
	hidden(&p.devImpl, "D", "device_implementation")
	hidden(&p.devCTAs, "V", "device_cta_count")
	return p
}

// wrapIndent wraps text into lines of at most width characters, each
// indented by indent blanks.
func wrapIndent(text string, indent, width int) string {
	var b strings.Builder
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && indent+len(line)+1+len(w) > width {
			b.WriteString(strings.Repeat(" ", indent) + line + "\n")
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		b.WriteString(strings.Repeat(" ", indent) + line + "\n")
	}
	return b.String()
}

// cUint is an unsigned flag read as strtol reads it (-f).
type cUint struct{ v *uint64 }

func (c cUint) String() string {
	if c.v == nil {
		return ""
	}
	return strconv.FormatUint(*c.v, 10)
}

func (c cUint) Set(s string) error {
	n := strtol(s)
	if n < 0 {
		return fmt.Errorf("negative")
	}
	*c.v = uint64(n)
	return nil
}

func (cUint) Type() string { return "uint" }

// perfAccepted are the values of the flags of [perf.Unsupported] that
// nccl4go perf accepts (nccl-tests' defaults, which mean "not used"), so
// that nccl-tests command lines run; any other value is refused with the
// feature's reason.
var perfAccepted = map[string]int{"-p": 0, "-D": 0, "-V": 16}

// writePerfFlags writes perf -h's flags: grouped by heading, -b and
// --minbytes on one line, then what nccl4go perf does not do.
func writePerfFlags(w io.Writer, fs *pflag.FlagSet) {
	title := ""
	fs.VisitAll(func(f *pflag.Flag) {
		g := f.Annotations[perfGroup]
		if len(g) == 0 {
			return
		}
		if g[0] != title {
			if title != "" {
				fmt.Fprintln(w)
			}
			title = g[0]
			fmt.Fprintf(w, "%s:\n", title)
		}
		name, usage := pflag.UnquoteUsage(f)
		switch name {
		case "int", "uint", "string":
			name = "N"
		case "list":
			name = "LIST"
		case "bool":
			name = ""
		}
		left := "    --" + f.Name + " " + name
		if f.Shorthand != "" {
			left = "-" + f.Shorthand + ", --" + f.Name + " " + name
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.Value.Type() != "list" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %-26s %s\n", strings.TrimRight(left, " "), usage)
	})
	fmt.Fprintf(w, "\nNot supported (nccl-tests 2.19.6 has them; flags are accepted at their defaults):\n")
	for _, u := range perf.Unsupported {
		what := u.Name
		if u.Flag != "" {
			what = u.Flag + ", " + u.Name
		}
		fmt.Fprintf(w, "  %s\n%s", what, wrapIndent(u.Reason, 6, 92))
	}
}

// parse reads args as the dispatcher does (tests): TEST anywhere among
// the flags.
func (p *perfFlags) parse(args []string, stdout io.Writer) (tests []string, err error) {
	if err := p.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, helpText([]*command{root, perfCommand}))
			return nil, errHelp
		}
		return nil, withHint([]*command{root, perfCommand}, flagError(p.fs, args, err, true))
	}
	tests, err = p.operands(args, p.fs.Args())
	return tests, withHint([]*command{root, perfCommand}, err)
}

// operands checks the command line once its flags are parsed: args as
// given, rest the operands (TEST).
func (p *perfFlags) operands(args, rest []string) (tests []string, err error) {
	p.args = args
	if len(rest) == 0 {
		return nil, usagef("no TEST given (one of %s, or all)", strings.Join(perf.Tests(), ", "))
	}
	if len(rest) > 1 {
		return nil, usagef("unexpected argument %q after TEST %q", rest[1], rest[0])
	}
	p.operand = rest[0]
	test := strings.TrimSuffix(rest[0], "_perf")
	if test == "all" {
		tests = perf.Tests()
	} else {
		tests = []string{test}
	}
	values := map[string]int{"-p": p.pinit, "-D": p.devImpl, "-V": p.devCTAs}
	for _, u := range perf.Unsupported {
		if v, ok := values[u.Flag]; ok && v != perfAccepted[u.Flag] {
			return nil, usagef("%s %d: %s", u.Flag, v, u.Reason)
		}
	}
	switch {
	case p.periter != 0 && p.periter != 1:
		return nil, usagef("-I %d: 0 (off) or 1 (on)", p.periter)
	case p.timeout < 0:
		return nil, usagef("-T %d: negative", p.timeout)
	case p.o.Graph > 0 && p.o.Blocking != 0:
		return nil, usagef("-G %d: CUDA graphs and blocking modes (-z) do not mix: a capture cannot wait for its stream", p.o.Graph)
	case p.summary && p.csvOut == "-":
		return nil, usagef("--json and --csv - both print on stdout: give --csv a file")
	}
	switch p.progress {
	case "auto", "always", "never":
	default:
		return nil, usagef("--progress %q: auto, always or never", p.progress)
	}
	p.o.PerIterTiming = p.periter == 1
	p.o.PerIterSkip = p.periterSkip
	p.o.Timestamps = p.stamps != 0
	p.o.Threads = p.threads
	p.o.Register = p.reg
	p.o.Unaligned = p.unalign
	p.o.CTAPolicy = p.cta
	p.o.MemoryReport = p.mem != 0
	if v := os.Getenv("NCCL_TESTS_ALLTOALLV_SPREAD"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, usagef("NCCL_TESTS_ALLTOALLV_SPREAD=%q: a number from 0 to 1", v)
		}
		p.o.AlltoallvSpread = &f
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
			return nil, usagef("%s", strings.TrimPrefix(err.Error(), "perf: "))
		}
	}
	for _, t := range tests {
		o := p.o
		o.Test = t
		if err := o.Validate(); err != nil {
			return nil, usagef("%s", strings.TrimPrefix(err.Error(), "perf: "))
		}
	}
	return tests, nil
}

package perf

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// NCCLTestsVersion is the nccl-tests release whose output this package
// reproduces (src/common.h NCCL_TESTS_VERSION).
const NCCLTestsVersion = "2.19.6"

// Version is the version of this benchmark, printed in its header.
const Version = "0.1.0"

// DeviceInfo describes one rank's GPU, as nccl-tests' "Using devices" lines.
type DeviceInfo struct {
	Rank   int    `json:"rank"`
	Group  int    `json:"group"`
	Pid    int    `json:"pid"`
	Host   string `json:"hostname"`
	Device int    `json:"device"`
	PCI    string `json:"device_hex"`  // domain:bus:device, "0000:19:00"
	Name   string `json:"device_info"` // the GPU's name
}

// line is nccl-tests' device line.
func (d DeviceInfo) line() string {
	return fmt.Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
		d.Rank, d.Group, d.Pid, d.Host, d.Device, d.PCI, d.Name)
}

// Header is what a run prints before its first result.
type Header struct {
	Program     string // nccl-tests' binary name, e.g. "all_reduce_perf"
	Options     Options
	NRanks      int
	LocalRanks  int // ranks of this process (nccl-tests' nGpus)
	NCCLVersion int // ncclGetVersion of the loaded library, e.g. 23007
	ABIVersion  int // the NCCL release the binding's declarations match
	Devices     []DeviceInfo
	// ReducedMaxBytes is set when the sweep was cut to fit GPU memory.
	ReducedMaxBytes uint64
	// BufferMemory is the GPU memory the benchmark's buffers took (-M;
	// the most on any GPU of the job).
	BufferMemory uint64
}

// MemoryReport is nccl-tests' "GPU memory usage" line (-M): bytes used on
// the GPU that used the most, at communicator creation, by the
// benchmark's buffers, and during the collectives (NCCL's own
// allocations on first use of a path).
type MemoryReport struct {
	Init       int64  `json:"initialization"`
	Buffers    uint64 `json:"user_allocated"`
	Collective int64  `json:"collective"`
}

// memString is nccl-tests' getMemString: B, KB, MB or GB with 2, 1 or 0
// decimals.
func memString(n int64) string {
	v := float64(n)
	unit := " B"
	switch a := math.Abs(v); {
	case a >= 1<<30:
		v, unit = v/(1<<30), " GB"
	case a >= 1<<20:
		v, unit = v/(1<<20), " MB"
	case a >= 1<<10:
		v, unit = v/(1<<10), " KB"
	}
	prec := 0
	switch a := math.Abs(v); {
	case a < 10:
		prec = 2
	case a < 100:
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + unit
}

// Cell is one timing column group: out-of-place or in-place.
type Cell struct {
	Time    float64 // microseconds per operation (host time with -C)
	AlgBW   float64 // GB/s
	BusBW   float64 // GB/s
	Wrong   int64   // elements that differed from the reference, over all ranks
	Checked bool    // Wrong is meaningful (false prints N/A)
	// PerIter are the per-iteration times (-I; nil without).
	PerIter *IterStats
}

// Row is one line of results: one size, type, reduction and root.
type Row struct {
	Size       uint64 // bytes: the larger of the send and receive buffers
	Count      uint64 // elements passed to NCCL
	Type       string // nccl-tests' type name, e.g. "float"
	Op         string // reduction, "none", or "" (hypercube)
	Root       int    // -1 when the test has no root
	OutOfPlace Cell
	InPlace    Cell
	// Ceiling is the limit of the measured path, where known and asked
	// for ([Options.Ceiling]; nil otherwise).
	Ceiling *Ceiling
}

// Report is a whole run.
type Report struct {
	Header
	Test  string
	Rows  []Row
	Iters int // timed iterations per size
	// Errors counts the result cells with wrong elements (summed over
	// processes, as nccl-tests counts "Out of bounds values").
	Errors int
	// AvgBusBW is the mean bus bandwidth over every cell of every row
	// (NaN when there is none).
	AvgBusBW float64
	// BWFailed is set when AvgBusBW is below 90% of [Options.MinBusBW].
	BWFailed bool
	// Skipped lists the type and reduction pairs of an "all" sweep that the
	// loaded NCCL or the GPU does not support, with the reason.
	Skipped []string
	// Memory is the -M report (nil without -M).
	Memory *MemoryReport
	// LastError is ncclGetLastError after the run ("" when NCCL logged
	// nothing), printed last as nccl-tests does.
	LastError string
	// Start and End are the wall-clock times of the run.
	Start, End time.Time
}

// Reporter receives a run's output as it happens. The engine calls it
// from one goroutine, on the process that prints (rank 0's).
type Reporter interface {
	Begin(h *Header)
	Row(test string, r *Row)
	End(r *Report)
}

// floatStr is nccl-tests' getFloatStr: the value in width characters with
// 2, 1 or 0 decimals, else in exponent notation.
func floatStr(v float64, width int) string {
	for _, prec := range []int{2, 1, 0} {
		s := cFixed(v, width, prec)
		if len(s) <= width {
			return s
		}
	}
	prec := 1
	if width < 7 {
		prec = 0
	}
	s := cExp(v, width, prec)
	if len(s) > width { // snprintf truncates to width
		s = s[:width]
	}
	return s
}

// cFixed is C's "%*.*f" (NaN and infinities as glibc writes them).
func cFixed(v float64, width, prec int) string {
	return pad(cSpecial(v, func() string { return strconv.FormatFloat(v, 'f', prec, 64) }), width)
}

// cExp is C's "%*.*e".
func cExp(v float64, width, prec int) string {
	return pad(cSpecial(v, func() string { return strconv.FormatFloat(v, 'e', prec, 64) }), width)
}

func cSpecial(v float64, f func() string) string {
	switch {
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return f()
}

func pad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat(" ", width-len(s)) + s
}

// cG is C's "%g": 6 significant digits, trailing zeros removed.
func cG(v float64) string {
	return cSpecial(v, func() string { return strconv.FormatFloat(v, 'g', 6, 64) })
}

// cGFix makes Go's 'g' output match C's for exponents (Go writes e+06 as C
// does, and drops trailing zeros as %g does), so cG is enough; kept apart
// for the #wrong column's width.
func cGWidth(v float64, width int) string { return pad(cG(v), width) }

// TableWriter prints nccl-tests' output, byte for byte where the run is
// the same (see the package documentation for the lines that differ).
type TableWriter struct {
	W io.Writer
	// JSONPath, when set, prints nccl-tests' "# Writing JSON output to"
	// line first.
	JSONPath string
	// perIter and stamps are -I and -S of the run begun.
	perIter, stamps bool
	// now is the clock of the timestamps (time.Now when nil).
	now func() time.Time
}

// Begin prints the header: the run's settings, the devices and the column
// titles.
func (t *TableWriter) Begin(h *Header) {
	w := t.W
	o := h.Options
	if t.JSONPath != "" {
		fmt.Fprintf(w, "# Writing JSON output to %s\n", t.JSONPath)
	}
	fmt.Fprintf(w, "# nccl4go perf %s (nccl-tests %s format) nccl-headers=%d nccl-library=%d\n", Version, NCCLTestsVersion, h.ABIVersion, h.NCCLVersion)
	fmt.Fprintf(w, "# Collective test starting: %s\n", h.Program)
	step, kind := o.StepBytes, "bytes"
	if o.StepFactor > 1 {
		step, kind = o.StepFactor, "factor"
	}
	graph := o.Graph
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		max(o.Threads, 1), h.localGPUs(), o.MinBytes, o.MaxBytes, step, kind, o.Warmup, o.Iters, o.AggIters, o.Check, graph, o.Unaligned)
	switch o.Blocking {
	case 1:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n")
	case 2:
		fmt.Fprintf(w, "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n")
	case 3:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n")
	}
	t.perIter, t.stamps = o.PerIterTiming && o.Graph == 0, o.Timestamps
	if t.perIter {
		fmt.Fprintf(w, "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows")
		if o.PerIterSkip > 0 {
			fmt.Fprintf(w, "; summary skips first %d iterations", o.PerIterSkip)
		}
		fmt.Fprintf(w, " \n")
	}
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# Using devices\n")
	for _, d := range h.Devices {
		io.WriteString(w, d.line())
	}
	if h.ReducedMaxBytes != 0 {
		fmt.Fprintf(w, "#\n# Reducing maxBytes to %d due to memory limitation\n", h.ReducedMaxBytes)
	}
	timeStr := "time"
	if o.CPUTime {
		timeStr = "cputime"
	}
	tsLbl, tsPad, tsFmt := "", 0, ""
	if t.stamps {
		tsLbl, tsPad, tsFmt = "timestamp", 19, "%Y-%m-%d %H:%M:%S"
	}
	fmt.Fprintf(w, "#\n")
	if t.perIter {
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n", "", "", "", "", "")
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s\n",
			"size", "count", "type", "redop", "root",
			timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
			timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsPad, tsLbl)
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s\n",
			"(B)", "(elements)", "", "", "",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsPad, tsFmt)
		return
	}
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop", "root",
		timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", tsPad, tsLbl)
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt)
}

// localGPUs is the nGpus of the header line: GPUs per process.
func (h *Header) localGPUs() int {
	if h.LocalRanks > 0 {
		return h.LocalRanks
	}
	if len(h.Options.Devices) > 0 {
		return len(h.Options.Devices)
	}
	return h.Options.GPUs
}

// Row prints one result line: with -I the per-iteration columns after
// each cell, with -S the time at the end.
func (t *TableWriter) Row(test string, r *Row) {
	var b strings.Builder
	writeRow(&b, r, t.perIter)
	if t.stamps {
		now := time.Now
		if t.now != nil {
			now = t.now
		}
		fmt.Fprintf(&b, "%21s", now().Format("2006-01-02 15:04:05"))
	}
	b.WriteString("\n")
	io.WriteString(t.W, b.String())
}

func writeRow(b *strings.Builder, r *Row, perIter bool) {
	fmt.Fprintf(b, "%12d  %12d  %8s  %6s  %6s", r.Size, r.Count, r.Type, r.Op, fmt.Sprintf("%6d", r.Root))
	for _, c := range []*Cell{&r.OutOfPlace, &r.InPlace} {
		if c.Checked {
			fmt.Fprintf(b, "  %7s  %6s  %6s  %6s", floatStr(c.Time, 7), floatStr(c.AlgBW, 6), floatStr(c.BusBW, 6), cGWidth(float64(c.Wrong), 6))
		} else {
			fmt.Fprintf(b, "  %7s  %6s  %6s    N/A", floatStr(c.Time, 7), floatStr(c.AlgBW, 6), floatStr(c.BusBW, 6))
		}
		if perIter && c.PerIter != nil {
			p := c.PerIter
			fmt.Fprintf(b, "  %7s  %7s  %7s  %7s", floatStr(p.Min, 7), floatStr(p.Max, 7), floatStr(p.P99, 7), floatStr(p.CV, 7))
		}
	}
}

// End prints the footer.
func (t *TableWriter) End(r *Report) {
	w := t.W
	status := "OK"
	if r.Errors != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", r.Errors, status)
	bwStatus := ""
	if r.Options.MinBusBW > 0 {
		bwStatus = "OK"
		if r.BWFailed {
			bwStatus = "FAILED"
		}
	}
	fmt.Fprintf(w, "# %-20s : %s %s\n", "Avg bus bandwidth", cG(r.AvgBusBW), bwStatus)
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# Collective test concluded: %s\n", r.Program)
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n", "GPU memory usage",
			memString(m.Init), memString(int64(m.Buffers)), memString(m.Collective), memString(m.Init+int64(m.Buffers)+m.Collective))
	}
	fmt.Fprintf(w, "#\n")
	if r.LastError != "" {
		fmt.Fprintf(w, "# error: %s\n", r.LastError)
	} else {
		fmt.Fprintf(w, "\n")
	}
}

// multiReporter fans out to several reporters.
type multiReporter []Reporter

func (m multiReporter) Begin(h *Header) {
	for _, r := range m {
		r.Begin(h)
	}
}

func (m multiReporter) Row(test string, row *Row) {
	for _, r := range m {
		r.Row(test, row)
	}
}

func (m multiReporter) End(rep *Report) {
	for _, r := range m {
		r.End(rep)
	}
}

// Reporters combines reporters into one; nil ones are dropped.
func Reporters(rs ...Reporter) Reporter {
	var m multiReporter
	for _, r := range rs {
		if r != nil {
			m = append(m, r)
		}
	}
	return m
}

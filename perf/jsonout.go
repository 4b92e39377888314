package perf

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// jsonCell is a result cell in the file.
type jsonCell struct {
	Time    *flexFloat `json:"time,omitempty"`
	CPUTime *flexFloat `json:"cpu_time,omitempty"`
	AlgBW   flexFloat  `json:"alg_bw"`
	BusBW   flexFloat  `json:"bus_bw"`
	NWrong  *flexFloat `json:"nwrong"`
}

// jsonPerIter is nccl-tests' per-iteration object (-I 1, JSON version 3):
// out_of_place_per_iter and in_place_per_iter (src/util.cu
// writePerIterReport). TimesUS holds every iteration, the skipped ones
// (-K) included; the statistics leave them out. PerProcess, written when
// the job has several processes, holds each process's times (the maximum
// over its GPUs), one list per process in process order; TimesUS is their
// maximum, iteration by iteration.
type jsonPerIter struct {
	Skipped    int           `json:"skipped_iterations"`
	MinUS      flexFloat     `json:"min_us"`
	MaxUS      flexFloat     `json:"max_us"`
	AvgUS      flexFloat     `json:"avg_us"`
	P50US      flexFloat     `json:"p50_us"`
	P95US      flexFloat     `json:"p95_us"`
	P99US      flexFloat     `json:"p99_us"`
	StdevUS    flexFloat     `json:"stdev_us"`
	CVPct      flexFloat     `json:"cv_pct"`
	TimesUS    []flexFloat   `json:"times_us"`
	PerProcess [][]flexFloat `json:"per_process_max_times_us,omitempty"`
}

type jsonRow struct {
	Size            uint64          `json:"size"`
	Count           uint64          `json:"count"`
	Type            string          `json:"type"`
	Redop           string          `json:"redop"`
	Root            json.RawMessage `json:"root"`
	OutOfPlace      *jsonCell       `json:"out_of_place"`
	OutOfPlaceIters *jsonPerIter    `json:"out_of_place_per_iter,omitempty"`
	InPlace         *jsonCell       `json:"in_place"`
	InPlaceIters    *jsonPerIter    `json:"in_place_per_iter,omitempty"`
	Ceiling         *jsonCeiling    `json:"ceiling,omitempty"`
	Iters           int             `json:"actual_iterations"`
	Experiment      string          `json:"experiment_name"`
}

// jsonCeiling is a row's [Ceiling] (nccl4go's; nccl-tests has none).
type jsonCeiling struct {
	Path  string    `json:"path"`
	AlgBW flexFloat `json:"alg_bw"`
}

type jsonConfig struct {
	NThreads     int          `json:"nthreads"`
	NGPUs        int          `json:"ngpus"`
	MinBytes     uint64       `json:"minimum_bytes"`
	MaxBytes     uint64       `json:"maximum_bytes"`
	StepFactor   *uint64      `json:"step_factor,omitempty"`
	StepBytes    *uint64      `json:"step_bytes,omitempty"`
	Warmup       int          `json:"warmup_iters"`
	Iters        int          `json:"iterations"`
	AggIters     int          `json:"aggregated_iterations"`
	Validation   int          `json:"validation"`
	Graph        int          `json:"graph"`
	Blocking     flexBool     `json:"blocking_collectives"`
	PerIter      flexBool     `json:"per_iter_timing"`
	PerIterSkip  int          `json:"per_iter_skip"`
	ParallelInit flexBool     `json:"parallel_init"`
	Devices      []DeviceInfo `json:"devices"`
}

type jsonOK struct {
	Count int       `json:"count"`
	Okay  *flexBool `json:"okay"`
}

type jsonBW struct {
	Bandwidth flexFloat `json:"bandwidth"`
	Okay      *flexBool `json:"okay"`
}

type jsonExtra struct {
	Test      string   `json:"test"`
	NRanks    int      `json:"nranks"`
	BusFactor float64  `json:"bus_factor"`
	Skipped   []string `json:"skipped,omitempty"`
	Version   string   `json:"version"`
}

// jsonDoc is the whole file, as read back.
type jsonDoc struct {
	Version     int        `json:"version"`
	StartTime   string     `json:"start_time"`
	Args        []string   `json:"args"`
	Env         []string   `json:"env"`
	NCCLVersion int        `json:"nccl_version"`
	Config      jsonConfig `json:"config"`
	Results     []jsonRow  `json:"results"`
	OutOfBounds jsonOK     `json:"out_of_bounds"`
	AvgBusBW    jsonBW     `json:"average_bus_bandwidth"`
	Errors      []string   `json:"errors"`
	EndTime     string     `json:"end_time"`
	NCCL4Go     *jsonExtra `json:"nccl4go,omitempty"`
}

// flexBool reads JSON booleans and nccl-tests' "true"/"false" strings.
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	switch strings.Trim(string(data), `"`) {
	case "true", "1":
		*b = true
	case "false", "0", "null", "unchecked":
		*b = false
	default:
		return fmt.Errorf("not a boolean: %s", data)
	}
	return nil
}

// flexFloat reads numbers and nccl-tests' "nan"; it writes NaN and the
// infinities as "nan", as nccl-tests does.
type flexFloat float64

func (f flexFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte(`"nan"`), nil
	}
	return json.Marshal(float64(f))
}

func (f *flexFloat) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	if s == "nan" || s == "-nan" || s == "null" {
		*f = flexFloat(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	*f = flexFloat(v)
	return err
}

const timeFormat = "2006-01-02 15:04:05"

// envKept reports whether an environment variable goes into the file.
func envKept(kv string) bool {
	for _, p := range []string{"NCCL_", "CUDA_", "NCCL4GO_", "OMPI_COMM_WORLD_", "PMI_RANK=", "PMI_SIZE=", "SLURM_PROCID=", "SLURM_NTASKS=",
		"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="} {
		if strings.HasPrefix(kv, p) {
			return true
		}
	}
	return false
}

func cellJSON(c Cell, cpu bool) *jsonCell {
	t := flexFloat(c.Time)
	jc := &jsonCell{AlgBW: flexFloat(c.AlgBW), BusBW: flexFloat(c.BusBW)}
	if cpu {
		jc.CPUTime = &t
	} else {
		jc.Time = &t
	}
	if c.Checked {
		w := flexFloat(c.Wrong)
		jc.NWrong = &w
	}
	return jc
}

// perIterJSON is a cell's per-iteration times in nccl-tests' form (nil
// without -I); NaN and infinities are written as "nan".
func perIterJSON(p *IterStats) *jsonPerIter {
	if p == nil {
		return nil
	}
	j := &jsonPerIter{Skipped: p.Skipped, MinUS: flexFloat(p.Min), MaxUS: flexFloat(p.Max), AvgUS: flexFloat(p.Avg),
		P50US: flexFloat(p.P50), P95US: flexFloat(p.P95), P99US: flexFloat(p.P99), StdevUS: flexFloat(p.Stdev),
		CVPct: flexFloat(p.CV), TimesUS: flexFloats(p.Times)}
	for _, t := range p.PerProcess {
		j.PerProcess = append(j.PerProcess, flexFloats(t))
	}
	return j
}

func flexFloats(v []float64) []flexFloat {
	out := make([]flexFloat, len(v))
	for i, x := range v {
		out[i] = flexFloat(x)
	}
	return out
}

// jsonStream writes one JSON document piece by piece, as nccl-tests'
// util.cu does: a stack of open objects and lists, so that whatever is
// open can be closed at any time and the file stays valid. Objects and
// lists at the first two levels put each item on a line of its own (a
// result row is one line); deeper ones are written on one line.
type jsonStream struct {
	w      io.Writer
	frames []jsonFrame
	keyed  bool // a key was written; its value comes next
	err    error
}

type jsonFrame struct {
	list bool
	n    int // items written
}

func (s *jsonStream) write(str string) {
	if s.err == nil {
		_, s.err = io.WriteString(s.w, str)
	}
}

// item starts an item of the innermost container: a comma after the
// first, and a new line at the top levels.
func (s *jsonStream) item() {
	if len(s.frames) == 0 {
		return
	}
	f := &s.frames[len(s.frames)-1]
	if f.n > 0 {
		s.write(",")
	}
	f.n++
	if len(s.frames) <= 2 {
		s.write("\n" + strings.Repeat(" ", len(s.frames)))
	} else if f.n > 1 {
		s.write(" ")
	}
}

func (s *jsonStream) key(k string) {
	s.item()
	b, _ := json.Marshal(k)
	s.write(string(b) + ":")
	s.keyed = true
}

func (s *jsonStream) value(v any) {
	if s.keyed {
		s.keyed = false
	} else {
		s.item()
	}
	b, err := json.Marshal(v)
	if err != nil && s.err == nil {
		s.err = err
	}
	s.write(string(b))
}

func (s *jsonStream) open(list bool) {
	if s.keyed {
		s.keyed = false
	} else {
		s.item()
	}
	if list {
		s.write("[")
	} else {
		s.write("{")
	}
	s.frames = append(s.frames, jsonFrame{list: list})
}

func (s *jsonStream) close() {
	if s.keyed {
		s.write("null")
		s.keyed = false
	}
	f := s.frames[len(s.frames)-1]
	s.frames = s.frames[:len(s.frames)-1]
	if f.n > 0 && len(s.frames) < 2 {
		s.write("\n" + strings.Repeat(" ", len(s.frames)))
	}
	if f.list {
		s.write("]")
	} else {
		s.write("}")
	}
}

// field writes a key and its value.
func (s *jsonStream) field(k string, v any) { s.key(k); s.value(v) }

// JSONWriter is a [Reporter] that writes nccl-tests' JSON file (version
// 3) as the run goes: the command line and environment when it is
// created, the settings and devices at Begin, each row as it comes, the
// totals at End. [JSONWriter.Close] closes whatever is still open, so a
// run that ends early (Ctrl-C, a cancelled context, -N 0) leaves a valid
// file with the rows measured so far.
//
// The file differs from nccl-tests' in these ways, all of which
// [ReadJSON] accepts in either form:
//
//   - booleans are JSON booleans (nccl-tests writes the strings "true" and
//     "false"); average_bus_bandwidth.okay is null when no minimum was set
//     (nccl-tests: the string "unchecked");
//   - env lists only the variables named NCCL_*, CUDA_*, NCCL4GO_* and the
//     launchers' rank variables (nccl-tests copies the whole environment,
//     secrets included);
//   - root is a number (nccl-tests: the string "%6i", e.g. "    -1");
//   - numbers have as many digits as they need (nccl-tests: "%lf", six
//     decimals);
//   - a run that ends early lists why in errors;
//   - a top-level "nccl4go" object, written at the end, adds the test, the
//     rank count, the bus bandwidth factor and the skipped combinations.
//
// A JSONWriter is used by one goroutine at a time.
type JSONWriter struct {
	// Path is the file written: the path asked for, or path.0, path.1...
	Path          string
	f             *os.File
	s             jsonStream
	cpu           bool
	iter          int
	ended, closed bool
}

// CreateJSON creates the JSON file at path as nccl-tests does: a new file
// (never an existing one), else path.0, path.1... (the first that does
// not exist; [JSONWriter.Path] says which), and writes its start: the
// version, the start time, args (the command line to record) and the
// environment. Any other error (a missing directory, no permission) is
// returned at once, before a run starts.
func CreateJSON(path string, args []string) (*JSONWriter, error) {
	try := path
	for i := 0; ; i++ {
		f, err := os.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			j := &JSONWriter{Path: try, f: f}
			j.s.w = f
			j.start(time.Now(), args)
			if j.s.err != nil {
				f.Close()
				return nil, fmt.Errorf("perf: JSON output %s: %w", try, j.s.err)
			}
			return j, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("perf: JSON output: %w", err)
		}
		try = fmt.Sprintf("%s.%d", path, i)
	}
}

func (j *JSONWriter) start(t time.Time, args []string) {
	s := &j.s
	s.open(false)
	s.field("version", 3)
	s.field("start_time", t.Format(timeFormat))
	s.field("args", append([]string{}, args...))
	env := []string{}
	for _, kv := range os.Environ() {
		if envKept(kv) {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	s.field("env", env)
}

// Begin writes the NCCL version, the settings and the devices, and opens
// the results.
func (j *JSONWriter) Begin(h *Header) {
	s := &j.s
	o := h.Options
	j.cpu = o.CPUTime
	j.iter = o.Iters
	s.field("nccl_version", h.NCCLVersion)
	c := jsonConfig{NThreads: max(o.Threads, 1), NGPUs: h.localGPUs(), MinBytes: o.MinBytes, MaxBytes: o.MaxBytes,
		Warmup: o.Warmup, Iters: o.Iters, AggIters: o.AggIters, Validation: o.Check, Graph: o.Graph,
		Blocking: o.Blocking != 0, Devices: h.Devices,
		PerIter: flexBool(o.PerIterTiming && o.Graph == 0), PerIterSkip: o.PerIterSkip}
	if o.StepFactor > 1 {
		c.StepFactor = &o.StepFactor
	} else {
		c.StepBytes = &o.StepBytes
	}
	if c.Devices == nil {
		c.Devices = []DeviceInfo{}
	}
	s.key("config")
	s.open(false)
	s.field("nthreads", c.NThreads)
	s.field("ngpus", c.NGPUs)
	s.field("minimum_bytes", c.MinBytes)
	s.field("maximum_bytes", c.MaxBytes)
	if c.StepFactor != nil {
		s.field("step_factor", *c.StepFactor)
	} else {
		s.field("step_bytes", *c.StepBytes)
	}
	s.field("warmup_iters", c.Warmup)
	s.field("iterations", c.Iters)
	s.field("aggregated_iterations", c.AggIters)
	s.field("validation", c.Validation)
	s.field("graph", c.Graph)
	s.field("blocking_collectives", c.Blocking)
	s.field("per_iter_timing", c.PerIter)
	s.field("per_iter_skip", c.PerIterSkip)
	s.field("parallel_init", c.ParallelInit)
	s.field("devices", c.Devices)
	s.close()
	s.key("results")
	s.open(true)
}

// Row writes one result, on a line of its own.
func (j *JSONWriter) Row(test string, r *Row) {
	s := &j.s
	s.open(false)
	s.field("size", r.Size)
	s.field("count", r.Count)
	s.field("type", r.Type)
	s.field("redop", r.Op)
	s.field("root", r.Root)
	s.field("out_of_place", cellJSON(r.OutOfPlace, j.cpu))
	if pi := perIterJSON(r.OutOfPlace.PerIter); pi != nil {
		s.field("out_of_place_per_iter", pi)
	}
	s.field("in_place", cellJSON(r.InPlace, j.cpu))
	if pi := perIterJSON(r.InPlace.PerIter); pi != nil {
		s.field("in_place_per_iter", pi)
	}
	if r.Ceiling != nil {
		s.field("ceiling", jsonCeiling{Path: r.Ceiling.Path, AlgBW: flexFloat(r.Ceiling.AlgBW)})
	}
	s.field("actual_iterations", j.iter)
	s.field("experiment_name", "")
	s.close()
}

// End closes the results and writes the totals, the errors and the
// nccl4go object; Close writes the end time.
func (j *JSONWriter) End(r *Report) {
	s := &j.s
	if len(s.frames) < 2 {
		return // Begin never ran
	}
	s.close() // results
	ok := r.Errors == 0
	s.field("out_of_bounds", jsonOK{Count: r.Errors, Okay: (*flexBool)(&ok)})
	bw := jsonBW{Bandwidth: flexFloat(r.AvgBusBW)}
	if r.Options.MinBusBW > 0 {
		bwOK := !r.BWFailed
		bw.Okay = (*flexBool)(&bwOK)
	}
	s.field("average_bus_bandwidth", bw)
	errs := []string{}
	if r.LastError != "" {
		errs = append(errs, r.LastError)
	}
	s.field("errors", errs)
	bf, _ := BusFactor(r.Test, r.NRanks)
	s.field("nccl4go", jsonExtra{Test: r.Test, NRanks: r.NRanks, BusFactor: bf, Skipped: r.Skipped, Version: Version})
	j.ended = true
}

// Close finishes the document and closes the file; it is idempotent. After
// a run that did not reach End, it closes the results, records why in
// errors (runErr, or "run ended early") and writes the end time, so the
// file is valid JSON holding every row written.
func (j *JSONWriter) Close() error { return j.CloseWithError(nil) }

// CloseWithError is Close, naming in the file's errors what ended the run
// early (it is ignored after a run that reached End).
func (j *JSONWriter) CloseWithError(runErr error) error {
	if j == nil || j.closed {
		return nil
	}
	j.closed = true
	j.finish(time.Now(), runErr)
	err := j.s.err
	if j.f != nil {
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("perf: JSON output %s: %w", j.Path, err)
	}
	return nil
}

func (j *JSONWriter) finish(t time.Time, runErr error) {
	s := &j.s
	for len(s.frames) > 1 {
		s.close()
	}
	if len(s.frames) == 0 {
		return
	}
	if !j.ended {
		why := "run ended early"
		if runErr != nil {
			why = "run ended early: " + runErr.Error()
		}
		s.field("errors", []string{why})
	}
	s.field("end_time", t.Format(timeFormat))
	s.close()
	s.write("\n")
}

// WriteJSON writes a whole report in the JSON of [JSONWriter] (see there
// for where it differs from nccl-tests'). args is the command line to
// record.
func WriteJSON(w io.Writer, r *Report, args []string) error {
	j := &JSONWriter{}
	j.s.w = w
	j.start(r.Start, args)
	j.Begin(&r.Header)
	for i := range r.Rows {
		j.Row(r.Test, &r.Rows[i])
	}
	j.End(r)
	j.finish(r.End, nil)
	return j.s.err
}

// Series is one run read back from a JSON file: what compare and plots use.
type Series struct {
	Name   string // the file, or a label
	Test   string // the test when known ("" for a nccl-tests file without it)
	NRanks int    // 0 when unknown
	Rows   []Row
}

// ReadJSON reads a JSON file written by [WriteJSON] or by nccl-tests (-J).
func ReadJSON(rd io.Reader, name string) (*Series, error) {
	doc, err := readDoc(rd, name)
	if err != nil {
		return nil, err
	}
	return seriesOfDoc(doc, name)
}

func newJSONDecoder(r io.Reader) *json.Decoder { return json.NewDecoder(r) }

// seriesOfDoc is a decoded file's rows.
func seriesOfDoc(doc *jsonDoc, name string) (*Series, error) {
	s := &Series{Name: name}
	if doc.NCCL4Go != nil {
		s.Test, s.NRanks = doc.NCCL4Go.Test, doc.NCCL4Go.NRanks
	} else {
		s.NRanks = len(doc.Config.Devices)
		// nccl-tests' binary (".../all_reduce_perf"), or ours cut short
		// before End wrote the nccl4go object ("nccl4go perf all_reduce").
		for i, a := range doc.Args {
			base := a[strings.LastIndexByte(a, '/')+1:]
			for _, t := range Tests() {
				if strings.HasPrefix(base, Program(t)) || i == 2 && doc.Args[1] == "perf" && base == t {
					s.Test = t
				}
			}
		}
	}
	for i, jr := range doc.Results {
		row := Row{Size: jr.Size, Count: jr.Count, Type: jr.Type, Op: jr.Redop}
		if err := parseRoot(jr.Root, &row.Root); err != nil {
			return nil, fmt.Errorf("perf: %s: result %d: root: %w", name, i, err)
		}
		row.OutOfPlace = fromJSONCell(jr.OutOfPlace)
		row.InPlace = fromJSONCell(jr.InPlace)
		if c := jr.Ceiling; c != nil {
			row.Ceiling = &Ceiling{Path: c.Path, AlgBW: float64(c.AlgBW)}
		}
		s.Rows = append(s.Rows, row)
	}
	return s, nil
}

func parseRoot(raw json.RawMessage, out *int) error {
	if len(raw) == 0 {
		*out = -1
		return nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		*out = n
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	*out = n
	return err
}

func fromJSONCell(c *jsonCell) Cell {
	if c == nil {
		return Cell{Time: math.NaN(), AlgBW: math.NaN(), BusBW: math.NaN()}
	}
	out := Cell{AlgBW: float64(c.AlgBW), BusBW: float64(c.BusBW)}
	switch {
	case c.Time != nil:
		out.Time = float64(*c.Time)
	case c.CPUTime != nil:
		out.Time = float64(*c.CPUTime)
	}
	if c.NWrong != nil {
		out.Checked, out.Wrong = true, int64(*c.NWrong)
	}
	return out
}

// CSVWriter writes one line per row (a header line first) as the run goes;
// with per-iteration timing (-I) each line ends with the i_min, i_max,
// i_p99 and i_cv% of both cells, and with [Options.Ceiling] with the path
// and bandwidth of the row's limit.
type CSVWriter struct {
	w       *csv.Writer
	header  bool
	nranks  int
	perIter bool // -I: the i_* columns of both cells follow
	ceiling bool // Options.Ceiling: the path and algbw of the row's limit
}

// NewCSVWriter returns a [Reporter] writing CSV to w.
func NewCSVWriter(w io.Writer) *CSVWriter { return &CSVWriter{w: csv.NewWriter(w)} }

// Begin writes the header line once.
func (c *CSVWriter) Begin(h *Header) {
	c.nranks = h.NRanks
	if c.header {
		return
	}
	c.header = true
	c.perIter = h.Options.PerIterTiming && h.Options.Graph == 0
	c.ceiling = h.Options.Ceiling
	cols := []string{"test", "nranks", "size", "count", "type", "redop", "root",
		"time_us", "algbw_gbs", "busbw_gbs", "wrong", "inplace_time_us", "inplace_algbw_gbs", "inplace_busbw_gbs", "inplace_wrong"}
	if c.perIter {
		cols = append(cols, "i_min_us", "i_max_us", "i_p99_us", "i_cv_pct",
			"inplace_i_min_us", "inplace_i_max_us", "inplace_i_p99_us", "inplace_i_cv_pct")
	}
	if c.ceiling {
		cols = append(cols, "ceiling_path", "ceiling_algbw_gbs")
	}
	c.w.Write(cols)
	c.w.Flush()
}

// Row writes a row; an unchecked #wrong is empty.
func (c *CSVWriter) Row(test string, r *Row) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	wrong := func(cell Cell) string {
		if !cell.Checked {
			return ""
		}
		return strconv.FormatInt(cell.Wrong, 10)
	}
	rec := []string{test, strconv.Itoa(c.nranks), strconv.FormatUint(r.Size, 10), strconv.FormatUint(r.Count, 10), r.Type, r.Op, strconv.Itoa(r.Root),
		f(r.OutOfPlace.Time), f(r.OutOfPlace.AlgBW), f(r.OutOfPlace.BusBW), wrong(r.OutOfPlace),
		f(r.InPlace.Time), f(r.InPlace.AlgBW), f(r.InPlace.BusBW), wrong(r.InPlace)}
	if c.perIter {
		for _, cell := range []Cell{r.OutOfPlace, r.InPlace} {
			if p := cell.PerIter; p != nil {
				rec = append(rec, f(p.Min), f(p.Max), f(p.P99), f(p.CV))
			} else {
				rec = append(rec, "", "", "", "")
			}
		}
	}
	if c.ceiling {
		if r.Ceiling != nil {
			rec = append(rec, r.Ceiling.Path, f(r.Ceiling.AlgBW))
		} else {
			rec = append(rec, "", "")
		}
	}
	c.w.Write(rec)
	c.w.Flush()
}

// End flushes.
func (c *CSVWriter) End(r *Report) { c.w.Flush() }

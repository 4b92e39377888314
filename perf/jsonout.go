package perf

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// JSON output follows nccl-tests' schema, version 3 (src/util.cu), with
// these differences, all of which ReadJSON accepts in either form:
//
//   - booleans are JSON booleans (nccl-tests writes the strings "true" and
//     "false"); average_bus_bandwidth.okay is null when no minimum was set
//     (nccl-tests: the string "unchecked");
//   - env lists only the variables named NCCL_*, CUDA_*, NCCL4GO_* and the
//     launchers' rank variables (nccl-tests copies the whole environment,
//     secrets included);
//   - root is a number (nccl-tests: the string "%6i", e.g. "    -1");
//   - a top-level "nccl4go" object adds the test, the rank count, the bus
//     bandwidth factor and the skipped combinations.

// jsonCell is a result cell in the file.
type jsonCell struct {
	Time    *float64 `json:"time,omitempty"`
	CPUTime *float64 `json:"cpu_time,omitempty"`
	AlgBW   float64  `json:"alg_bw"`
	BusBW   float64  `json:"bus_bw"`
	NWrong  *float64 `json:"nwrong"`
}

type jsonRow struct {
	Size       uint64          `json:"size"`
	Count      uint64          `json:"count"`
	Type       string          `json:"type"`
	Redop      string          `json:"redop"`
	Root       json.RawMessage `json:"root"`
	OutOfPlace *jsonCell       `json:"out_of_place"`
	InPlace    *jsonCell       `json:"in_place"`
	Iters      int             `json:"actual_iterations"`
	Experiment string          `json:"experiment_name"`
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

// jsonDoc is the whole file.
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

// flexFloat reads numbers and nccl-tests' "nan"; it writes NaN as "nan".
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
	t := c.Time
	jc := &jsonCell{AlgBW: c.AlgBW, BusBW: c.BusBW}
	if cpu {
		jc.CPUTime = &t
	} else {
		jc.Time = &t
	}
	if c.Checked {
		w := float64(c.Wrong)
		jc.NWrong = &w
	}
	return jc
}

// WriteJSON writes the report in nccl-tests' JSON schema (see the package
// documentation for where it differs). args is the command line to record.
func WriteJSON(w io.Writer, r *Report, args []string) error {
	o := r.Options
	doc := jsonDoc{
		Version: 3, StartTime: r.Start.Format(timeFormat), EndTime: r.End.Format(timeFormat),
		Args: append([]string{}, args...), Env: []string{}, NCCLVersion: r.NCCLVersion,
		Errors: []string{},
	}
	for _, kv := range os.Environ() {
		if envKept(kv) {
			doc.Env = append(doc.Env, kv)
		}
	}
	sort.Strings(doc.Env)
	c := &doc.Config
	c.NThreads, c.NGPUs = 1, r.localGPUs()
	c.MinBytes, c.MaxBytes = o.MinBytes, o.MaxBytes
	if o.StepFactor > 1 {
		c.StepFactor = &o.StepFactor
	} else {
		c.StepBytes = &o.StepBytes
	}
	c.Warmup, c.Iters, c.AggIters, c.Validation, c.Graph = o.Warmup, o.Iters, o.AggIters, o.Check, o.Graph
	c.Blocking = o.Blocking != 0
	c.Devices = r.Devices
	if c.Devices == nil {
		c.Devices = []DeviceInfo{}
	}
	doc.Results = []jsonRow{}
	for _, row := range r.Rows {
		root, _ := json.Marshal(row.Root)
		doc.Results = append(doc.Results, jsonRow{
			Size: row.Size, Count: row.Count, Type: row.Type, Redop: row.Op, Root: root,
			OutOfPlace: cellJSON(row.OutOfPlace, o.CPUTime), InPlace: cellJSON(row.InPlace, o.CPUTime),
			Iters: r.Iters, Experiment: "",
		})
	}
	ok := flexBool(r.Errors == 0)
	doc.OutOfBounds = jsonOK{Count: r.Errors, Okay: &ok}
	doc.AvgBusBW.Bandwidth = flexFloat(r.AvgBusBW)
	if o.MinBusBW > 0 {
		bwOK := flexBool(!r.BWFailed)
		doc.AvgBusBW.Okay = &bwOK
	}
	if r.LastError != "" {
		doc.Errors = append(doc.Errors, r.LastError)
	}
	bf, _ := BusFactor(r.Test, r.NRanks)
	doc.NCCL4Go = &jsonExtra{Test: r.Test, NRanks: r.NRanks, BusFactor: bf, Skipped: r.Skipped, Version: Version}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&doc)
}

// Series is one run read back from a JSON file: what compare and plots use.
type Series struct {
	Name   string // the file, or a label
	Test   string // the test when known ("" for a nccl-tests file without it)
	NRanks int    // 0 when unknown
	Rows   []Row
}

// ReadJSON reads a JSON file written by WriteJSON or by nccl-tests (-J).
func ReadJSON(rd io.Reader, name string) (*Series, error) {
	var doc jsonDoc
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("perf: %s: not an nccl-tests JSON file: %w", name, err)
	}
	if doc.Version == 0 && doc.Results == nil {
		return nil, fmt.Errorf("perf: %s: no version and no results: not an nccl-tests JSON file", name)
	}
	s := &Series{Name: name}
	if doc.NCCL4Go != nil {
		s.Test, s.NRanks = doc.NCCL4Go.Test, doc.NCCL4Go.NRanks
	} else {
		s.NRanks = len(doc.Config.Devices)
		for _, a := range doc.Args {
			base := a[strings.LastIndexByte(a, '/')+1:]
			for _, t := range Tests() {
				if strings.HasPrefix(base, Program(t)) {
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
	out := Cell{AlgBW: c.AlgBW, BusBW: c.BusBW}
	switch {
	case c.Time != nil:
		out.Time = *c.Time
	case c.CPUTime != nil:
		out.Time = *c.CPUTime
	}
	if c.NWrong != nil {
		out.Checked, out.Wrong = true, int64(*c.NWrong)
	}
	return out
}

// CSVWriter writes one line per row (a header line first) as the run goes.
type CSVWriter struct {
	w      *csv.Writer
	header bool
	nranks int
}

// NewCSVWriter returns a Reporter writing CSV to w.
func NewCSVWriter(w io.Writer) *CSVWriter { return &CSVWriter{w: csv.NewWriter(w)} }

// Begin writes the header line once.
func (c *CSVWriter) Begin(h *Header) {
	c.nranks = h.NRanks
	if c.header {
		return
	}
	c.header = true
	c.w.Write([]string{"test", "nranks", "size", "count", "type", "redop", "root",
		"time_us", "algbw_gbs", "busbw_gbs", "wrong", "inplace_time_us", "inplace_algbw_gbs", "inplace_busbw_gbs", "inplace_wrong"})
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
	c.w.Write([]string{test, strconv.Itoa(c.nranks), strconv.FormatUint(r.Size, 10), strconv.FormatUint(r.Count, 10), r.Type, r.Op, strconv.Itoa(r.Root),
		f(r.OutOfPlace.Time), f(r.OutOfPlace.AlgBW), f(r.OutOfPlace.BusBW), wrong(r.OutOfPlace),
		f(r.InPlace.Time), f(r.InPlace.AlgBW), f(r.InPlace.BusBW), wrong(r.InPlace)})
	c.w.Flush()
}

// End flushes.
func (c *CSVWriter) End(r *Report) { c.w.Flush() }

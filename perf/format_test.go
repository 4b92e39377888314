package perf

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// floatstr_golden.txt and nccltests_table.txt were printed by a C program
// using nccl-tests' printf formats and getFloatStr (src/util.cu, 2.19.6)
// with glibc: value|getFloatStr(v,7)|getFloatStr(v,6)|%6g|%g.
func TestFloatStrMatchesC(t *testing.T) {
	data, err := os.ReadFile("testdata/floatstr_golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, "|")
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := floatStr(v, 7); got != f[1] {
			t.Errorf("floatStr(%v, 7) = %q, C %q", v, got, f[1])
		}
		if got := floatStr(v, 6); got != f[2] {
			t.Errorf("floatStr(%v, 6) = %q, C %q", v, got, f[2])
		}
		if got := cGWidth(v, 6); got != f[3] {
			t.Errorf("%%6g of %v = %q, C %q", v, got, f[3])
		}
		if got := cG(v); got != f[4] {
			t.Errorf("%%g of %v = %q, C %q", v, got, f[4])
		}
	}
}

// The column header, rows and footer against nccl-tests' own formats.
func TestTableMatchesNCCLTests(t *testing.T) {
	want, err := os.ReadFile("testdata/nccltests_table.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := &TableWriter{W: &b}
	h := &Header{Program: "all_reduce_perf", Options: DefaultOptions("all_reduce")}
	tw.Begin(h)
	// Keep only the column titles: the lines before them differ by design.
	head := b.String()
	head = head[strings.LastIndex(head, "#\n#    "):]
	b.Reset()
	b.WriteString(head)
	rows := []Row{
		{Size: 8, Count: 2, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 9.54, AlgBW: 0.00084, BusBW: 0, Wrong: 0, Checked: true}, InPlace: Cell{Time: 9.4, AlgBW: 0.00085, BusBW: 0, Wrong: 0, Checked: true}},
		{Size: 1048576, Count: 262144, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 14.27, AlgBW: 73.48, BusBW: 128.59, Wrong: 0, Checked: true}, InPlace: Cell{Time: 13.88, AlgBW: 75.55, BusBW: 132.21, Wrong: 0, Checked: true}},
		{Size: 1073741824, Count: 268435456, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 2765.4, AlgBW: 388.27, BusBW: 679.47, Wrong: 3, Checked: true}, InPlace: Cell{Time: 2760.1, AlgBW: 389.0, BusBW: 680.76, Wrong: 0, Checked: false}},
		{Size: 4096, Count: 1024, Type: "bfloat16", Op: "none", Root: 3, OutOfPlace: Cell{Time: 123456.7, AlgBW: 1234.5, BusBW: 0.005, Wrong: 1234567, Checked: true}, InPlace: Cell{Time: 1, AlgBW: 2, BusBW: 3, Wrong: 0, Checked: true}},
	}
	for i := range rows {
		tw.Row("all_reduce", &rows[i])
	}
	tw.End(&Report{Header: *h, Errors: 1, AvgBusBW: 203.99375})
	if got := b.String(); got != string(want) {
		t.Errorf("table differs from nccl-tests'\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestHeaderLines(t *testing.T) {
	var b bytes.Buffer
	o := DefaultOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.StepFactor, o.Blocking = 8, 128<<20, 2, 3
	h := &Header{Program: "all_reduce_perf", Options: o, NCCLVersion: 23007, ABIVersion: 23007, ReducedMaxBytes: 1000,
		Devices: []DeviceInfo{{Rank: 0, Pid: 4242, Host: "node1", Device: 0, PCI: "0000:19:00", Name: "NVIDIA H200"}}}
	(&TableWriter{W: &b, JSONPath: "x.json"}).Begin(h)
	for _, want := range []string{
		"# Writing JSON output to x.json\n",
		"# Collective test starting: all_reduce_perf\n",
		"# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n",
		"# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n",
		"#\n# Using devices\n#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [0000:19:00] NVIDIA H200\n",
		"#\n# Reducing maxBytes to 1000 due to memory limitation\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("header lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"8": 8, "0": 0, "1K": 1024, "1k": 1024, "32M": 32 << 20, "1G": 1 << 30, "1.5K": 1536,
		"0.5M": 512 << 10, " 64 K": 64 << 10, "1e3": 1000, "7.9": 7,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "12X", "-1", "nan", "1T", "1e30"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
	for n, want := range map[uint64]string{8: "8", 1024: "1K", 1536: "1536", 32 << 20: "32M", 2 << 30: "2G"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q", n, got)
		}
	}
}

func TestBusBandwidthFactors(t *testing.T) {
	// doc/PERFORMANCE.md: busbw = algbw * factor.
	for _, c := range []struct {
		test   string
		n      int
		factor float64
		algMul float64 // algbw*sec/(count*elt)
	}{
		{"all_reduce", 8, 2 * 7.0 / 8, 1}, {"all_reduce", 1, 0, 1},
		{"all_gather", 8, 7.0 / 8, 8}, {"reduce_scatter", 4, 3.0 / 4, 4},
		{"alltoall", 2, 0.5, 2}, {"gather", 4, 0.75, 4}, {"scatter", 4, 0.75, 4},
		{"broadcast", 8, 1, 1}, {"reduce", 8, 1, 1}, {"sendrecv", 8, 1, 1}, {"hypercube", 8, 1, 7},
	} {
		f, ok := BusFactor(c.test, c.n)
		if !ok || math.Abs(f-c.factor) > 1e-12 {
			t.Errorf("BusFactor(%s, %d) = %v, want %v", c.test, c.n, f, c.factor)
		}
		alg, bus, ok := Bandwidth(c.test, 1<<20, 4, 1e-3, c.n)
		wantAlg := float64(4<<20) * c.algMul / 1e9 / 1e-3
		if !ok || math.Abs(alg-wantAlg) > 1e-9*wantAlg || math.Abs(bus-wantAlg*c.factor) > 1e-9*wantAlg {
			t.Errorf("Bandwidth(%s, n=%d) = %v, %v; want %v, %v", c.test, c.n, alg, bus, wantAlg, wantAlg*c.factor)
		}
	}
	if _, _, ok := Bandwidth("nope", 1, 1, 1, 1); ok {
		t.Error("Bandwidth of an unknown test")
	}
}

func TestCounts(t *testing.T) {
	// nccl-tests' getCollByteCount: blocks of (count/nranks) rounded down to 16 bytes.
	c := collectives["all_gather"].counts(1000, 4, 3) // 333 -> 332
	if c.send != 332 || c.recv != 996 || c.param != 332 || c.sendInPlace != 332 {
		t.Errorf("all_gather counts %+v", c)
	}
	c = collectives["reduce_scatter"].counts(2, 4, 1) // 2 floats: block 0
	if c.param != 0 || c.recvInPlace != 0 {
		t.Errorf("reduce_scatter counts %+v", c)
	}
	c = collectives["alltoall"].counts(1<<20, 8, 8)
	if c.param != 1<<17 || c.send != 1<<20 || c.recv != 1<<20 {
		t.Errorf("alltoall counts %+v", c)
	}
	o := DefaultOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.StepFactor = 8, 128, 2
	if s := o.sizes(); len(s) != 5 || s[4] != 128 {
		t.Errorf("sizes %v", s)
	}
	o.StepFactor, o.StepBytes, o.MinBytes = 1, 40, 0
	if s := o.sizes(); len(s) != 4 || s[3] != 120 {
		t.Errorf("sizes %v", s)
	}
	if s := o.warmupSizes(); len(s) != 9 || s[0] != 0 || s[8] != 128 {
		t.Errorf("warm-up sizes %v", s)
	}
}

func TestJSONRoundTripAndNCCLTestsFile(t *testing.T) {
	r := &Report{Header: Header{Program: "all_reduce_perf", Options: DefaultOptions("all_reduce"), NRanks: 2, NCCLVersion: 23007,
		Devices: []DeviceInfo{{Rank: 0, Host: "h", PCI: "0000:01:00", Name: "GPU"}}},
		Test: "all_reduce", Iters: 20, AvgBusBW: math.NaN(),
		Rows: []Row{{Size: 8, Count: 2, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 1, AlgBW: 2, BusBW: 3, Wrong: 0, Checked: true}, InPlace: Cell{Time: 4, AlgBW: 5, BusBW: 6, Wrong: 0, Checked: false}}}}
	var b bytes.Buffer
	if err := WriteJSON(&b, r, []string{"nccl4go", "perf", "all_reduce"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"version":3`, `"okay":true`, `"bandwidth":"nan"`, `"nwrong":null`, `"root":-1`, `"aggregated_iterations":1`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b.String())
		}
	}
	s, err := ReadJSON(&b, "ours")
	if err != nil {
		t.Fatal(err)
	}
	if s.Test != "all_reduce" || s.NRanks != 2 || len(s.Rows) != 1 || s.Rows[0].InPlace.Checked || s.Rows[0].OutOfPlace.Time != 1 {
		t.Errorf("read back %+v", s)
	}
	// nccl-tests' own file: string booleans, root as "%6i", whole environment.
	f, err := os.Open("testdata/nccltests.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err = ReadJSON(f, "nccl-tests")
	if err != nil {
		t.Fatal(err)
	}
	if s.Test != "all_reduce" || s.NRanks != 1 || len(s.Rows) != 2 || s.Rows[1].Size != 1048576 || s.Rows[1].Root != -1 ||
		s.Rows[1].OutOfPlace.BusBW != 0 || !s.Rows[1].OutOfPlace.Checked || s.Rows[1].InPlace.Time != 13.88 {
		t.Errorf("nccl-tests file read as %+v", s)
	}
	if _, err := ReadJSON(strings.NewReader(`{"x":1}`), "junk"); err == nil {
		t.Error("a JSON file that is not a result was accepted")
	}
	ratios := Compare(s, s)
	if len(ratios) != 2 || ratios[1].TimeOOP != 1 || ratios[1].BusBWIP == 0 && false {
		t.Errorf("Compare of a run with itself: %+v", ratios)
	}
	var cmp bytes.Buffer
	if err := WriteComparison(&cmp, 0, s, s); err != nil || !strings.Contains(cmp.String(), "1.000") {
		t.Errorf("WriteComparison: %v\n%s", err, cmp.String())
	}
}

func TestPlotDecodes(t *testing.T) {
	s := &Series{Name: "a", Test: "all_reduce", NRanks: 1}
	for size := uint64(8); size <= 1<<30; size *= 4 {
		s.Rows = append(s.Rows, Row{Size: size, OutOfPlace: Cell{Time: 5 + float64(size)/1e5, BusBW: float64(size) / 1e7}, InPlace: Cell{Time: 4, BusBW: float64(size) / 2e7}})
	}
	s.Rows = append(s.Rows, Row{Size: 0, OutOfPlace: Cell{Time: 1}}) // skipped on a log axis
	b := &Series{Name: "b", Rows: s.Rows[:5]}
	var png1 bytes.Buffer
	if err := Plot(&png1, "png", "t", s, b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&png1)
	if err != nil {
		t.Fatalf("PNG: %v", err)
	}
	if img.Bounds().Dx() < 500 {
		t.Errorf("PNG of %v", img.Bounds())
	}
	var svg bytes.Buffer
	if err := Plot(&svg, "svg", "", s); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG: %v", err)
			}
			break
		}
	}
	if err := Plot(&svg, "png", "", &Series{Name: "empty"}); err == nil {
		t.Error("plot of nothing succeeded")
	}
	if _, err := PlotFormat("x.pdf"); err == nil {
		t.Error("pdf accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	good := DefaultOptions("all_reduce")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(o *Options){
		func(o *Options) { o.Test = "x" }, func(o *Options) { o.Iters = 0 }, func(o *Options) { o.Type = "float128" },
		func(o *Options) { o.Op = "xor" }, func(o *Options) { o.Blocking = 4 }, func(o *Options) { o.Average = 7 },
		func(o *Options) { o.MinBytes = 2; o.MaxBytes = 1 }, func(o *Options) { o.StepFactor = 1; o.StepBytes = 0 },
		func(o *Options) { o.Graph = 1; o.StreamNull = true }, func(o *Options) { o.Root = -2 },
	} {
		o := good
		mod(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// nccltests_h200_allreduce.txt is nccl-tests 2.19.6's own output, saved from
// a run on an H200 (NCCL 2.28.3): all_reduce_perf -b 8 -e 1G -f 2 -g 1 -n 100
// -w 20 -c 0. Every row, parsed and printed again by TableWriter, and the
// column titles and footer, must come out byte for byte (the first lines
// name the program and the devices, which differ by design).
func TestTableMatchesSavedNCCLTestsOutput(t *testing.T) {
	data, err := os.ReadFile("testdata/nccltests_h200_allreduce.txt")
	if err != nil {
		t.Fatal(err)
	}
	saved := string(data)
	cell := func(f []string) Cell {
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			return v
		}
		c := Cell{Time: num(f[0]), AlgBW: num(f[1]), BusBW: num(f[2])}
		if f[3] != "N/A" {
			c.Wrong, c.Checked = int64(num(f[3])), true
		}
		return c
	}
	var rows []Row
	for _, line := range strings.Split(saved, "\n") {
		f := strings.Fields(line)
		if len(f) != 13 || strings.HasPrefix(line, "#") {
			continue
		}
		size, _ := strconv.ParseUint(f[0], 10, 64)
		count, _ := strconv.ParseUint(f[1], 10, 64)
		root, _ := strconv.Atoi(f[4])
		rows = append(rows, Row{Size: size, Count: count, Type: f[2], Op: f[3], Root: root, OutOfPlace: cell(f[5:9]), InPlace: cell(f[9:13])})
	}
	if len(rows) != 28 {
		t.Fatalf("%d rows read from the saved output, want 28 (8 B to 1 GB)", len(rows))
	}
	var b bytes.Buffer
	tw := &TableWriter{W: &b}
	o := DefaultOptions("all_reduce")
	o.Check = 0
	h := &Header{Program: "all_reduce_perf", Options: o}
	tw.Begin(h)
	head := b.String()
	b.Reset()
	b.WriteString(head[strings.LastIndex(head, "#\n#    "):])
	for i := range rows {
		tw.Row("all_reduce", &rows[i])
	}
	tw.End(&Report{Header: *h})
	want := saved[strings.LastIndex(saved[:strings.Index(saved, "#       size")], "#\n"):]
	if got := b.String(); got != want {
		t.Errorf("table differs from nccl-tests' saved output\n got:\n%s\nwant:\n%s", got, want)
	}
}

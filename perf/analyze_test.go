package perf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
)

// ntFile writes a JSON file exactly as nccl-tests 2.19.6 writes one with
// -I 1 -J (src/util.cu: jsonOutputInit, writeDeviceReport,
// writeBenchmarkLinePreamble, writeBenchmarkLineBody, writePerIterReport,
// writeBenchmarkLineTerminator, writeResultFooter, writeErrors,
// jsonOutputFinalize; src/common.cu BenchTime for the per-iteration
// figures): no blanks, numbers as "%lf", booleans as the strings "true"
// and "false", roots as "%6i", '/' escaped, per_process_max_times_us only
// with several processes, times_us the maximum over them iteration by
// iteration, and the statistics over the iterations after -K's.
type ntFile struct {
	args   []string
	hosts  []string // per process
	ngpus  int
	iters  int
	skip   int
	rows   []ntRow
	nprocs int
}

type ntRow struct {
	size, count uint64
	typ, op     string
	root        int
	// times[placement][process][iteration] in microseconds (each
	// process's maximum over its GPUs).
	times [2][][]float64
}

func (f *ntFile) write() []byte {
	var b bytes.Buffer
	str := func(s string) string {
		r := strings.NewReplacer(`"`, `\"`, `\`, `\\`, `/`, `\/`, "\t", `\t`, "\n", `\n`)
		return `"` + r.Replace(s) + `"`
	}
	lf := func(v float64) string {
		if v != v {
			return `"nan"`
		}
		return fmt.Sprintf("%f", v)
	}
	list := func(v []float64) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = lf(x)
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	b.WriteString(`{"version":3,"start_time":"2026-12-03 09:00:00","args":[`)
	for i, a := range f.args {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(str(a))
	}
	b.WriteString(`],"env":[` + str("PATH=/usr/bin") + `],"nccl_version":22803`)
	fmt.Fprintf(&b, `,"config":{"nthreads":1,"ngpus":%d,"minimum_bytes":%d,"maximum_bytes":%d,"step_factor":2,"warmup_iters":1,"iterations":%d,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","per_iter_timing":"true","per_iter_skip":%d,"parallel_init":"false","devices":[`,
		f.ngpus, f.rows[0].size, f.rows[len(f.rows)-1].size, f.iters, f.skip)
	for p := 0; p < f.nprocs; p++ {
		for g := 0; g < f.ngpus; g++ {
			if p+g > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"rank":%d,"group":0,"pid":%d,"hostname":%s,"device":%d,"device_hex":"0000:%02x:00","device_info":"NVIDIA H200"}`,
				p*f.ngpus+g, 1000+p, str(f.hosts[p]), g, 0x19+g)
		}
	}
	b.WriteString(`]},"results":[`)
	for i, r := range f.rows {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"size":%d,"count":%d,"type":%s,"redop":%s,"root":%s`, r.size, r.count, str(r.typ), str(r.op), str(fmt.Sprintf("%6d", r.root)))
		for pl, name := range []string{"out_of_place", "in_place"} {
			procs := r.times[pl]
			iter := make([]float64, f.iters)
			for it := range iter {
				for _, p := range procs {
					iter[it] = math.Max(iter[it], p[it])
				}
			}
			st := ntStats(iter[f.skip:])
			fmt.Fprintf(&b, `,%s:{"time":%s,"alg_bw":%s,"bus_bw":%s,"nwrong":%s}`, str(name), lf(st.avg), lf(float64(r.size)/st.avg/1e3), lf(0), lf(0))
			cv := 0.0
			if st.avg > 0 {
				cv = st.stdev / st.avg * 100
			}
			fmt.Fprintf(&b, `,%s:{"skipped_iterations":%d,"min_us":%s,"max_us":%s,"avg_us":%s,"p50_us":%s,"p95_us":%s,"p99_us":%s,"stdev_us":%s,"cv_pct":%s,"times_us":%s`,
				str(name+"_per_iter"), f.skip, lf(st.min), lf(st.max), lf(st.avg), lf(st.p50), lf(st.p95), lf(st.p99), lf(st.stdev), lf(cv), list(iter))
			if f.nprocs > 1 {
				b.WriteString(`,"per_process_max_times_us":[`)
				for p, t := range procs {
					if p > 0 {
						b.WriteString(",")
					}
					b.WriteString(list(t))
				}
				b.WriteString("]")
			}
			b.WriteString("}")
		}
		fmt.Fprintf(&b, `,"actual_iterations":%d,"experiment_name":""}`, f.iters)
	}
	b.WriteString(`],"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.000000,"okay":"unchecked"},"errors":[],"end_time":"2026-12-03 09:00:05"}`)
	return b.Bytes()
}

type ntIterStats struct{ min, max, p50, p95, p99, avg, stdev float64 }

// ntStats is util.cu's computeIterStats.
func ntStats(times []float64) ntIterStats {
	s := append([]float64{}, times...)
	sort.Float64s(s)
	n := len(s)
	pct := func(p int) int { return min(n-1, (n*p+99)/100-1) }
	st := ntIterStats{min: s[0], max: s[n-1], p50: s[n/2], p95: s[pct(95)], p99: s[pct(99)]}
	for _, v := range s {
		st.avg += v
	}
	st.avg /= float64(n)
	for _, v := range s {
		st.stdev += (v - st.avg) * (v - st.avg)
	}
	st.stdev = math.Sqrt(st.stdev / float64(n))
	return st
}

// fourProcs: 4 processes on hosts a and b, 20 iterations at 8 B, 1 KB and
// 1 MB. Process 3 is 10% slower throughout; iteration 0 takes 3× on
// every process; iteration 7 spikes 2× on every process at 1 MB;
// iteration 12 spikes 2× on process 1 alone at 1 KB.
func fourProcs() *ntFile {
	f := &ntFile{args: []string{"./build/all_reduce_perf", "-b", "8", "-e", "1M", "-f", "1024", "-I", "1", "-J", "x.json"},
		hosts: []string{"a", "a", "b", "b"}, ngpus: 1, iters: 20, nprocs: 4}
	for _, size := range []uint64{8, 1024, 1 << 20} {
		r := ntRow{size: size, count: size / 4, typ: "float", op: "sum", root: -1}
		base := 10 + float64(size)/1e4
		for pl := 0; pl < 2; pl++ {
			for p := 0; p < 4; p++ {
				t := make([]float64, f.iters)
				for i := range t {
					t[i] = base * (1 + 0.001*float64(i%3))
					if p == 3 {
						t[i] *= 1.1
					}
					if i == 0 {
						t[i] *= 3
					}
					if i == 7 && size == 1<<20 {
						t[i] *= 2
					}
					if i == 12 && size == 1024 && p == 1 {
						t[i] *= 2
					}
				}
				r.times[pl] = append(r.times[pl], t)
			}
		}
		f.rows = append(f.rows, r)
	}
	return f
}

func TestAnalyzeNCCLTestsFile(t *testing.T) {
	raw := fourProcs().write()
	if !json.Valid(raw) {
		t.Fatalf("the generated file is not JSON:\n%s", raw)
	}
	if dir := os.Getenv("PERF_ANALYZE_DIR"); dir != "" {
		os.WriteFile(dir+"/four.json", raw, 0o644)
	}
	a, err := Analyze(bytes.NewReader(raw), "four.json", AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Test != "all_reduce" || a.Processes != 4 || len(a.Sizes) != 3 || a.Consistent == nil || !*a.Consistent {
		t.Fatalf("test %q, %d processes, %d sizes, consistent %v", a.Test, a.Processes, len(a.Sizes), a.Consistent)
	}
	if len(a.Nodes) != 2 || a.Nodes[1].Host != "b" || fmt.Sprint(a.Nodes[1].Processes) != "[2 3]" {
		t.Errorf("nodes %+v", a.Nodes)
	}
	for _, s := range a.Sizes {
		if s.Slowest != 3 || math.Abs(s.SpreadPct-10) > 0.5 {
			t.Errorf("%d: slowest %d spread %.2f%%, want process 3, 10%%", s.Size, s.Slowest, s.SpreadPct)
		}
		if s.Iter0Ratio == nil || math.Abs(*s.Iter0Ratio-3) > 0.25 {
			t.Errorf("%d: iteration 0 ratio %v, want 3", s.Size, *s.Iter0Ratio)
		}
	}
	// Spikes: iteration 0 everywhere (3 sizes), iteration 7 everywhere at
	// 1 MB, iteration 12 on process 1 at 1 KB.
	var got []string
	for _, s := range a.Sizes {
		for _, sp := range s.Spikes {
			got = append(got, fmt.Sprintf("%d:%d:%v", s.Size, sp.Iter, sp.Processes))
		}
	}
	want := "[8:0:[0 1 2 3] 1024:0:[0 1 2 3] 1024:12:[1] 1048576:0:[0 1 2 3] 1048576:7:[0 1 2 3]]"
	if fmt.Sprint(got) != want {
		t.Errorf("spikes %v\nwant   %s", got, want)
	}
	text := strings.Join(a.Findings, "\n")
	for _, w := range []string{"Straggler: process 3 (b) is the slowest at 3 of 3 sizes", "Slow node: b",
		"Spikes: 5 iterations at 3 sizes", "4 on every process at once", "1 on process 1 (a) alone",
		"Warm-up: iteration 0 takes more than 1.5× the rest at 3 of 3 sizes", "-K 1"} {
		if !strings.Contains(text, w) {
			t.Errorf("findings lack %q:\n%s", w, text)
		}
	}
	var out bytes.Buffer
	if err := WriteAnalysis(&out, a, true); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"iteration  12: 1/4 processes", "process 1 alone", "Nodes:", "b                processes 2-3"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}
	t.Logf("\n%s", out.String())
	// In-place and a size filter.
	a, err = Analyze(bytes.NewReader(raw), "four.json", AnalyzeOptions{InPlace: true, Sizes: []uint64{1024}, Threshold: 2.5})
	if err != nil || len(a.Sizes) != 1 || a.Placement != "in-place" || len(a.Sizes[0].Spikes) != 1 {
		t.Errorf("in-place at 1 KB, threshold 2.5: %v %+v", err, a)
	}
}

// One process: no process rows, its own times are the only row; a
// skipped iteration (-K 1) is out of the statistics but in times_us.
func TestAnalyzeOneProcess(t *testing.T) {
	f := fourProcs()
	f.nprocs, f.hosts, f.skip = 1, f.hosts[:1], 1
	for i := range f.rows {
		for pl := range f.rows[i].times {
			f.rows[i].times[pl] = f.rows[i].times[pl][:1]
		}
	}
	raw := f.write()
	if bytes.Contains(raw, []byte("per_process_max_times_us")) {
		t.Fatal("a one-process file has process rows")
	}
	a, err := Analyze(bytes.NewReader(raw), "one.json", AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Processes != 1 || a.Consistent != nil || a.Skip != 1 {
		t.Errorf("processes %d, consistent %v, skip %d", a.Processes, a.Consistent, a.Skip)
	}
	text := strings.Join(a.Findings, "\n")
	if strings.Contains(text, "traggler") || !strings.Contains(text, "the statistics already skip 1") {
		t.Errorf("findings:\n%s", text)
	}
	// The file's statistics skip iteration 0: max/avg is small.
	if s := a.Sizes[0]; s.Spike > 1.1 || s.Flagged {
		t.Errorf("8 B: spike %.2f flagged %v with iteration 0 skipped", s.Spike, s.Flagged)
	}
}

// A file without per-iteration times (nccl-tests without -I 1) says so.
func TestAnalyzeNoPerIter(t *testing.T) {
	f, err := os.Open("testdata/nccltests.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Analyze(f, "nccltests.json", AnalyzeOptions{}); !errors.Is(err, ErrNoPerIter) {
		t.Errorf("%v, want ErrNoPerIter", err)
	}
}

// testdata/nccltests_periter_4procs.json is fourProcs as the writer
// above makes it (the CLI's tests read it); keep them the same.
func TestAnalyzeTestdataCurrent(t *testing.T) {
	b, err := os.ReadFile("testdata/nccltests_periter_4procs.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, fourProcs().write()) {
		t.Error("testdata/nccltests_periter_4procs.json differs from fourProcs: regenerate it with PERF_ANALYZE_DIR")
	}
}

// A file whose devices name no host groups the processes ProcsPerNode at
// a time (perf analyze --procs-per-node: "processes per node when the
// file names no hosts"), the last node taking what is left.
func TestNodeGroupsWithoutHosts(t *testing.T) {
	doc := &jsonDoc{Config: jsonConfig{NThreads: 1, NGPUs: 1}}
	got := fmt.Sprint(nodeGroups(doc, 5, 2))
	if want := "[{node 0 [0 1]} {node 1 [2 3]} {node 2 [4]}]"; got != want {
		t.Errorf("nodeGroups(5 processes, 2 per node) = %s, want %s", got, want)
	}
}

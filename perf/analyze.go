package perf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Analysis of per-iteration timings: what nccl-tests ships as
// tools/analyze_perf_json.py (2.19.6), built in. It reads nccl-tests' JSON
// version 3 written with -I 1 (per-iteration CUDA event times) and
// nccl4go perf's own JSON, and finds stragglers across processes and
// nodes, iterations that spike above a threshold, and the weight of
// iteration 0 (warm-up).

// ErrNoPerIter: a JSON file holds no per-iteration times, so there is
// nothing to analyze (nccl-tests writes them with -I 1).
var ErrNoPerIter = errors.New("no per-iteration times (run nccl-tests with -I 1 -J FILE)")

// AnalyzeOptions choose what [Analyze] looks at.
type AnalyzeOptions struct {
	// InPlace analyzes the in-place column instead of the out-of-place one.
	InPlace bool
	// Threshold is the spike threshold, a multiple of the average time
	// (analyze_perf_json.py's --threshold; 0 means its default, 1.5).
	Threshold float64
	// Sizes, when set, limits the analysis to these sizes in bytes.
	Sizes []uint64
	// ProcsPerNode groups processes into nodes when the file does not name
	// their hosts (0 means the script's default, 4).
	ProcsPerNode int
}

// Analysis is what [Analyze] found in one file.
type Analysis struct {
	File    string `json:"file"`
	Version int    `json:"version"`
	Test    string `json:"test,omitempty"`
	// Placement is "out-of-place" or "in-place".
	Placement  string  `json:"placement"`
	Iterations int     `json:"iterations"`
	AggIters   int     `json:"aggregated_iterations"`
	Skip       int     `json:"per_iter_skip"`
	Threshold  float64 `json:"threshold"`
	// Processes is the number of process rows (per_process_max_times_us);
	// a file of one process has none, and its own times count as process 0.
	Processes int `json:"processes"`
	// Nodes groups the processes by host (or ProcsPerNode at a time when
	// the file does not name them).
	Nodes []Node `json:"nodes"`
	// Consistent is whether times_us is the maximum over the process rows,
	// iteration by iteration, for every size (nil without process rows).
	Consistent *bool       `json:"consistent,omitempty"`
	Sizes      []SizeStats `json:"sizes"`
	// Findings are the conclusions, in words.
	Findings []string `json:"findings"`
}

// Node is one host and its processes.
type Node struct {
	Host      string `json:"host"`
	Processes []int  `json:"processes"`
}

// SizeStats is one result row's per-iteration statistics, in microseconds.
type SizeStats struct {
	Size uint64 `json:"size"`
	Type string `json:"type"`
	Op   string `json:"redop"`
	Root int    `json:"root"`
	// From the file: over the iterations after the skipped ones.
	Avg   float64 `json:"avg_us"`
	Min   float64 `json:"min_us"`
	Max   float64 `json:"max_us"`
	P99   float64 `json:"p99_us"`
	CVPct float64 `json:"cv_pct"`
	// Spike is Max/Avg; Flagged is CV above 5% or Spike above 1.5 (the
	// script's "***").
	Spike   float64 `json:"spike"`
	Flagged bool    `json:"flagged"`
	// Procs is each process's statistics (sample standard deviation, as
	// the script computes them), in process order.
	Procs []ProcStats `json:"processes"`
	// Fastest, Slowest and Noisiest are process numbers; Spread is the
	// slowest's average minus the fastest's, SpreadPct that over the
	// fastest's.
	Fastest   int     `json:"fastest"`
	Slowest   int     `json:"slowest"`
	Noisiest  int     `json:"noisiest"`
	Spread    float64 `json:"spread_us"`
	SpreadPct float64 `json:"spread_pct"`
	// Spikes are the iterations where some process took more than
	// Threshold times the average.
	Spikes []Spike `json:"spikes"`
	// Iter0 is the first iteration's time, SteadyAvg the mean of the rest,
	// Iter0Ratio their ratio; CVWith and CVWithout are the coefficients of
	// variation with and without iteration 0 (all nil with fewer than two
	// iterations).
	Iter0      *float64 `json:"iter0_us,omitempty"`
	SteadyAvg  *float64 `json:"steady_avg_us,omitempty"`
	Iter0Ratio *float64 `json:"iter0_ratio,omitempty"`
	CVWith     *float64 `json:"cv_pct_with_iter0,omitempty"`
	CVWithout  *float64 `json:"cv_pct_without_iter0,omitempty"`
	// NodeStats summarize each node's processes.
	NodeStats []NodeStats `json:"node_stats"`
}

// ProcStats is one process's times at one size.
type ProcStats struct {
	Avg   float64 `json:"avg_us"`
	Min   float64 `json:"min_us"`
	Max   float64 `json:"max_us"`
	CVPct float64 `json:"cv_pct"`
}

// Spike is one iteration in which Count of the processes took more than
// the threshold; Max is the slowest process's time.
type Spike struct {
	Iter      int     `json:"iteration"`
	Count     int     `json:"count"`
	Processes []int   `json:"processes"`
	Max       float64 `json:"max_us"`
}

// NodeStats is one node at one size: the mean and range of its processes'
// averages, its largest time and its noisiest process.
type NodeStats struct {
	Node          int     `json:"node"`
	Avg           float64 `json:"avg_us"`
	AvgMin        float64 `json:"avg_min_us"`
	AvgMax        float64 `json:"avg_max_us"`
	Max           float64 `json:"max_us"`
	Noisiest      int     `json:"noisiest"`
	NoisiestCVPct float64 `json:"noisiest_cv_pct"`
}

// AnalyzeFile reads and analyzes one JSON file.
func AnalyzeFile(path string, o AnalyzeOptions) (*Analysis, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("perf: %w", err)
	}
	defer f.Close()
	return Analyze(f, path, o)
}

// Analyze reads one JSON file (nccl-tests' or ours) from r and analyzes
// its per-iteration times. A file without them is an error wrapping
// [ErrNoPerIter].
func Analyze(r io.Reader, name string, o AnalyzeOptions) (*Analysis, error) {
	doc, err := readDoc(r, name)
	if err != nil {
		return nil, err
	}
	if o.Threshold <= 0 {
		o.Threshold = 1.5
	}
	if o.ProcsPerNode <= 0 {
		o.ProcsPerNode = 4
	}
	a := &Analysis{File: name, Version: doc.Version, Placement: "out-of-place", Iterations: doc.Config.Iters,
		AggIters: doc.Config.AggIters, Skip: doc.Config.PerIterSkip, Threshold: o.Threshold, Sizes: []SizeStats{}}
	if o.InPlace {
		a.Placement = "in-place"
	}
	if s, err := seriesOfDoc(doc, name); err == nil {
		a.Test = s.Test
	}
	want := map[uint64]bool{}
	for _, s := range o.Sizes {
		want[s] = true
	}
	consistent, checked := true, false
	for _, row := range doc.Results {
		pi := row.OutOfPlaceIters
		if o.InPlace {
			pi = row.InPlaceIters
		}
		if pi == nil || len(pi.TimesUS) == 0 {
			continue
		}
		if len(want) > 0 && !want[row.Size] {
			continue
		}
		procs := pi.PerProcess
		if len(procs) == 0 {
			procs = [][]flexFloat{pi.TimesUS}
		} else {
			checked = true
			if !timesAreProcessMax(pi.TimesUS, procs) {
				consistent = false
			}
		}
		if len(procs) > a.Processes {
			a.Processes = len(procs)
		}
		st := SizeStats{Size: row.Size, Type: row.Type, Op: row.Redop, Avg: float64(pi.AvgUS), Min: float64(pi.MinUS),
			Max: float64(pi.MaxUS), P99: float64(pi.P99US), CVPct: float64(pi.CVPct), Spikes: []Spike{}}
		_ = parseRoot(row.Root, &st.Root)
		if st.Avg > 0 {
			st.Spike = st.Max / st.Avg
		}
		st.Flagged = st.CVPct > 5 || st.Spike > 1.5
		for _, times := range procs {
			st.Procs = append(st.Procs, procStats(times))
		}
		for i, p := range st.Procs {
			if p.Avg < st.Procs[st.Fastest].Avg {
				st.Fastest = i
			}
			if p.Avg > st.Procs[st.Slowest].Avg {
				st.Slowest = i
			}
			if p.CVPct > st.Procs[st.Noisiest].CVPct {
				st.Noisiest = i
			}
		}
		st.Spread = st.Procs[st.Slowest].Avg - st.Procs[st.Fastest].Avg
		if st.Procs[st.Fastest].Avg > 0 {
			st.SpreadPct = st.Spread / st.Procs[st.Fastest].Avg * 100
		}
		if st.Avg > 0 && st.Max/st.Avg >= o.Threshold {
			st.Spikes = spikes(procs, st.Avg*o.Threshold)
		}
		if t := pi.TimesUS; len(t) >= 2 {
			f := floats(t)
			i0, steady := f[0], mean(f[1:])
			ratio := 0.0
			if steady > 0 {
				ratio = i0 / steady
			}
			with, without := cvPct(f), cvPct(f[1:])
			st.Iter0, st.SteadyAvg, st.Iter0Ratio, st.CVWith, st.CVWithout = &i0, &steady, &ratio, &with, &without
		}
		a.Sizes = append(a.Sizes, st)
	}
	if len(a.Sizes) == 0 {
		if len(want) > 0 {
			return nil, fmt.Errorf("perf: analyze %s: no %s per-iteration times at the sizes asked for", name, a.Placement)
		}
		return nil, fmt.Errorf("perf: analyze %s: %w", name, ErrNoPerIter)
	}
	if checked {
		a.Consistent = &consistent
	}
	a.Nodes = nodeGroups(doc, a.Processes, o.ProcsPerNode)
	for i := range a.Sizes {
		a.Sizes[i].NodeStats = nodeStats(&a.Sizes[i], a.Nodes)
	}
	a.Findings = findings(a)
	return a, nil
}

// readDoc decodes a JSON result file.
func readDoc(r io.Reader, name string) (*jsonDoc, error) {
	var doc jsonDoc
	if err := newJSONDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("perf: %s: not an nccl-tests JSON file: %w", name, err)
	}
	if doc.Version == 0 && doc.Results == nil {
		return nil, fmt.Errorf("perf: %s: no version and no results: not an nccl-tests JSON file", name)
	}
	return &doc, nil
}

func floats(v []flexFloat) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// sampleStdev is Python's statistics.stdev (0 for fewer than two values).
func sampleStdev(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m, s := mean(v), 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)-1))
}

func cvPct(v []float64) float64 {
	m := mean(v)
	if m <= 0 {
		return 0
	}
	return sampleStdev(v) / m * 100
}

func procStats(times []flexFloat) ProcStats {
	f := floats(times)
	p := ProcStats{Avg: mean(f), Min: math.Inf(1), Max: math.Inf(-1), CVPct: cvPct(f)}
	for _, x := range f {
		p.Min, p.Max = math.Min(p.Min, x), math.Max(p.Max, x)
	}
	return p
}

// timesAreProcessMax checks nccl-tests' rule: times_us is the maximum over
// the process rows, iteration by iteration (to 0.001 µs).
func timesAreProcessMax(times []flexFloat, procs [][]flexFloat) bool {
	n := len(procs[0])
	for _, p := range procs {
		n = min(n, len(p))
	}
	if len(times) != n {
		return false
	}
	for i := 0; i < n; i++ {
		m := math.Inf(-1)
		for _, p := range procs {
			m = math.Max(m, float64(p[i]))
		}
		if math.Abs(float64(times[i])-m) >= 0.001 {
			return false
		}
	}
	return true
}

// spikes lists the iterations in which some process took more than limit.
func spikes(procs [][]flexFloat, limit float64) []Spike {
	byIter := map[int]*Spike{}
	var iters []int
	for pi, times := range procs {
		for i, t := range times {
			if float64(t) > limit {
				s := byIter[i]
				if s == nil {
					s = &Spike{Iter: i}
					byIter[i] = s
					iters = append(iters, i)
				}
				s.Count++
				s.Processes = append(s.Processes, pi)
			}
		}
	}
	sort.Ints(iters)
	out := []Spike{}
	for _, i := range iters {
		s := byIter[i]
		s.Max = math.Inf(-1)
		for _, times := range procs {
			if i < len(times) {
				s.Max = math.Max(s.Max, float64(times[i]))
			}
		}
		out = append(out, *s)
	}
	return out
}

// nodeGroups groups processes by the host of their first device, in order
// of appearance, else ProcsPerNode at a time. (The script takes device p
// for process p, which is right only with one GPU per process; with -g N
// process p's first device is device p*N.)
func nodeGroups(doc *jsonDoc, nprocs, perNode int) []Node {
	devs := doc.Config.Devices
	g := max(doc.Config.NGPUs, 1) * max(doc.Config.NThreads, 1)
	if nprocs > 0 && len(devs) >= nprocs*g {
		var nodes []Node
		index := map[string]int{}
		ok := true
		for p := 0; p < nprocs; p++ {
			host := devs[p*g].Host
			if host == "" {
				ok = false
				break
			}
			i, seen := index[host]
			if !seen {
				i = len(nodes)
				index[host] = i
				nodes = append(nodes, Node{Host: host})
			}
			nodes[i].Processes = append(nodes[i].Processes, p)
		}
		if ok {
			return nodes
		}
	}
	var nodes []Node
	for start := 0; start < nprocs; start += perNode {
		n := Node{Host: fmt.Sprintf("node %d", len(nodes))}
		for p := start; p < min(start+perNode, nprocs); p++ {
			n.Processes = append(n.Processes, p)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func nodeStats(st *SizeStats, nodes []Node) []NodeStats {
	var out []NodeStats
	for ni, n := range nodes {
		ns := NodeStats{Node: ni, AvgMin: math.Inf(1), AvgMax: math.Inf(-1), Max: math.Inf(-1), Noisiest: -1}
		cnt := 0
		for _, p := range n.Processes {
			if p >= len(st.Procs) {
				continue
			}
			ps := st.Procs[p]
			ns.Avg += ps.Avg
			cnt++
			ns.AvgMin, ns.AvgMax = math.Min(ns.AvgMin, ps.Avg), math.Max(ns.AvgMax, ps.Avg)
			ns.Max = math.Max(ns.Max, ps.Max)
			if ns.Noisiest < 0 || ps.CVPct > ns.NoisiestCVPct {
				ns.Noisiest, ns.NoisiestCVPct = p, ps.CVPct
			}
		}
		if cnt == 0 {
			continue
		}
		ns.Avg /= float64(cnt)
		out = append(out, ns)
	}
	return out
}

// findings puts the analysis in words.
func findings(a *Analysis) []string {
	var out []string
	nodeOf := map[int]string{}
	for _, n := range a.Nodes {
		for _, p := range n.Processes {
			nodeOf[p] = n.Host
		}
	}
	procName := func(p int) string {
		if h := nodeOf[p]; h != "" && len(a.Nodes) > 1 {
			return fmt.Sprintf("process %d (%s)", p, h)
		}
		return fmt.Sprintf("process %d", p)
	}
	if a.Consistent != nil && !*a.Consistent {
		out = append(out, "The file is inconsistent: times_us is not the maximum over the process rows at every size; the figures below may not agree.")
	}
	// Stragglers: the process slowest most often, and by how much.
	if a.Processes > 1 {
		slow := map[int]int{}
		worst := map[int]float64{}
		worstAt := map[int]uint64{}
		for _, s := range a.Sizes {
			if s.SpreadPct < 1 {
				continue // within 1%: nobody straggles
			}
			slow[s.Slowest]++
			if s.SpreadPct > worst[s.Slowest] {
				worst[s.Slowest], worstAt[s.Slowest] = s.SpreadPct, s.Size
			}
		}
		best, bestN := -1, 0
		for p, n := range slow {
			if n > bestN || n == bestN && p < best {
				best, bestN = p, n
			}
		}
		switch {
		case best < 0:
			out = append(out, fmt.Sprintf("No straggler: at every size the %d processes' averages are within 1%% of each other.", a.Processes))
		case bestN*2 > len(a.Sizes):
			out = append(out, fmt.Sprintf("Straggler: %s is the slowest at %d of %d sizes, up to %.1f%% behind the fastest (at %s).",
				procName(best), bestN, len(a.Sizes), worst[best], sizeWords(worstAt[best])))
		default:
			out = append(out, fmt.Sprintf("No steady straggler: the slowest process changes from size to size (%s most often, at %d of %d sizes, up to %.1f%% behind).",
				procName(best), bestN, len(a.Sizes), worst[best]))
		}
		if len(a.Nodes) > 1 {
			slowNode := map[int]int{}
			for _, s := range a.Sizes {
				if len(s.NodeStats) < 2 {
					continue
				}
				w := 0
				for i, n := range s.NodeStats {
					if n.Avg > s.NodeStats[w].Avg {
						w = i
					}
				}
				slowNode[s.NodeStats[w].Node]++
			}
			for n, c := range slowNode {
				if c*2 > len(a.Sizes) {
					out = append(out, fmt.Sprintf("Slow node: %s has the highest average at %d of %d sizes.", a.Nodes[n].Host, c, len(a.Sizes)))
				}
			}
		}
	}
	// Spikes.
	total, wide, alone := 0, 0, map[int]int{}
	sizes := 0
	for _, s := range a.Sizes {
		if len(s.Spikes) > 0 {
			sizes++
		}
		for _, sp := range s.Spikes {
			total++
			switch {
			case sp.Count == a.Processes && a.Processes > 1:
				wide++
			case sp.Count == 1 && a.Processes > 1:
				alone[sp.Processes[0]]++
			}
		}
	}
	if total == 0 {
		out = append(out, fmt.Sprintf("No spike: no iteration took more than %g× its size's average.", a.Threshold))
	} else {
		msg := fmt.Sprintf("Spikes: %d iterations at %d sizes took more than %g× the average", total, sizes, a.Threshold)
		if a.Processes > 1 {
			var parts []string
			if wide > 0 {
				parts = append(parts, fmt.Sprintf("%d on every process at once (something shared: the network, a switch, the host)", wide))
			}
			var ps []int
			for p := range alone {
				ps = append(ps, p)
			}
			sort.Ints(ps)
			for _, p := range ps {
				parts = append(parts, fmt.Sprintf("%d on %s alone", alone[p], procName(p)))
			}
			if len(parts) > 0 {
				msg += ": " + strings.Join(parts, ", ")
			}
		}
		out = append(out, msg+".")
	}
	// Warm-up.
	hot, worstR, worstAt := 0, 0.0, uint64(0)
	for _, s := range a.Sizes {
		if s.Iter0Ratio == nil {
			continue
		}
		if *s.Iter0Ratio > 1.5 {
			hot++
		}
		if *s.Iter0Ratio > worstR {
			worstR, worstAt = *s.Iter0Ratio, s.Size
		}
	}
	switch {
	case hot > 0 && a.Skip == 0:
		out = append(out, fmt.Sprintf("Warm-up: iteration 0 takes more than 1.5× the rest at %d of %d sizes (%.1f× at %s); -K 1 leaves it out of the statistics, more warm-up (-w) out of the run.",
			hot, len(a.Sizes), worstR, sizeWords(worstAt)))
	case hot > 0:
		out = append(out, fmt.Sprintf("Warm-up: iteration 0 takes more than 1.5× the rest at %d of %d sizes (%.1f× at %s); the statistics already skip %d.",
			hot, len(a.Sizes), worstR, sizeWords(worstAt), a.Skip))
	case worstR > 0:
		out = append(out, fmt.Sprintf("No warm-up effect: iteration 0 is at most %.2f× the rest.", worstR))
	}
	noisy := 0
	for _, s := range a.Sizes {
		if s.CVPct > 5 {
			noisy++
		}
	}
	if noisy > 0 {
		out = append(out, fmt.Sprintf("Noise: %d of %d sizes vary by more than 5%% (coefficient of variation) from iteration to iteration.", noisy, len(a.Sizes)))
	}
	return out
}

// sizeWords is the script's fmt_size: "8 B", "1 KB", "1.5 MB".
func sizeWords(size uint64) string {
	if size == 0 {
		return "0 B"
	}
	for _, u := range []struct {
		name string
		v    uint64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}} {
		if size >= u.v {
			v := float64(size) / float64(u.v)
			if v == math.Trunc(v) {
				return fmt.Sprintf("%.0f %s", v, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%d B", size)
}

// WriteAnalysis prints an analysis for a person: the findings first, then
// a table per size; detail adds every spike, the warm-up table and the
// nodes.
func WriteAnalysis(w io.Writer, a *Analysis, detail bool) error {
	ew := &errWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }
	what := a.Test
	if what == "" {
		what = "a run"
	}
	nodes := ""
	if len(a.Nodes) > 1 {
		nodes = fmt.Sprintf(" on %d nodes", len(a.Nodes))
	}
	procs := "1 process"
	if a.Processes > 1 {
		procs = fmt.Sprintf("%d processes", a.Processes)
	}
	p("%s: %s, JSON version %d, %s%s, %d iterations (%d aggregated), %s", a.File, what, a.Version,
		procs, nodes, a.Iterations, max(a.AggIters, 1), a.Placement)
	if a.Skip > 0 {
		p(", statistics skip %d", a.Skip)
	}
	p("\n\n")
	for _, f := range a.Findings {
		p("  - %s\n", f)
	}
	p("\n%12s  %10s  %10s  %10s  %10s  %6s  %6s  %-14s  %8s\n", "size", "avg (us)", "min", "max", "p99", "cv%", "spike", "slowest", "spread")
	for _, s := range a.Sizes {
		flag := ""
		if s.Flagged {
			flag = "  ***"
		}
		slowest := "-"
		spread := "-"
		if len(s.Procs) > 1 {
			slowest = fmt.Sprintf("process %d", s.Slowest)
			spread = fmt.Sprintf("%.1f%%", s.SpreadPct)
		}
		p("%12d  %10.1f  %10.1f  %10.1f  %10.1f  %5.1f%%  %5.1fx  %-14s  %8s%s\n", s.Size, s.Avg, s.Min, s.Max, s.P99, s.CVPct, s.Spike, slowest, spread, flag)
	}
	p("(*** : cv above 5%% or max above 1.5x the average)\n")
	if !detail {
		return ew.err
	}
	p("\nSpikes (above %gx the average):\n", a.Threshold)
	any := false
	for _, s := range a.Sizes {
		for _, sp := range s.Spikes {
			any = true
			kind := ""
			switch {
			case a.Processes > 1 && sp.Count == a.Processes:
				kind = "  every process"
			case a.Processes > 1 && sp.Count == 1:
				kind = fmt.Sprintf("  process %d alone", sp.Processes[0])
			case a.Processes > 1:
				kind = fmt.Sprintf("  processes %v", sp.Processes)
			}
			p("  %10s  iteration %3d: %d/%d processes, max %.1f us%s\n", sizeWords(s.Size), sp.Iter, sp.Count, max(a.Processes, 1), sp.Max, kind)
		}
	}
	if !any {
		p("  none\n")
	}
	p("\nIteration 0 (warm-up):\n%12s  %10s  %10s  %6s  %11s  %8s\n", "size", "iter0 (us)", "iter1+ avg", "ratio", "cv with", "without")
	for _, s := range a.Sizes {
		if s.Iter0 == nil {
			continue
		}
		flag := ""
		if *s.Iter0Ratio > 1.5 {
			flag = "  ***"
		}
		p("%12d  %10.1f  %10.1f  %5.1fx  %10.1f%%  %7.1f%%%s\n", s.Size, *s.Iter0, *s.SteadyAvg, *s.Iter0Ratio, *s.CVWith, *s.CVWithout, flag)
	}
	if len(a.Nodes) > 1 {
		p("\nNodes:\n")
		for _, s := range a.Sizes {
			p("  %s:\n", sizeWords(s.Size))
			for _, n := range s.NodeStats {
				node := a.Nodes[n.Node]
				p("    %-16s processes %-9s avg %.1f us  range %.1f-%.1f  max %.1f  noisiest process %d (cv %.1f%%)\n",
					node.Host, procRange(node.Processes), n.Avg, n.AvgMin, n.AvgMax, n.Max, n.Noisiest, n.NoisiestCVPct)
			}
		}
	}
	return ew.err
}

func procRange(p []int) string {
	if len(p) == 1 {
		return fmt.Sprint(p[0])
	}
	return fmt.Sprintf("%d-%d", p[0], p[len(p)-1])
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

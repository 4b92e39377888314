package perf

import (
	"bytes"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// sweep is a synthetic run: sizes 8 B.. (n sizes, doubling), each type,
// op and root given.
func sweep(name, test string, nranks, n int, typs, opNames []string, roots []int) *Series {
	s := &Series{Name: name, Test: test, NRanks: nranks}
	for ti, typ := range typs {
		for oi, op := range opNames {
			for _, root := range roots {
				size := uint64(8)
				for i := 0; i < n; i, size = i+1, size*2 {
					tm := 5 + float64(size)/2e4*(1+0.1*float64(ti+oi+max(root, 0)))
					alg := float64(size) / tm / 1e3
					f, _ := BusFactor(test, nranks)
					s.Rows = append(s.Rows, Row{Size: size, Type: typ, Op: op, Root: root,
						OutOfPlace: Cell{Time: tm, AlgBW: alg, BusBW: alg * f},
						InPlace:    Cell{Time: tm * 0.97, AlgBW: alg / 0.97, BusBW: alg / 0.97 * f}})
				}
			}
		}
	}
	return s
}

// One line per (series, type, op, root) and column, never one zig-zag
// through them; bus bandwidth where its factor is not 0, algbw where it is.
func TestPlotLinesPerCombination(t *testing.T) {
	s := sweep("reduce (4 ranks)", "reduce", 4, 26, []string{"float", "half"}, []string{"sum", "max"}, []int{0, 1, 2})
	fig, err := buildFigure("t", []*Series{s})
	if err != nil {
		t.Fatal(err)
	}
	if len(fig.lines) != 2*2*3*2 {
		t.Fatalf("%d lines, want 24 (2 types × 2 ops × 3 roots × 2 columns)", len(fig.lines))
	}
	seen := map[string]bool{}
	for _, l := range fig.lines {
		if len(l.bw) != 26 || len(l.t) != 26 {
			t.Errorf("%s: %d bandwidth and %d time points, want 26", l.label, len(l.bw), len(l.t))
		}
		for i := 1; i < len(l.bw); i++ {
			if l.bw[i].X <= l.bw[i-1].X {
				t.Errorf("%s: sizes not increasing at point %d", l.label, i)
				break
			}
		}
		if l.algbw || seen[l.label] {
			t.Errorf("line %q: algbw %v, duplicate %v", l.label, l.algbw, seen[l.label])
		}
		seen[l.label] = true
	}
	if !strings.Contains(fig.lines[0].label, "float sum root 0") || fig.bw.Y.Label.Text != "busbw (GB/s)" {
		t.Errorf("first label %q, bandwidth axis %q", fig.lines[0].label, fig.bw.Y.Label.Text)
	}
	// Colours: Okabe-Ito, one per line pair, no red/green start.
	if fig.lines[0].color != okabeIto[0] || fig.lines[2].color != okabeIto[1] || fig.lines[1].color != fig.lines[0].color {
		t.Errorf("colours %v %v %v", fig.lines[0].color, fig.lines[1].color, fig.lines[2].color)
	}
	// One rank: busbw's factor is 0, so algbw is drawn (it was a flat 0).
	one := sweep("all_reduce (1 rank)", "all_reduce", 1, 10, []string{"float"}, []string{"sum"}, []int{-1})
	fig, err = buildFigure("", []*Series{one})
	if err != nil {
		t.Fatal(err)
	}
	if !fig.lines[0].algbw || fig.bw.Y.Label.Text != "algbw (GB/s)" || fig.lines[0].bw[9].Y <= 0 {
		t.Errorf("one rank: algbw %v, axis %q, last point %v", fig.lines[0].algbw, fig.bw.Y.Label.Text, fig.lines[0].bw[9])
	}
	if fig.bw.Y.Min != 0 {
		t.Errorf("bandwidth axis starts at %v", fig.bw.Y.Min)
	}
}

// Ticks: at most seven labelled sizes whatever the sweep (26 sizes
// overlapped), and a log time axis labelled more than once.
func TestPlotTicks(t *testing.T) {
	for _, c := range []struct{ min, max float64 }{{8, 256 << 20}, {8, 1 << 30}, {1 << 20, 1 << 21}, {8, 64}, {1, 1 << 40}} {
		labels := 0
		for _, tk := range (sizeTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				labels++
			}
		}
		if labels < 2 || labels > 7 {
			t.Errorf("sizes %v..%v: %d labels, want 2..7", c.min, c.max, labels)
		}
	}
	for _, c := range []struct {
		min, max float64
		least    int
	}{{5, 5000, 4}, {4.2, 31, 3}, {3.1, 3.9, 2}, {1, 1e7, 8}} {
		var labels []string
		for _, tk := range (logTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < c.least {
			t.Errorf("time %v..%v: labels %q, want at least %d", c.min, c.max, labels, c.least)
		}
	}
}

// The figures decode; with PERF_PLOT_DIR set they are kept there to look
// at.
func TestPlotFiles(t *testing.T) {
	dir := os.Getenv("PERF_PLOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	many := sweep("reduce (4 ranks)", "reduce", 4, 26, []string{"float", "half"}, []string{"sum", "max"}, []int{0, 1})
	one := sweep("all_reduce (1 rank)", "all_reduce", 1, 26, []string{"float"}, []string{"sum"}, []int{-1})
	a := sweep("nccl-tests", "all_reduce", 8, 26, []string{"float"}, []string{"sum"}, []int{-1})
	b := sweep("nccl4go", "all_reduce", 8, 26, []string{"float"}, []string{"sum"}, []int{-1})
	for i := range b.Rows {
		b.Rows[i].OutOfPlace.Time *= 1.05
	}
	for name, ss := range map[string][]*Series{"many.png": {many}, "one-rank.png": {one}, "compare.png": {a, b}} {
		var buf bytes.Buffer
		if err := Plot(&buf, "png", "nccl4go perf", ss...); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The palette's first colour is drawn.
		found := false
		bnd := img.Bounds()
		for y := bnd.Min.Y; y < bnd.Max.Y && !found; y++ {
			for x := bnd.Min.X; x < bnd.Max.X; x++ {
				if c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); c == okabeIto[0] {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("%s: no line in the palette's first colour", name)
		}
		os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
	}
}

// A one-rank in-place all-reduce moves nothing: its "bandwidth" is huge
// and flattened every other line; the bandwidth axis turns logarithmic
// when some line reaches ten times the out-of-place maximum.
func TestPlotLogBandwidthForNoOps(t *testing.T) {
	one := sweep("all_reduce (1 rank)", "all_reduce", 1, 26, []string{"float"}, []string{"sum"}, []int{-1})
	fig, err := buildFigure("", []*Series{one})
	if err != nil {
		t.Fatal(err)
	}
	if _, log := fig.bw.Y.Scale.(plot.LogScale); log {
		t.Error("log bandwidth axis for ordinary lines")
	}
	for i := range one.Rows {
		one.Rows[i].InPlace.Time = 0.5
		one.Rows[i].InPlace.AlgBW = float64(one.Rows[i].Size) / 0.5 / 1e3
	}
	one.Rows[0].OutOfPlace.AlgBW = 0 // not drawable on a log axis
	fig, err = buildFigure("", []*Series{one})
	if err != nil {
		t.Fatal(err)
	}
	if _, log := fig.bw.Y.Scale.(plot.LogScale); !log || !strings.Contains(fig.bw.Title.Text, "log") {
		t.Errorf("no log bandwidth axis: %q", fig.bw.Title.Text)
	}
	for _, l := range fig.lines {
		for _, p := range l.bw {
			if p.Y <= 0 {
				t.Errorf("%s: point %v on a log axis", l.label, p)
			}
		}
	}
	if dir := os.Getenv("PERF_PLOT_DIR"); dir != "" {
		f, _ := os.Create(filepath.Join(dir, "one-rank-noop.png"))
		Plot(f, "png", "nccl4go perf", one)
		f.Close()
	}
}

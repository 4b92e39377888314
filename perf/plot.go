package perf

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotFormat is the image format a plot file's extension names: "png" or
// "svg" (an error for anything else).
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); ext {
	case "png", "svg":
		return ext, nil
	default:
		return "", fmt.Errorf("perf: plot %s: unknown image format %q: use .png or .svg", path, ext)
	}
}

// SeriesOf turns a report into a [Series] named name.
func SeriesOf(r *Report, name string) *Series {
	return &Series{Name: name, Test: r.Test, NRanks: r.NRanks, Rows: r.Rows}
}

// PlotFile draws every series into path (.png or .svg): see [Plot].
func PlotFile(path string, title string, series ...*Series) error {
	format, err := PlotFormat(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("perf: plot: %w", err)
	}
	if err := Plot(f, format, title, series...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// okabeIto is Okabe and Ito's palette, which stays distinct under the
// common colour-vision deficiencies; yellow (hard to see on white) comes
// last. Lines beyond it repeat the colours with other markers and dashes.
var okabeIto = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x00, 0x00, 0xff}, // black
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
}

// lineKey is one line of a figure: a series' rows of one type, reduction
// and root.
type lineKey struct {
	series  int
	typ, op string
	root    int
}

// plotLine is one drawn line: its key, whether it is the in-place column,
// what it plots and its points.
type plotLine struct {
	key     lineKey
	inPlace bool
	algbw   bool // the bandwidth panel shows algbw: busbw's factor is 0
	label   string
	color   color.RGBA
	bw, t   plotter.XYs
}

// figure is what [Plot] draws, kept apart for tests.
type figure struct {
	bw, tm *plot.Plot
	lines  []plotLine
	legend []plot.Legend // one per column, drawn under the panels
	rows   int           // legend rows
}

// Plot draws every series into w in format ("png" or "svg"): bandwidth
// (left) and time per operation (right, log scale) against message size
// (log scale). Each series gets one line per data type, reduction and root
// it measured, out-of-place solid and in-place dashed; a size measured
// several times (-N) is drawn at its mean. [Bandwidth] is bus bandwidth,
// except for a series whose bus bandwidth factor is 0 (one rank), where
// it is the algorithm bandwidth, and the legend says so. Colours are Okabe
// and Ito's colour-blind-safe palette; the legend sits under the panels,
// outside the data.
func Plot(w io.Writer, format, title string, series ...*Series) error {
	fig, err := buildFigure(title, series)
	if err != nil {
		return err
	}
	legendH := vg.Length(fig.rows)*vg.Points(11) + vg.Centimeter*0.4
	c, err := draw.NewFormattedCanvas(26*vg.Centimeter, 11*vg.Centimeter+legendH, format)
	if err != nil {
		return fmt.Errorf("perf: plot: %w", err)
	}
	dc := draw.New(c)
	panels := draw.Crop(dc, 0, 0, legendH, 0)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2,
		PadRight: vg.Centimeter / 2, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 4}
	canvases := plot.Align([][]*plot.Plot{{fig.bw, fig.tm}}, tiles, panels)
	fig.bw.Draw(canvases[0][0])
	fig.tm.Draw(canvases[0][1])
	legendArea := draw.Crop(dc, vg.Centimeter/2, -vg.Centimeter/2, vg.Centimeter/4, -(dc.Max.Y - dc.Min.Y - legendH))
	colW := (legendArea.Max.X - legendArea.Min.X) / vg.Length(len(fig.legend))
	for i := range fig.legend {
		col := draw.Crop(legendArea, colW*vg.Length(i), -colW*vg.Length(len(fig.legend)-1-i), 0, 0)
		fig.legend[i].Draw(col)
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("perf: plot: %w", err)
	}
	return nil
}

// buildFigure makes the panels, lines and legend of [Plot].
func buildFigure(title string, series []*Series) (*figure, error) {
	if len(series) == 0 {
		return nil, fmt.Errorf("perf: plot: no series")
	}
	fig := &figure{bw: plot.New(), tm: plot.New()}
	// Which of type, reduction and root vary: only those go in labels.
	types, opsSeen, roots := map[string]bool{}, map[string]bool{}, map[int]bool{}
	for _, s := range series {
		for _, r := range s.Rows {
			types[r.Type], opsSeen[r.Op], roots[r.Root] = true, true, true
		}
	}
	nAlg := 0
	for si, s := range series {
		alg := seriesAlgBW(s)
		var keys []lineKey
		bySize := map[lineKey]map[uint64][]Row{}
		for _, r := range s.Rows {
			k := lineKey{si, r.Type, r.Op, r.Root}
			if bySize[k] == nil {
				bySize[k] = map[uint64][]Row{}
				keys = append(keys, k)
			}
			bySize[k][r.Size] = append(bySize[k][r.Size], r)
		}
		for _, k := range keys {
			color := okabeIto[len(fig.lines)/2%len(okabeIto)]
			label := s.Name
			var parts []string
			if len(types) > 1 {
				parts = append(parts, k.typ)
			}
			if len(opsSeen) > 1 {
				parts = append(parts, k.op)
			}
			if len(roots) > 1 && k.root >= 0 {
				parts = append(parts, "root "+strconv.Itoa(k.root))
			}
			if len(parts) > 0 {
				label += " " + strings.Join(parts, " ")
			}
			if alg {
				label += " (algbw)"
				nAlg++
			}
			sizes := make([]uint64, 0, len(bySize[k]))
			for size := range bySize[k] {
				sizes = append(sizes, size)
			}
			sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
			for _, inPlace := range []bool{false, true} {
				l := plotLine{key: k, inPlace: inPlace, algbw: alg, label: label, color: color}
				if inPlace {
					l.label += ", in-place"
				}
				for _, size := range sizes {
					bw, t, ok := meanCell(bySize[k][size], inPlace, alg)
					if !ok || size == 0 {
						continue
					}
					l.bw = append(l.bw, plotter.XY{X: float64(size), Y: bw})
					if t > 0 {
						l.t = append(l.t, plotter.XY{X: float64(size), Y: t})
					}
				}
				if len(l.bw) > 0 {
					fig.lines = append(fig.lines, l)
				}
			}
		}
	}
	if len(fig.lines) == 0 {
		return nil, fmt.Errorf("perf: plot: no result with a positive size to draw")
	}
	prefix := ""
	if title != "" {
		prefix = title + ": "
	}
	switch {
	case nAlg == 0:
		fig.bw.Title.Text = prefix + "bus bandwidth"
		fig.bw.Y.Label.Text = "busbw (GB/s)"
	case nAlg == len(fig.lines)/2:
		fig.bw.Title.Text = prefix + "algbw (one rank: busbw is 0)"
		fig.bw.Y.Label.Text = "algbw (GB/s)"
	default:
		fig.bw.Title.Text = prefix + "busbw (algbw where busbw is 0)"
		fig.bw.Y.Label.Text = "GB/s"
	}
	fig.tm.Title.Text = "time per operation"
	fig.tm.Y.Label.Text = "time (µs)"
	for _, p := range []*plot.Plot{fig.bw, fig.tm} {
		p.X.Label.Text = "message size (bytes)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks{}
		p.Add(plotter.NewGrid())
	}
	fig.tm.Y.Scale = plot.LogScale{}
	fig.tm.Y.Tick.Marker = logTicks{}
	logBW := bwLogScale(fig.lines)
	if logBW {
		fig.bw.Y.Scale = plot.LogScale{}
		fig.bw.Y.Tick.Marker = logTicks{}
		fig.bw.Title.Text += ", log scale"
		for i := range fig.lines {
			pos := fig.lines[i].bw[:0:0]
			for _, p := range fig.lines[i].bw {
				if p.Y > 0 {
					pos = append(pos, p)
				}
			}
			fig.lines[i].bw = pos
		}
	}
	legendFont := font.From(plot.DefaultFont, 9)
	perCol := 1
	cols := 1
	for n := len(fig.lines); ; cols++ {
		perCol = (n + cols - 1) / cols
		if perCol <= 4 || cols == 3 {
			break
		}
	}
	fig.rows = perCol
	for i := 0; i < cols; i++ {
		l := plot.NewLegend()
		l.Top, l.Left = true, true
		l.TextStyle.Font = legendFont
		l.ThumbnailWidth = vg.Points(24)
		fig.legend = append(fig.legend, l)
	}
	for i, l := range fig.lines {
		shape := plotutil.Shape(i / 2 / len(okabeIto))
		var thumbs []plot.Thumbnailer
		for _, pl := range []struct {
			p   *plot.Plot
			pts plotter.XYs
		}{{fig.bw, l.bw}, {fig.tm, l.t}} {
			if len(pl.pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pl.pts)
			if err != nil {
				return nil, fmt.Errorf("perf: plot: %w", err)
			}
			line.Color, points.Color = l.color, l.color
			line.Width = vg.Points(1.5)
			points.Shape = shape
			points.Radius = vg.Points(2)
			if l.inPlace {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			pl.p.Add(line, points)
			if thumbs == nil {
				thumbs = []plot.Thumbnailer{line, points}
			}
		}
		fig.legend[i/perCol].Add(l.label, thumbs...)
	}
	if !logBW {
		fig.bw.Y.Min = 0
		if fig.bw.Y.Max <= 0 {
			fig.bw.Y.Max = 1
		}
	}
	return fig, nil
}

// bwLogScale reports whether the bandwidth panel needs a log scale: some
// line reaches ten times the largest out-of-place bandwidth. That is an
// in-place operation that moves nothing (an all-reduce on one rank), whose
// "bandwidth" would flatten every other line on a linear axis.
func bwLogScale(lines []plotLine) bool {
	oop, all := 0.0, 0.0
	for _, l := range lines {
		for _, p := range l.bw {
			all = math.Max(all, p.Y)
			if !l.inPlace {
				oop = math.Max(oop, p.Y)
			}
		}
	}
	return oop > 0 && all > 10*oop
}

// seriesAlgBW reports whether a series' bandwidth is drawn as algbw: its
// test's bus bandwidth factor is 0 on its rank count (one rank), or, for a
// file that does not say, every busbw is 0 while some algbw is not.
func seriesAlgBW(s *Series) bool {
	if s.Test != "" && s.NRanks > 0 {
		if f, ok := BusFactor(s.Test, s.NRanks); ok {
			return f == 0
		}
	}
	anyAlg := false
	for _, r := range s.Rows {
		for _, c := range []Cell{r.OutOfPlace, r.InPlace} {
			if finite(c.BusBW) && c.BusBW != 0 {
				return false
			}
			if finite(c.AlgBW) && c.AlgBW != 0 {
				anyAlg = true
			}
		}
	}
	return anyAlg
}

// meanCell is the mean bandwidth and time of rows' out-of-place or
// in-place cells (the finite ones).
func meanCell(rows []Row, inPlace, alg bool) (bw, t float64, ok bool) {
	n := 0
	for _, r := range rows {
		c := r.OutOfPlace
		if inPlace {
			c = r.InPlace
		}
		b := c.BusBW
		if alg {
			b = c.AlgBW
		}
		if !finite(b) || !finite(c.Time) {
			continue
		}
		bw += b
		t += c.Time
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	return bw / float64(n), t / float64(n), true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// sizeTicks marks powers of two on a log axis of sizes, labelled (8, 1K,
// 32M...) at a step of 1, 2, 5 or 10 powers chosen to give at most seven
// labels, so that labels never crowd however many sizes there are.
type sizeTicks struct{}

// Ticks returns the ticks in [min, max].
func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = 1
	}
	lo := int(math.Ceil(math.Log2(min) - 1e-9))
	hi := int(math.Floor(math.Log2(max) + 1e-9))
	step := 1
	for _, s := range []int{1, 2, 5, 10} {
		step = s
		if (hi/s)-((lo+s-1)/s)+1 <= 7 {
			break
		}
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		t := plot.Tick{Value: math.Ldexp(1, e)}
		if e%step == 0 {
			t.Label = FormatSize(uint64(t.Value))
		}
		ticks = append(ticks, t)
	}
	if len(ticks) == 0 { // a range inside one power of two
		ticks = []plot.Tick{{Value: min, Label: FormatSize(uint64(min))}, {Value: max, Label: FormatSize(uint64(max))}}
	}
	return ticks
}

// logTicks marks a log axis: every 1, 2 and 5 of each decade labelled
// where it spans at most three decades, else each decade labelled and the
// multiples 2..9 unlabelled.
type logTicks struct{}

// Ticks returns the ticks in [min, max].
func (logTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = max / 1e3
	}
	lo := int(math.Floor(math.Log10(min)))
	hi := int(math.Ceil(math.Log10(max)))
	fine := math.Log10(max/min) <= 3.05
	var ticks []plot.Tick
	for d := lo; d <= hi; d++ {
		base := math.Pow(10, float64(d))
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || fine && (m == 2 || m == 5) {
				t.Label = logLabel(v)
			}
			ticks = append(ticks, t)
		}
	}
	labelled := 0
	for _, t := range ticks {
		if t.Label != "" {
			labelled++
		}
	}
	if labelled < 2 { // less than a decade: label the ends
		ticks = append(ticks, plot.Tick{Value: min, Label: logLabel(min)}, plot.Tick{Value: max, Label: logLabel(max)})
	}
	return ticks
}

// logLabel writes a tick value: 0.5, 20, 5000, 100000, 1e+06.
func logLabel(v float64) string {
	if v >= 1e6 || v < 1e-2 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

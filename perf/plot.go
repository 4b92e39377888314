package perf

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
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

// SeriesOf turns a report into a Series named name.
func SeriesOf(r *Report, name string) *Series {
	return &Series{Name: name, Test: r.Test, NRanks: r.NRanks, Rows: r.Rows}
}

// PlotFile draws every series' bus bandwidth and time against message size
// (log scales, out-of-place and in-place) into path (.png or .svg).
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

// Plot writes the plot of PlotFile to w in format ("png" or "svg").
func Plot(w io.Writer, format, title string, series ...*Series) error {
	if len(series) == 0 {
		return fmt.Errorf("perf: plot: no series")
	}
	bw := plot.New()
	bw.Title.Text = "Bus bandwidth"
	if title != "" {
		bw.Title.Text = title + ": bus bandwidth"
	}
	bw.X.Label.Text = "message size (bytes)"
	bw.Y.Label.Text = "busbw (GB/s)"
	bw.X.Scale = plot.LogScale{}
	bw.X.Tick.Marker = sizeTicks{}
	tm := plot.New()
	tm.Title.Text = "Time per operation"
	tm.X.Label.Text = "message size (bytes)"
	tm.Y.Label.Text = "time (µs)"
	tm.X.Scale, tm.Y.Scale = plot.LogScale{}, plot.LogScale{}
	tm.X.Tick.Marker = sizeTicks{}
	tm.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	drawn := 0
	for i, s := range series {
		for _, inPlace := range []bool{false, true} {
			var bwPts, tPts plotter.XYs
			for _, r := range s.Rows {
				c := r.OutOfPlace
				if inPlace {
					c = r.InPlace
				}
				x := float64(r.Size)
				if x <= 0 || !finite(c.BusBW) || !finite(c.Time) {
					continue
				}
				bwPts = append(bwPts, plotter.XY{X: x, Y: c.BusBW})
				if c.Time > 0 {
					tPts = append(tPts, plotter.XY{X: x, Y: c.Time})
				}
			}
			if len(bwPts) == 0 {
				continue
			}
			label := s.Name
			if inPlace {
				label += " (in-place)"
			}
			col := plotutil.Color(i)
			for _, pl := range []struct {
				p   *plot.Plot
				pts plotter.XYs
			}{{bw, bwPts}, {tm, tPts}} {
				if len(pl.pts) == 0 {
					continue
				}
				line, points, err := plotter.NewLinePoints(pl.pts)
				if err != nil {
					return fmt.Errorf("perf: plot: %w", err)
				}
				line.Color, points.Color = col, col
				points.Shape = plotutil.Shape(i)
				if inPlace {
					line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				}
				pl.p.Add(line, points)
				if pl.p == bw {
					pl.p.Legend.Add(label, line, points)
				}
			}
			drawn++
		}
	}
	if drawn == 0 {
		return fmt.Errorf("perf: plot: no result with a positive size to draw")
	}
	bw.Legend.Top, bw.Legend.Left = true, true
	bw.Add(plotter.NewGrid())
	tm.Add(plotter.NewGrid())
	bw.Y.Min = 0
	c, err := draw.NewFormattedCanvas(26*vg.Centimeter, 11*vg.Centimeter, format)
	if err != nil {
		return fmt.Errorf("perf: plot: %w", err)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2,
		PadRight: vg.Centimeter / 2, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2}
	canvases := plot.Align([][]*plot.Plot{{bw, tm}}, tiles, dc)
	bw.Draw(canvases[0][0])
	tm.Draw(canvases[0][1])
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("perf: plot: %w", err)
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// sizeTicks marks powers of two with 1K/1M/1G names on a log axis.
type sizeTicks struct{}

// Ticks places a labelled tick at every power of 4 and an unlabelled one
// at every other power of 2 in [min, max].
func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 {
		min = 1
	}
	var ticks []plot.Tick
	lo := int(math.Floor(math.Log2(min)))
	hi := int(math.Ceil(math.Log2(max)))
	step := 1
	for (hi-lo)/step > 12 {
		step *= 2
	}
	for e := lo; e <= hi; e++ {
		v := math.Ldexp(1, e)
		if v < min || v > max {
			continue
		}
		t := plot.Tick{Value: v}
		if (e-lo)%step == 0 {
			t.Label = FormatSize(uint64(v))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

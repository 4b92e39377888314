package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jedib0t/go-pretty/v6/progress"
	"golang.org/x/term"

	"github.com/nccl4go/nccl/perf"
)

// perfProgress shows a progress bar on stderr as rows finish.
type perfProgress struct {
	pw      progress.Writer
	tracker *progress.Tracker
	fp8     bool // every local GPU runs fp8 (-d all includes it)
	done    chan struct{}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// sameFile reports whether two writers are the same open file.
func sameFile(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return false
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// rowUnits renders the bar's count as "19 rows".
var rowUnits = progress.Units{Notation: " rows", NotationPosition: progress.UnitsNotationPositionAfter}

// newProgress returns a progress reporter, or nil: mode "never", or "auto"
// where stderr is not a terminal, stdout shares it (the bar would tear the
// table) or the sweep has a single size.
func newProgress(mode string, o perf.Options, world *perf.World, stderr, stdout io.Writer) *perfProgress {
	switch mode {
	case "never":
		return nil
	case "auto":
		if !isTerminal(stderr) || isTerminal(stdout) || sameFile(stdout, stderr) || o.MinBytes == o.MaxBytes {
			return nil
		}
	}
	pw := progress.NewWriter()
	pw.SetOutputWriter(stderr)
	pw.SetAutoStop(false)
	pw.SetTrackerLength(30)
	pw.SetMessageLength(36)
	pw.SetUpdateFrequency(200 * time.Millisecond)
	pw.SetStyle(progress.StyleDefault)
	pw.Style().Visibility.ETA = true
	pw.Style().Visibility.Value = true
	return &perfProgress{pw: pw, fp8: worldRunsFP8(world)}
}

// worldRunsFP8 reports whether every GPU of this process has compute
// capability 9.0 or newer (where -d all includes the fp8 types).
func worldRunsFP8(w *perf.World) bool {
	if w == nil {
		return true
	}
	for _, c := range w.Comms {
		d, err := c.Device()
		if err != nil {
			return true
		}
		ma, _, err := d.ComputeCapability()
		if err == nil && ma < 9 {
			return false
		}
	}
	return true
}

// Begin starts the bar. Its total is every row the run prints (sizes,
// types, reductions, roots and cycles); with -N 0 the run has no end and
// the bar counts rows without a total.
func (p *perfProgress) Begin(h *perf.Header) {
	total := int64(perf.PlannedRows(h.Options, h.NRanks, p.fp8))
	p.tracker = &progress.Tracker{Message: h.Program, Total: total, Units: rowUnits}
	p.pw.AppendTracker(p.tracker)
	p.done = make(chan struct{})
	go func() {
		p.pw.Render()
		close(p.done)
	}()
}

// Row advances the bar.
func (p *perfProgress) Row(test string, r *perf.Row) {
	msg := test + " " + r.Type
	if r.Op != "" && r.Op != "none" {
		msg += " " + r.Op
	}
	if r.Root >= 0 {
		msg += fmt.Sprintf(" root %d", r.Root)
	}
	p.tracker.UpdateMessage(msg + " " + perf.FormatSize(r.Size))
	p.tracker.Increment(1)
}

// End stops the bar.
func (p *perfProgress) End(r *perf.Report) {
	p.stop()
}

// stop ends the rendering (End, or the run's end without one).
func (p *perfProgress) stop() {
	if p.done == nil {
		return
	}
	p.tracker.MarkAsDone()
	time.Sleep(250 * time.Millisecond) // one last render
	p.pw.Stop()
	<-p.done
	p.done = nil
}

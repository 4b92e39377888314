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

// newProgress returns a progress reporter, or nil: mode "never", or "auto"
// where stderr is not a terminal, stdout shares it (the bar would tear the
// table) or the sweep has a single size.
func newProgress(mode string, o perf.Options, stderr, stdout io.Writer) *perfProgress {
	switch mode {
	case "never":
		return nil
	case "auto":
		if !isTerminal(stderr) || isTerminal(stdout) || sameFile(stdout, stderr) || o.MinBytes == o.MaxBytes || o.Cycles == 0 {
			return nil
		}
	}
	pw := progress.NewWriter()
	pw.SetOutputWriter(stderr)
	pw.SetAutoStop(false)
	pw.SetTrackerLength(30)
	pw.SetMessageLength(28)
	pw.SetUpdateFrequency(200 * time.Millisecond)
	pw.SetStyle(progress.StyleDefault)
	pw.Style().Visibility.ETA = true
	pw.Style().Visibility.Value = true
	return &perfProgress{pw: pw}
}

// Begin starts the bar; its total is the number of rows the sweep makes
// for one type, op and root (it grows if there are more).
func (p *perfProgress) Begin(h *perf.Header) {
	rows := int64(0)
	o := h.Options
	for size := o.MinBytes; size <= o.MaxBytes; {
		rows++
		next := size + o.StepBytes
		if o.StepFactor > 1 {
			next = max(size*o.StepFactor, 1)
		}
		if next <= size {
			break
		}
		size = next
	}
	p.tracker = &progress.Tracker{Message: h.Program, Total: rows * int64(max(o.Cycles, 1)), Units: progress.Units{Notation: " rows"}}
	p.pw.AppendTracker(p.tracker)
	p.done = make(chan struct{})
	go func() {
		p.pw.Render()
		close(p.done)
	}()
}

// Row advances the bar.
func (p *perfProgress) Row(test string, r *perf.Row) {
	if p.tracker.Value() >= p.tracker.Total {
		p.tracker.UpdateTotal(p.tracker.Total * 2)
	}
	p.tracker.UpdateMessage(fmt.Sprintf("%s %s", test, perf.FormatSize(r.Size)))
	p.tracker.Increment(1)
}

// End stops the bar.
func (p *perfProgress) End(r *perf.Report) {
	p.tracker.MarkAsDone()
	time.Sleep(250 * time.Millisecond) // one last render
	p.pw.Stop()
	<-p.done
}

package perf

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl/internal/faketest"
)

// nccl-tests' summary: sorted, percentiles at min(n-1, ceil(n*p/100)-1),
// population standard deviation, leading samples skipped.
func TestIterStats(t *testing.T) {
	times := []float64{100, 5, 1, 2, 3, 4, 6, 7, 8, 9, 10}
	s := iterStats(times, 1, nil)
	if s.Skipped != 1 || s.Min != 1 || s.Max != 10 || s.P50 != 6 || s.P95 != 10 || s.P99 != 10 || s.Avg != 5.5 {
		t.Errorf("stats %+v", s)
	}
	if want := math.Sqrt(8.25); math.Abs(s.Stdev-want) > 1e-12 || math.Abs(s.CV-want/5.5*100) > 1e-9 {
		t.Errorf("stdev %v cv %v, want %v", s.Stdev, s.CV, want)
	}
	if len(s.Times) != 11 || s.Times[0] != 100 {
		t.Errorf("times %v: every iteration, the skipped ones too", s.Times)
	}
	if got := percentileIndex(100, 99); got != 98 {
		t.Errorf("p99 of 100 at %d, want 98", got)
	}
}

// -I 1 -K 2: every cell carries the times of every iteration and their
// summary; the table has nccl-tests' per-iteration header and columns;
// -S 1 ends each row with the time.
func TestPerIterationTimingAndTimestamps(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := LocalWorld(context.Background(), []int{0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, blocking := range []int{0, 3} {
			o := DefaultOptions("all_reduce")
			o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters = 1024, 4096, 4, 10
			o.PerIterTiming, o.PerIterSkip, o.Timestamps, o.Blocking = true, 2, true, blocking
			var out bytes.Buffer
			tw := &TableWriter{W: &out, now: func() time.Time { return time.Date(2026, 12, 3, 9, 8, 7, 0, time.Local) }}
			rep, err := Run(context.Background(), o, w, tw)
			if err != nil {
				t.Fatal(err)
			}
			text := out.String()
			for _, want := range []string{"# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; summary skips first 2 iterations \n",
				"i_min    i_max    i_p99    i_cv%", "timestamp\n", "%Y-%m-%d %H:%M:%S\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("-z %d: no %q in\n%s", blocking, want, text)
				}
			}
			for _, r := range rep.Rows {
				for _, c := range []Cell{r.OutOfPlace, r.InPlace} {
					if c.PerIter == nil || len(c.PerIter.Times) != 10 || c.PerIter.Skipped != 2 || c.PerIter.Min > c.PerIter.Max {
						t.Fatalf("-z %d: row %d: per-iteration %+v", blocking, r.Size, c.PerIter)
					}
				}
			}
			lines := strings.Split(strings.TrimSpace(text), "\n")
			var row string
			for _, l := range lines {
				if strings.HasPrefix(l, "        1024") {
					row = l
				}
			}
			// 5 leading fields, 2 x (4 + 4) per cell, the date and the time.
			if f := strings.Fields(row); len(f) != 5+16+2 || !strings.HasSuffix(row, "  2026-12-03 09:08:07") {
				t.Errorf("-z %d: row %q: %d fields", blocking, row, len(f))
			}
		}
	})
}

package main

import (
	"bytes"
	"testing"

	"github.com/nccl4go/nccl/perf"
)

// The bar's total is every row of the run: sizes × reductions × roots ×
// cycles (it was sizes × cycles, so the bar jumped back as it grew), and
// its unit reads "19 rows" (it rendered "rows19").
func TestPerfProgressTotal(t *testing.T) {
	o := perf.DefaultOptions("reduce")
	o.MinBytes, o.MaxBytes, o.StepFactor = 8, 64, 2 // 4 sizes
	o.Op, o.Root, o.Cycles = "all", -1, 3
	var errb bytes.Buffer
	p := newProgress("always", o, nil, &errb, &bytes.Buffer{})
	p.Begin(&perf.Header{Program: "reduce_perf", Options: o, NRanks: 4})
	if want := int64(4 * 6 * 4 * 3); p.tracker.Total != want {
		t.Errorf("total %d rows, want %d", p.tracker.Total, want)
	}
	p.End(nil)
	if got := rowUnits.Sprint(19); got != "19 rows" {
		t.Errorf("unit renders %q, want \"19 rows\"", got)
	}
	o.Type, o.Op, o.Test = "all", "sum", "all_reduce"
	if n := perf.PlannedRows(o, 2, false); n != 4*10*3 {
		t.Errorf("-d all without fp8: %d rows, want %d", n, 4*10*3)
	}
	o.Cycles = 0
	p = newProgress("always", o, nil, &errb, &bytes.Buffer{})
	p.Begin(&perf.Header{Program: "all_reduce_perf", Options: o, NRanks: 2})
	if p.tracker.Total != 0 || !p.tracker.IsIndeterminate() {
		t.Errorf("-N 0: total %d, want none", p.tracker.Total)
	}
	p.End(nil)
}

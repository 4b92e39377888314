package main

import (
	"fmt"
	"io"

	"github.com/nccl4go/nccl/perf"
)

// ceilingTable prints, after nccl-tests' table (whose lines it leaves as
// they are), each row's out-of-place algbw beside the limit of its path
// measured in the same run (--ceiling: Row.Ceiling), and their ratio: "is
// this number expected?" answered with a ratio instead of a bare number.
type ceilingTable struct {
	w    io.Writer
	rows []perf.Row
}

func (c *ceilingTable) Begin(h *perf.Header) {}

func (c *ceilingTable) Row(test string, r *perf.Row) {
	if r.Ceiling != nil {
		c.rows = append(c.rows, *r)
	}
}

func (c *ceilingTable) End(r *perf.Report) {
	if len(c.rows) == 0 {
		fmt.Fprintf(c.w, "# Ceiling: no limit known for this run (one rank only, for now)\n#\n")
		return
	}
	fmt.Fprintf(c.w, "# Ceiling: the limit of the measured path, measured in the same run (%s of the same bytes)\n", c.rows[0].Ceiling.Path)
	fmt.Fprintf(c.w, "# %10s  %8s  %6s  %6s  %12s  %12s  %7s\n", "size", "type", "redop", "root", "algbw (GB/s)", "limit (GB/s)", "ratio")
	for _, row := range c.rows {
		ratio := "-"
		if row.Ceiling.AlgBW > 0 {
			ratio = fmt.Sprintf("%.3f", row.OutOfPlace.AlgBW/row.Ceiling.AlgBW)
		}
		fmt.Fprintf(c.w, "# %10d  %8s  %6s  %6d  %12.2f  %12.2f  %7s\n", row.Size, row.Type, row.Op, row.Root, row.OutOfPlace.AlgBW, row.Ceiling.AlgBW, ratio)
	}
	fmt.Fprintf(c.w, "#\n")
}

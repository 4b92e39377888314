package perf

import (
	"bytes"
	"strings"
	"testing"
)

// Two runs 5% apart: compare prints its "largest ratio" line (the worst
// ratio started at 0, so no ratio in (0, 2) ever printed it).
func TestCompareLargestRatio(t *testing.T) {
	a := &Series{Name: "a"}
	b := &Series{Name: "b"}
	for size := uint64(1 << 20); size <= 8<<20; size *= 2 {
		r := Row{Size: size, Type: "float", Op: "sum", Root: -1,
			OutOfPlace: Cell{Time: 100, BusBW: 10}, InPlace: Cell{Time: 100, BusBW: 10}}
		a.Rows = append(a.Rows, r)
		r.OutOfPlace.Time = 105
		if size == 4<<20 {
			r.OutOfPlace.Time = 95.2 // the largest departure from 1
		}
		b.Rows = append(b.Rows, r)
	}
	var out bytes.Buffer
	if err := WriteComparison(&out, 1<<20, a, b); err != nil {
		t.Fatal(err)
	}
	want := "# largest out-of-place time ratio B/A from 1M up: 1.0500 at 1048576 bytes (+5.00%)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("comparison lacks %q:\n%s", want, out.String())
	}
}

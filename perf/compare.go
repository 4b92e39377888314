package perf

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// ReadJSONFile reads a JSON result file (ours or nccl-tests'), named by
// its path.
func ReadJSONFile(path string) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("perf: %w", err)
	}
	defer f.Close()
	return ReadJSON(f, path)
}

// rowKey matches rows across runs.
type rowKey struct {
	size    uint64
	typ, op string
	root    int
}

func keyOf(r *Row) rowKey { return rowKey{r.Size, r.Type, r.Op, r.Root} }

// Ratio is one size of a comparison: other's value over base's.
type Ratio struct {
	Row              // base's row (size, type, op, root)
	Other    Row     // the other run's row
	TimeOOP  float64 // other time / base time, out of place (below 1: other is faster)
	TimeIP   float64
	BusBWOOP float64 // other busbw / base busbw (above 1: other is faster)
	BusBWIP  float64
}

// Compare matches the rows of other with base's (same size, type, op and
// root; a size repeated by -N cycles keeps its last row) and returns their
// ratios in base's order.
func Compare(base, other *Series) []Ratio {
	idx := map[rowKey]*Row{}
	for i := range other.Rows {
		idx[keyOf(&other.Rows[i])] = &other.Rows[i]
	}
	seen := map[rowKey]bool{}
	var out []Ratio
	for i := len(base.Rows) - 1; i >= 0; i-- {
		b := &base.Rows[i]
		k := keyOf(b)
		o, ok := idx[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, Ratio{Row: *b, Other: *o,
			TimeOOP: o.OutOfPlace.Time / b.OutOfPlace.Time, TimeIP: o.InPlace.Time / b.InPlace.Time,
			BusBWOOP: o.OutOfPlace.BusBW / b.OutOfPlace.BusBW, BusBWIP: o.InPlace.BusBW / b.InPlace.BusBW})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func ratioStr(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// WriteComparison prints, for every series after the first, a table of
// its times and bus bandwidths against the first's, size by size, and the
// largest time ratio from minSize bytes up (minSize 0: every size).
func WriteComparison(w io.Writer, minSize uint64, series ...*Series) error {
	if len(series) < 2 {
		return fmt.Errorf("perf: compare: need at least two runs, got %d", len(series))
	}
	base := series[0]
	for _, other := range series[1:] {
		rs := Compare(base, other)
		fmt.Fprintf(w, "# A: %s\n# B: %s\n", base.Name, other.Name)
		if base.Test != "" && other.Test != "" && base.Test != other.Test {
			fmt.Fprintf(w, "# warning: different tests: %s and %s\n", base.Test, other.Test)
		}
		if base.NRanks != 0 && other.NRanks != 0 && base.NRanks != other.NRanks {
			fmt.Fprintf(w, "# warning: different rank counts: %d and %d\n", base.NRanks, other.NRanks)
		}
		if len(rs) == 0 {
			fmt.Fprintf(w, "# no common sizes\n\n")
			continue
		}
		fmt.Fprintf(w, "# %10s  %8s  %6s  %6s  %-38s  %-38s\n", "", "", "", "", "out-of-place", "in-place")
		fmt.Fprintf(w, "# %10s  %8s  %6s  %6s  %8s %8s %6s %6s %6s  %8s %8s %6s %6s %6s\n",
			"size", "type", "redop", "root", "A us", "B us", "B/A", "A bus", "B bus",
			"A us", "B us", "B/A", "A bus", "B bus")
		// The ratio furthest from 1 (worst starts unset: any ratio counts).
		worst, worstAt, found := 0.0, uint64(0), false
		for _, r := range rs {
			fmt.Fprintf(w, "%12d  %8s  %6s  %6d  %8s %8s %6s %6s %6s  %8s %8s %6s %6s %6s\n",
				r.Size, r.Type, r.Op, r.Root,
				floatStr(r.OutOfPlace.Time, 8), floatStr(r.Other.OutOfPlace.Time, 8), ratioStr(r.TimeOOP),
				floatStr(r.OutOfPlace.BusBW, 6), floatStr(r.Other.OutOfPlace.BusBW, 6),
				floatStr(r.InPlace.Time, 8), floatStr(r.Other.InPlace.Time, 8), ratioStr(r.TimeIP),
				floatStr(r.InPlace.BusBW, 6), floatStr(r.Other.InPlace.BusBW, 6))
			if r.Size >= minSize && finite(r.TimeOOP) && (!found || math.Abs(r.TimeOOP-1) > math.Abs(worst-1)) {
				worst, worstAt, found = r.TimeOOP, r.Size, true
			}
		}
		if found {
			fmt.Fprintf(w, "# largest out-of-place time ratio B/A from %s up: %.4f at %d bytes (%+.2f%%)\n",
				FormatSize(minSize), worst, worstAt, (worst-1)*100)
		}
		fmt.Fprintln(w, strings.Repeat("#", 1))
	}
	return nil
}

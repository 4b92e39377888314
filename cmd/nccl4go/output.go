package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nccl4go/nccl"
)

// notAvailable fills a cell whose value the loaded library does not report.
const notAvailable = "n/a"

// table writes aligned columns; Flush it when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

// row writes one row of cells.
func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

// problem writes a labeled problem as a row and, below it, its fix.
func (t *table) problem(label string, p *problem) {
	t.row(label, p.Reason)
	if p.Fix != "" {
		t.row("", "fix: "+p.Fix)
	}
}

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// yesNo renders a bool for a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// optYesNo renders an optional bool, n/a when absent.
func optYesNo(b *bool) string {
	if b == nil {
		return notAvailable
	}
	return yesNo(*b)
}

// optInt renders an optional int, n/a when absent.
func optInt(n *int) string {
	if n == nil {
		return notAvailable
	}
	return strconv.Itoa(*n)
}

// optGIN renders an optional GIN type, n/a when absent.
func optGIN(g *nccl.GINType) string {
	if g == nil {
		return notAvailable
	}
	return g.String()
}

// gib is bytes in GiB, rounded to 0.1.
func gib(bytes uint64) float64 {
	return math.Round(float64(bytes)/(1<<30)*10) / 10
}

// formatGiB renders a memory size, e.g. "139.8 GiB".
func formatGiB(bytes uint64) string { return fmt.Sprintf("%.1f GiB", gib(bytes)) }

// orUnknown renders an empty string as "?".
func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// plural renders "1 rank", "2 ranks".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

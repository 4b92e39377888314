package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/versions"
)

// featureGroup is one group of the binding's version table (internal/
// versions): how many of its rows the loaded NCCL has, and the rows it
// lacks with their first release.
type featureGroup struct {
	Group string          `json:"group"` // "ncclConfig_t fields"
	Has   int             `json:"has"`
	Of    int             `json:"of"`
	Lacks []lackedFeature `json:"lacks,omitempty"`
}

type lackedFeature struct {
	Name  string `json:"name"`  // as NCCL spells it: "ncclConfig_t.graphStreamOrdering"
	Since string `json:"since"` // its first release: "2.30.7"
}

// otherFeatures names the group of the table's rows that are no struct
// field.
const otherFeatures = "flags, data types and behaviours"

// featureGroups sorts every row of the version table into its group (a
// struct's fields, in the table's order of structs, then the rest) and
// says which of them release r has.
func featureGroups(r nccl.Release) []featureGroup {
	var groups []featureGroup
	index := map[string]int{}
	for f := range versions.NumFeatures {
		row := versions.Table[f]
		name := otherFeatures
		if s := row.Struct(); s != "" {
			name = s + " fields"
		}
		i, ok := index[name]
		if !ok {
			i = len(groups)
			index[name] = i
			groups = append(groups, featureGroup{Group: name})
		}
		g := &groups[i]
		g.Of++
		if f.In(int(r)) {
			g.Has++
			continue
		}
		g.Lacks = append(g.Lacks, lackedFeature{Name: row.Name, Since: nccl.Release(row.Since).String()})
	}
	// The rest last, as help reads it: structs first.
	if i, ok := index[otherFeatures]; ok && i != len(groups)-1 {
		rest := groups[i]
		groups = append(append(groups[:i:i], groups[i+1:]...), rest)
	}
	return groups
}

// printFeatures writes which of the version table's features the loaded
// release has, one group a line, with what it lacks.
func printFeatures(w io.Writer, r nccl.Release, groups []featureGroup) error {
	if len(groups) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nNCCL %s has, of the features nccl4go gates by release:\n", r)
	width := 0
	for _, g := range groups {
		width = max(width, len(g.Group))
	}
	for _, g := range groups {
		label := fmt.Sprintf("  %-*s  %2d of %-2d  ", width, g.Group, g.Has, g.Of)
		if len(g.Lacks) == 0 {
			b.WriteString(strings.TrimRight(label, " ") + "\n")
			continue
		}
		lacks := make([]string, len(g.Lacks))
		for i, l := range g.Lacks {
			// A struct's group names its fields without the struct.
			name := l.Name
			if s, ok := strings.CutSuffix(g.Group, " fields"); ok {
				name = strings.TrimPrefix(name, s+".")
			}
			lacks[i] = fmt.Sprintf("%s (%s)", name, l.Since)
		}
		b.WriteString(hanging(label, "lacks "+strings.Join(lacks, ", "), 120))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

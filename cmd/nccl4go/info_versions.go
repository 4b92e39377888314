package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/versions"
)

// featureGroup is one group of the binding's version table (internal/
// versions): how many of its rows the loaded NCCL has and how many of
// those the binding uses with it, the rows the release lacks with their
// first release, and the rows it has that the binding does not use with
// it, with why.
type featureGroup struct {
	Group string `json:"group"` // "ncclConfig_t fields"
	// Uses counts the rows the binding uses with the loaded release: for a
	// struct field, the version the binding declares to that release has
	// it, so a field set is sent (or, for ncclCommProperties_t, read).
	Uses    int             `json:"uses"`
	Has     int             `json:"has"` // the rows the loaded release has: Uses + len(NotUsed)
	Of      int             `json:"of"`  // all rows: Has + len(Lacks)
	Lacks   []lackedFeature `json:"lacks,omitempty"`
	NotUsed []unusedFeature `json:"not_used,omitempty"`
}

type lackedFeature struct {
	Name  string `json:"name"`  // as NCCL spells it: "ncclConfig_t.graphStreamOrdering"
	Since string `json:"since"` // its first release: "2.30.7"
}

// unusedFeature is a row the loaded release has but the binding does not
// use with it (versions.Feature.UseWith).
type unusedFeature struct {
	Name   string `json:"name"`   // "ncclCommProperties_t.commHash"
	Since  string `json:"since"`  // "2.31.0"
	Reason string `json:"reason"` // "its ncclCommProperties_t layout is not established, ..."
}

// otherFeatures names the group of the table's rows that are no struct
// field.
const otherFeatures = "flags, data types and behaviours"

// featureGroups sorts every row of the version table into its group (a
// struct's fields, in the table's order of structs, then the rest) and
// says which of them release r has and which of those the binding uses
// with it.
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
		since := nccl.Release(row.Since).String()
		switch u := f.UseWith(int(r)); {
		case !u.Has:
			g.Lacks = append(g.Lacks, lackedFeature{Name: row.Name, Since: since})
		case !u.Used:
			g.Has++
			g.NotUsed = append(g.NotUsed, unusedFeature{Name: row.Name, Since: since, Reason: u.Why})
		default:
			g.Has++
			g.Uses++
		}
	}
	// The rest last, as help reads it: structs first.
	if i, ok := index[otherFeatures]; ok && i != len(groups)-1 {
		rest := groups[i]
		groups = append(append(groups[:i:i], groups[i+1:]...), rest)
	}
	return groups
}

// printFeatures writes how many of the version table's features the
// binding uses with the loaded release, one group a line, with what the
// release lacks and what it has that the binding does not use (and why).
func printFeatures(w io.Writer, r nccl.Release, groups []featureGroup) error {
	if len(groups) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nnccl4go uses with NCCL %s, of the features it gates by release:\n", r)
	width := 0
	for _, g := range groups {
		width = max(width, len(g.Group))
	}
	for _, g := range groups {
		label := fmt.Sprintf("  %-*s  %2d of %-2d  ", width, g.Group, g.Uses, g.Of)
		// A struct's group names its fields without the struct.
		short := func(name string) string {
			if s, ok := strings.CutSuffix(g.Group, " fields"); ok {
				return strings.TrimPrefix(name, s+".")
			}
			return name
		}
		var parts []string
		if len(g.Lacks) > 0 {
			lacks := make([]string, len(g.Lacks))
			for i, l := range g.Lacks {
				lacks[i] = fmt.Sprintf("%s (%s)", short(l.Name), l.Since)
			}
			parts = append(parts, "lacks "+strings.Join(lacks, ", "))
		}
		// Not used, one clause per reason, in table order.
		var reasons []string
		byReason := map[string][]string{}
		for _, u := range g.NotUsed {
			if _, ok := byReason[u.Reason]; !ok {
				reasons = append(reasons, u.Reason)
			}
			byReason[u.Reason] = append(byReason[u.Reason], fmt.Sprintf("%s (%s)", short(u.Name), u.Since))
		}
		for _, why := range reasons {
			parts = append(parts, fmt.Sprintf("not used with %s: %s (%s)", r, strings.Join(byReason[why], ", "), why))
		}
		if len(parts) == 0 {
			b.WriteString(strings.TrimRight(label, " ") + "\n")
			continue
		}
		b.WriteString(hanging(label, strings.Join(parts, "; "), 120))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

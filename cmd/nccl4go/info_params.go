package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/nccl4go/nccl"
)

// paramsReport is `nccl4go info -params`: NCCL's parameter registry.
type paramsReport struct {
	Values  map[string]string `json:"values,omitempty"` // key: value, as NCCL prints it
	Problem *problem          `json:"problem,omitempty"`
}

// gatherParams reads NCCL's parameters (nccl.Params), or says why not.
func gatherParams(loaded bool) *paramsReport {
	if !loaded {
		return &paramsReport{Problem: &problem{Reason: "no NCCL (see above)"}}
	}
	m, err := nccl.Params()
	if err != nil {
		return &paramsReport{Problem: &problem{Reason: err.Error(),
			Fix: "the parameter API needs NCCL 2.30.3 or later: set NCCL_LIBRARY to a newer libnccl.so.2"}}
	}
	return &paramsReport{Values: m}
}

// printParams writes the parameters as a table, keys sorted.
func printParams(w io.Writer, r *paramsReport) error {
	if r == nil {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w)
	if r.Problem != nil {
		t.problem("NCCL parameters", r.Problem)
		return t.flush()
	}
	t.row("PARAMETER", "VALUE")
	for _, k := range slices.Sorted(maps.Keys(r.Values)) {
		v := r.Values[k]
		if v == "" {
			v = "-"
		}
		t.row(k, v)
	}
	return t.flush()
}

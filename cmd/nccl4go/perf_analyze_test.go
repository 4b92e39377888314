package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/perf"
)

func TestPerfAnalyzeCLI(t *testing.T) {
	const four = "../../perf/testdata/nccltests_periter_4procs.json"
	var out, errb bytes.Buffer
	if code := mainExit([]string{"perf", "analyze", four, "-v"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"Straggler: process 3 (b)", "Spikes:", "Warm-up:", "Nodes:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := mainExit([]string{"perf", "analyze", "--json", "--in-place", "--sizes", "8,1K", four}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var got []perf.Analysis
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || len(got[0].Sizes) != 2 || got[0].Placement != "in-place" {
		t.Errorf("--json: %v\n%s", err, out.String())
	}
	// A file without per-iteration times fails with the reason; the
	// others are still analyzed.
	out.Reset()
	errb.Reset()
	if code := mainExit([]string{"perf", "analyze", "../../perf/testdata/nccltests.json", four}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "-I 1") || !strings.Contains(out.String(), "Straggler") {
		t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := mainExit([]string{"perf", "analyze", "--threshold", "0", four}, &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 2 {
		t.Errorf("bad threshold: exit %d\n%s", code, errb.String())
	}
	errb.Reset()
	if code := mainExit([]string{"perf", "analyze", "--procs-per-node", "0", four}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--procs-per-node 0") {
		t.Errorf("--procs-per-node 0: exit %d\n%s", code, errb.String())
	}
}

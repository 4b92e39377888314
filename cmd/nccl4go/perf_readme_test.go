package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/perf"
)

// readmePerf is the README's perf section.
func readmePerf(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "## Benchmark: `nccl4go perf`")
	end := strings.Index(s, "## When a job hangs")
	if start < 0 || end < start {
		t.Fatal("no perf section in README.md")
	}
	return s[start:end]
}

// The README's perf commands parse as written, its analyze example is what
// analyze prints for the file it names, and its list of what is not done
// is perf -h's.
func TestREADMEPerf(t *testing.T) {
	sec := readmePerf(t)
	blocks := strings.Split(sec, "```")
	n := 0
	for i := 1; i < len(blocks); i += 2 {
		for _, line := range strings.Split(blocks[i], "\n") {
			line, _, _ = strings.Cut(line, "#")
			_, cmd, ok := strings.Cut(line, "nccl4go perf ")
			if !ok {
				continue
			}
			args := strings.Fields(cmd)
			if args[0] == "compare" || args[0] == "analyze" {
				continue
			}
			n++
			if _, err := newPerfFlags().parse(args, &bytes.Buffer{}); err != nil {
				t.Errorf("README: nccl4go perf %s: %v", cmd, err)
			}
		}
	}
	if n < 4 {
		t.Errorf("found %d perf commands in the README", n)
	}
	var out bytes.Buffer
	if code := mainExit([]string{"perf", "analyze", "../../perf/testdata/nccltests_periter_4procs.json"}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("analyze: exit %d", code)
	}
	_, example, _ := strings.Cut(sec, "### Analysis of per-iteration times")
	found := 0
	for _, line := range strings.Split(example, "\n") {
		if strings.HasPrefix(line, "  - ") {
			found++
			if !strings.Contains(out.String(), line) {
				t.Errorf("analyze does not print the README's line\n%s\nit prints:\n%s", line, out.String())
			}
		}
	}
	if found == 0 {
		t.Error("no analyze example in the README")
	}
	for _, u := range perf.Unsupported {
		if !strings.Contains(sec, "`"+readmeKey(u)) {
			t.Errorf("README does not list %s %s (%s)", u.Flag, u.Name, u.Reason)
		}
	}
}

// Every row of the README's "Not supported" table is one of
// perf.Unsupported (a feature done is taken off both).
func TestREADMENotDoneRows(t *testing.T) {
	sec := readmePerf(t)
	_, table, _ := strings.Cut(sec, "### Not supported")
	table, _, _ = strings.Cut(table, "###")
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		ok := false
		for _, u := range perf.Unsupported {
			ok = ok || strings.Contains(line, "`"+readmeKey(u))
		}
		if !ok {
			t.Errorf("README lists as not done what perf -h does not: %s", line)
		}
	}
	if rows != len(perf.Unsupported) {
		t.Errorf("README's table has %d rows for %d entries of perf.Unsupported", rows, len(perf.Unsupported))
	}
}

// readmeKey is how the README names an unsupported feature: its long flag
// or first variable.
func readmeKey(u perf.UnsupportedFeature) string {
	return strings.TrimSuffix(strings.Fields(u.Name)[0], ",")
}

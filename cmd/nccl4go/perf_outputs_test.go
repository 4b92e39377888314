package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/perf"
)

// -J and --plot are opened before the sweep: a path that cannot be
// written fails before the first measurement.
func TestFakePerfOutputsOpenedFirst(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for _, flag := range []string{"-J", "--plot"} {
			bad := filepath.Join(dir, "missing", "x.json")
			if flag == "--plot" {
				bad = filepath.Join(dir, "missing", "x.png")
			}
			out, _, err := runCLI(t, "perf", "all_reduce", "-b", "8", "-e", "1K", "-f", "2", "-n", "1", flag, bad)
			if err == nil || !strings.Contains(err.Error(), "missing") {
				t.Errorf("%s %s: %v, want an error naming the path", flag, bad, err)
			}
			if strings.Contains(out, "float") {
				t.Errorf("%s %s: rows were measured before the error:\n%s", flag, bad, out)
			}
		}
	})
}

// An endless run (-N 0) stopped by its context leaves a valid JSON file
// holding the rows measured, and says why it ended.
func TestFakePerfJSONInterrupted(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		js := filepath.Join(dir, "endless.json")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		gaveUp := make(chan bool, 1)
		go func() {
			// Cancel once three rows are in the file (counts, not time;
			// the 20 s are only a guard against a file that never fills,
			// within the fake child's minute).
			guard := time.Now().Add(20 * time.Second)
			for ctx.Err() == nil {
				b, _ := os.ReadFile(js)
				if bytes.Count(b, []byte(`"size":`)) >= 3 || time.Now().After(guard) {
					gaveUp <- time.Now().After(guard)
					cancel()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		var out, errb bytes.Buffer
		err := run(ctx, []string{"perf", "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "1", "-N", "0", "-J", js}, &out, &errb)
		skipWithoutCgo(t)
		if <-gaveUp {
			t.Fatalf("the JSON file never held three rows while the run went on")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v, want context.Canceled", err)
		}
		b, rerr := os.ReadFile(js)
		if rerr != nil {
			t.Fatal(rerr)
		}
		var doc struct {
			Version int               `json:"version"`
			Results []json.RawMessage `json:"results"`
			Errors  []string          `json:"errors"`
			End     string            `json:"end_time"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("interrupted file is not JSON: %v\n%s", err, b)
		}
		if doc.Version != 3 || len(doc.Results) < 3 || doc.End == "" || len(doc.Errors) != 1 || !strings.Contains(doc.Errors[0], "canceled") {
			t.Errorf("interrupted file: version %d, %d results, errors %q, end %q", doc.Version, len(doc.Results), doc.Errors, doc.End)
		}
		s, err := perf.ReadJSONFile(js)
		if err != nil || s.Test != "all_reduce" || len(s.Rows) != len(doc.Results) {
			t.Errorf("read back: %v, %+v", err, s)
		}
	})
}

// -I, -K and -S reach the engine; the per-iteration times go into the
// table, the CSV and the JSON (nccl-tests' v3 names), which perf analyze
// reads.
func TestFakePerfPerIteration(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		js, csvPath := filepath.Join(dir, "i.json"), filepath.Join(dir, "i.csv")
		out, _, err := runCLI(t, "perf", "all_reduce", "-b", "8", "-e", "1K", "-f", "4", "-n", "10", "-I", "1", "-K", "2", "-S", "1", "-J", js, "--csv", csvPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"i_min", "i_cv%", "timestamp", "summary skips first 2 iterations"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		b, _ := os.ReadFile(js)
		var doc struct {
			Config struct {
				PerIter bool `json:"per_iter_timing"`
				Skip    int  `json:"per_iter_skip"`
			} `json:"config"`
			Results []struct {
				OOP *struct {
					Skipped int       `json:"skipped_iterations"`
					Times   []float64 `json:"times_us"`
				} `json:"out_of_place_per_iter"`
				IP *struct{} `json:"in_place_per_iter"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || !doc.Config.PerIter || doc.Config.Skip != 2 || len(doc.Results) != 4 {
			t.Fatalf("JSON %v: %+v\n%s", err, doc, b)
		}
		for _, r := range doc.Results {
			if r.OOP == nil || r.IP == nil || len(r.OOP.Times) != 10 || r.OOP.Skipped != 2 {
				t.Errorf("result without per-iteration times: %+v", r)
			}
		}
		csvText, _ := os.ReadFile(csvPath)
		if lines := strings.Split(strings.TrimSpace(string(csvText)), "\n"); len(lines) != 5 || !strings.HasSuffix(lines[0], "inplace_i_cv_pct") ||
			strings.Count(lines[1], ",") != strings.Count(lines[0], ",") {
			t.Errorf("CSV:\n%s", csvText)
		}
		out, _, err = runCLI(t, "perf", "analyze", js)
		if err != nil || !strings.Contains(out, "all_reduce, JSON version 3, 1 process,") || !strings.Contains(out, "statistics skip 2") {
			t.Errorf("analyze of our own file: %v\n%s", err, out)
		}
	})
}

// --ceiling: the limit of each one-rank row (a device memcpy of the same
// bytes) in a block after nccl-tests' table, in the JSON, the CSV and the
// --json summary, as a ratio.
func TestFakePerfCeiling(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		js, csvPath := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.csv")
		out, _, err := runCLI(t, "perf", "all_reduce", "-b", "1K", "-e", "1M", "-f", "32", "-n", "3", "--ceiling", "-J", js, "--csv", csvPath)
		if err != nil {
			t.Fatal(err)
		}
		_, block, ok := strings.Cut(out, "# Ceiling: the limit of the measured path, measured in the same run (device memcpy of the same bytes)")
		if !ok || strings.Count(block, "\n#      ") < 1 || !strings.Contains(block, "1048576") {
			t.Errorf("no ceiling block:\n%s", out)
		}
		s, err := perf.ReadJSONFile(js)
		if err != nil || len(s.Rows) != 3 || s.Rows[2].Ceiling == nil || s.Rows[2].Ceiling.AlgBW <= 0 {
			t.Errorf("JSON: %v %+v", err, s)
		}
		csvText, _ := os.ReadFile(csvPath)
		if !strings.Contains(string(csvText), "ceiling_algbw_gbs") || !strings.Contains(string(csvText), ",device memcpy,") {
			t.Errorf("CSV:\n%s", csvText)
		}
		out, _, err = runCLI(t, "perf", "all_reduce", "-b", "1K", "-e", "1M", "-f", "32", "-n", "3", "--ceiling", "--json")
		var sum perfSummary
		if err != nil || json.Unmarshal([]byte(out), &sum) != nil || sum.Tests[0].Ceiling == nil || sum.Tests[0].Ceiling.Size != 1<<20 || sum.Tests[0].Ceiling.Ratio <= 0 {
			t.Errorf("--json: %v\n%s", err, out)
		}
	})
}

// -t 2 -g 1: two threads of one GPU each, as nccl-tests' header and JSON
// say them. (-c 0: the fake NCCL moves data only in one-rank collectives,
// so two ranks' results are not checked here.)
func TestFakePerfThreads(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		js := filepath.Join(dir, "t.json")
		out, _, err := runCLI(t, "perf", "all_reduce", "-t", "2", "-g", "1", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-c", "0", "-J", js)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "# nThread 2 nGpus 1 ") || strings.Count(out, "Fake GPU") != 2 {
			t.Errorf("header:\n%s", out)
		}
		b, _ := os.ReadFile(js)
		var doc struct {
			Config struct {
				NThreads int `json:"nthreads"`
				NGPUs    int `json:"ngpus"`
			} `json:"config"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || doc.Config.NThreads != 2 || doc.Config.NGPUs != 1 {
			t.Errorf("JSON config %+v: %v", doc.Config, err)
		}
	})
}

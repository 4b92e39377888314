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
			// the minute is only a guard against a file that never fills).
			guard := time.Now().Add(time.Minute)
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
		skipWithoutCgo(t, out.String(), errb.String(), err.Error())
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

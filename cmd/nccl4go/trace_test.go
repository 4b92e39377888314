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

	"github.com/nccl4go/nccl/trace"
)

// hangDumps is a recorded hang (see trace's TestHangTestdata): rank 2 of 4
// never enqueued AllReduce #17 on "world"; it is stuck in a Send on "pp".
var hangDumps = filepath.Join("..", "..", "trace", "testdata", "hang")

func runTraceCLI(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"trace"}, args...), &out, &errb)
	return out.String(), errb.String(), err
}

func TestTraceAnalyzeText(t *testing.T) {
	out, _, err := runTraceCLI("analyze", hangDumps)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`communicator "world" (hash 0x00000005eed0f00d, 4 ranks): behind`,
		"rank 2 of 4 never enqueued AllReduce #17 (1024 float32, sum) that ranks 0, 1 and 3 enqueued",
		`since then it enqueued Send #1 (4096 bfloat16, to rank 1) on communicator "pp", started`,
		"rank 0 (node0 pid 1000): enqueued #17, completed #16",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTraceAnalyzeFilesAndJSON(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(hangDumps, "*.json"))
	if len(files) != 4 {
		t.Fatalf("testdata: %v", files)
	}
	out, _, err := runTraceCLI(append([]string{"analyze", "-json"}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep trace.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Dumps != 4 || rep.Comms[0].Verdict != trace.VerdictBehind || rep.Comms[0].Disagreement.Seq != 17 {
		t.Errorf("report %+v", rep.Comms[0])
	}
	// Only three dumps: rank 2's is missing, and the report says so.
	var three []string
	for _, f := range files {
		if !strings.Contains(f, "rank2-") {
			three = append(three, f)
		}
	}
	out, _, err = runTraceCLI(append([]string{"analyze"}, three...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "no dump from rank 2 of 4") {
		t.Errorf("output lacks the missing dump:\n%s", out)
	}
}

func TestTraceUsage(t *testing.T) {
	var uerr *usageError
	for _, args := range [][]string{{}, {"bogus"}, {"analyze"}, {"analyze", "-nope", "x"}} {
		if _, _, err := runTraceCLI(args...); !errors.As(err, &uerr) {
			t.Errorf("trace %v: err = %v, want a usage error", args, err)
		}
	}
	if out, _, err := runTraceCLI("analyze", "-h"); !errors.Is(err, errHelp) || !strings.Contains(out, "-json") {
		t.Errorf("analyze -h: %v\n%s", err, out)
	}
	if out, _, err := runTraceCLI("help"); !errors.Is(err, errHelp) || !strings.Contains(out, "analyze") {
		t.Errorf("trace help: %v\n%s", err, out)
	}
}

func TestTraceAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runTraceCLI("analyze", dir); err == nil || !strings.Contains(err.Error(), "no nccl4go-trace-*.json") {
		t.Errorf("empty directory: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema":"other"}`), 0o644)
	if _, _, err := runTraceCLI("analyze", bad); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("bad dump: %v", err)
	}
	if _, _, err := runTraceCLI("analyze", filepath.Join(dir, "none.json")); err == nil {
		t.Error("missing file accepted")
	}
}

// One unreadable dump in a directory is skipped and named; the others are
// analyzed (one bad file failed the whole analysis). A file named on the
// command line is still an error of its own.
func TestTraceAnalyzeSkipsBadDumpInDirectory(t *testing.T) {
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(hangDumps, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(f, "rank2-") {
			b = b[:len(b)/2] // torn
		}
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
	}
	out, errs, err := runTraceCLI("analyze", dir)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, errs)
	}
	for _, want := range []string{"no dump from rank 2 of 4", "skipped", "rank2-"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "skipping") || !strings.Contains(errs, "rank2-") {
		t.Errorf("stderr does not name the skipped dump:\n%s", errs)
	}
	out, _, err = runTraceCLI("analyze", "-json", dir)
	var rep trace.Report
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Dumps != 3 || !strings.Contains(strings.Join(rep.Notes, "\n"), "rank2-") {
		t.Errorf("-json: %v, dumps %d, notes %q", err, rep.Dumps, rep.Notes)
	}
	// Every dump of the directory unreadable: an error.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "nccl4go-trace-rank0-pid1-1.json"), []byte("{"), 0o644)
	if _, _, err := runTraceCLI("analyze", bad); err == nil {
		t.Error("a directory of unreadable dumps was analyzed")
	}
	// Named on the command line: an error.
	torn := filepath.Join(dir, filepath.Base(files[2]))
	if !strings.Contains(torn, "rank2-") {
		t.Fatalf("testdata order: %s", torn)
	}
	if _, _, err := runTraceCLI("analyze", torn, dir); err == nil || !strings.Contains(err.Error(), "rank2-") {
		t.Errorf("a named unreadable dump: %v", err)
	}
}

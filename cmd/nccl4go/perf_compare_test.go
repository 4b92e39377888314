package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compare --json survives cells that are not numbers (a busbw of 0 gives
// a NaN ratio; encoding/json refused the whole output) and prints the
// largest ratio in text.
func TestPerfCompareCLI(t *testing.T) {
	a := "../../perf/testdata/nccltests.json" // one rank: every busbw is 0
	b := filepath.Join(t.TempDir(), "b.json")
	raw, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(b, bytes.Replace(raw, []byte(`"time":14.270000`), []byte(`"time":14.983500`), 1), 0o644)
	var out, errb bytes.Buffer
	if code := mainExit([]string{"perf", "compare", a, b, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var got []compareJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || len(got[0].Rows) != 2 {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	r := got[0].Rows[1]
	if r.TimeOOP == nil || *r.TimeOOP < 1.049 || *r.TimeOOP > 1.051 || r.BusBWOOP != nil {
		t.Errorf("row %+v", r)
	}
	out.Reset()
	if code := mainExit([]string{"perf", "compare", "--from", "1M", a, b}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "largest out-of-place time ratio B/A from 1M up: 1.0500 at 1048576 bytes (+5.00%)") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
}

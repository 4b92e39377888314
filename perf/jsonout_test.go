package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CreateJSON never overwrites: path, else path.0, path.1 (nccl-tests'
// jsonOutputInit), and fails at once on a path it cannot create.
func TestCreateJSONFreshPath(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	os.WriteFile(p, []byte("keep"), 0o644)
	os.WriteFile(p+".0", []byte("keep"), 0o644)
	j, err := CreateJSON(p, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Path != p+".1" {
		t.Errorf("path %s, want %s.1", j.Path, p)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, old := range []string{p, p + ".0"} {
		if b, _ := os.ReadFile(old); string(b) != "keep" {
			t.Errorf("%s overwritten", old)
		}
	}
	// Closed before Begin: still a valid file that says the run ended early.
	b, _ := os.ReadFile(p + ".1")
	var doc jsonDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version != 3 || len(doc.Errors) != 1 || doc.EndTime == "" {
		t.Errorf("file closed before Begin: %v\n%s", err, b)
	}
	// Any extension (nccl-tests writes nothing unless it is .json).
	if j, err := CreateJSON(filepath.Join(dir, "r.txt"), nil); err != nil || j.Close() != nil {
		t.Errorf("r.txt: %v", err)
	} else if b, _ := os.ReadFile(j.Path); !json.Valid(b) {
		t.Errorf("r.txt is not JSON:\n%s", b)
	}
	if _, err := CreateJSON(filepath.Join(dir, "no", "r.json"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing directory: %v", err)
	}
}

// Rows are in the file as soon as Row returns; a run cut short closes
// valid, with the rows written and the reason; a whole run streamed is
// the same document WriteJSON writes.
func TestJSONWriterStreams(t *testing.T) {
	r := &Report{Header: Header{Program: "all_reduce_perf", Options: DefaultOptions("all_reduce"), NRanks: 2, NCCLVersion: 22803},
		Test: "all_reduce", Iters: 20, AvgBusBW: 1.5,
		Rows: []Row{{Size: 8, Count: 2, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 1, AlgBW: 2, BusBW: 3, Checked: true}, InPlace: Cell{Time: 4, AlgBW: 5, BusBW: 6, Checked: true}},
			{Size: 16, Count: 4, Type: "float", Op: "sum", Root: -1, OutOfPlace: Cell{Time: 1, AlgBW: 2, BusBW: 3, Checked: true}, InPlace: Cell{Time: 4, AlgBW: 5, BusBW: 6, Checked: true}}}}
	p := filepath.Join(t.TempDir(), "s.json")
	j, err := CreateJSON(p, []string{"nccl4go", "perf", "all_reduce"})
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(&r.Header)
	j.Row("all_reduce", &r.Rows[0])
	b, _ := os.ReadFile(p)
	if !bytes.Contains(b, []byte(`{"size":8,`)) {
		t.Errorf("row not in the file after Row:\n%s", b)
	}
	j.Row("all_reduce", &r.Rows[1])
	if err := j.CloseWithError(context.Canceled); err != nil {
		t.Fatal(err)
	}
	s, err := ReadJSONFile(p)
	if err != nil || s.Test != "all_reduce" || len(s.Rows) != 2 {
		t.Fatalf("cut-short file: %v %+v", err, s)
	}
	b, _ = os.ReadFile(p)
	var doc jsonDoc
	json.Unmarshal(b, &doc)
	if len(doc.Errors) != 1 || doc.Errors[0] != "run ended early: context canceled" {
		t.Errorf("errors %q", doc.Errors)
	}
	// Whole run, streamed and at once.
	var whole bytes.Buffer
	if err := WriteJSON(&whole, r, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(whole.Bytes()) || strings.Count(whole.String(), "\n") < 10 {
		t.Errorf("WriteJSON:\n%s", whole.String())
	}
}

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/trace"
)

// TestTraceExportTorch: `trace export -format torch` writes one file per
// rank, named after the prefix, holding what trace.ExportTorch makes of the
// same dumps, and lists the files it wrote.
func TestTraceExportTorch(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runTraceCLI("export", "-format", "torch", "-o", dir, hangDumps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(hangDumps, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ds []*trace.Dump
	for _, f := range files {
		d, err := trace.ReadDumpFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	want, err := trace.ExportTorch(ds)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(out)
	if len(lines) != len(want) {
		t.Fatalf("listed %q, want %d files", out, len(want))
	}
	for i, f := range want {
		path := filepath.Join(dir, trace.TorchPrefix+strconv.Itoa(f.Rank))
		if lines[i] != path {
			t.Errorf("line %d: %q, want %q", i, lines[i], path)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(f.Data) {
			t.Errorf("%s differs from trace.ExportTorch's rank %d", path, f.Rank)
		}
	}
	if _, _, err := runTraceCLI("export", "-o", dir, "-prefix", "fr_", hangDumps); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fr_3")); err != nil {
		t.Errorf("-prefix fr_: %v", err)
	}
}

// TestTraceExportUsage: a missing -o, an unknown format or no dump is a
// usage error that says which.
func TestTraceExportUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", hangDumps}, "no output directory"},
		{[]string{"export", "-format", "json", "-o", t.TempDir(), hangDumps}, `unknown format "json"`},
		{[]string{"export", "-o", t.TempDir()}, "no dump given"},
	} {
		_, _, err := runTraceCLI(c.args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("trace %v: %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}

// A torn dump found in a directory is skipped and named, as trace analyze
// does; the others are exported. Named on the command line, it is an error.
func TestTraceExportSkipsBadDumpInDirectory(t *testing.T) {
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(hangDumps, "*.json"))
	var torn string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(f, "rank2-") {
			b = b[:len(b)/2]
			torn = filepath.Join(dir, filepath.Base(f))
		}
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
	}
	out, errs, err := runTraceCLI("export", "-o", t.TempDir(), dir)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, errs)
	}
	if n := len(strings.Fields(out)); n != len(files)-1 {
		t.Errorf("exported %d files, want %d:\n%s", n, len(files)-1, out)
	}
	if !strings.Contains(errs, "skipping") || !strings.Contains(errs, "rank2-") {
		t.Errorf("stderr does not name the skipped dump:\n%s", errs)
	}
	if _, _, err := runTraceCLI("export", "-o", t.TempDir(), torn); err == nil {
		t.Error("a torn dump named on the command line was exported without an error")
	}
}

// An error of trace export names trace export, not trace analyze (they
// share the reading of paths).
func TestTraceExportErrorsNameExport(t *testing.T) {
	_, _, err := runTraceCLI("export", "-o", t.TempDir(), filepath.Join(t.TempDir(), "missing"))
	if err == nil || !strings.HasPrefix(err.Error(), "trace export:") {
		t.Errorf("error %v, want one starting \"trace export:\"", err)
	}
}

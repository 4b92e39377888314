package perf

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// The files in testdata/nccltests-h200 are what nccl-tests 2.19.6 itself
// wrote with -J on an H200 (NCCL 2.28.3; the run's environment list and
// the directories in its arguments removed, every other byte as written):
// one rank and two processes, with and without -I 1.
func TestAnalyzeRealNCCLTestsFiles(t *testing.T) {
	dir := filepath.Join("testdata", "nccltests-h200")
	for _, c := range []struct {
		file        string
		test        string
		procs       int
		perIter     bool
		wantFinding string
	}{
		{"all_reduce_1rank_I1.json", "all_reduce", 1, true, "Warm-up"},
		{"all_reduce_2proc_I1.json", "all_reduce", 2, true, ""},
		{"all_reduce_1rank.json", "all_reduce", 1, false, ""},
		{"sendrecv_2proc.json", "sendrecv", 2, false, ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			a, err := AnalyzeFile(filepath.Join(dir, c.file), AnalyzeOptions{})
			if !c.perIter {
				if !errors.Is(err, ErrNoPerIter) {
					t.Fatalf("a file without -I: %v, want ErrNoPerIter", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Version != 3 || a.Test != c.test || a.Processes != c.procs || len(a.Sizes) == 0 {
				t.Fatalf("version %d, test %q, %d processes, %d sizes", a.Version, a.Test, a.Processes, len(a.Sizes))
			}
			for _, s := range a.Sizes {
				if s.Size == 0 {
					t.Errorf("a size row of 0 bytes: %+v", s)
				}
			}
			var out bytes.Buffer
			if err := WriteAnalysis(&out, a, true); err != nil {
				t.Fatal(err)
			}
			if c.wantFinding != "" && !strings.Contains(strings.Join(a.Findings, "\n"), c.wantFinding) {
				t.Errorf("findings lack %q:\n%s", c.wantFinding, out.String())
			}
			t.Logf("\n%s", out.String())
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/perf"
)

// Flags as getopt reads them: the test name anywhere, -b8, --minbytes=8,
// and the sizes nccl-tests' parsesize accepts.
func TestPerfFlagsGetopt(t *testing.T) {
	for _, c := range []struct {
		args     string
		min, max uint64
		iters    int
	}{
		{"-b 8 -e 16 all_reduce -n 2", 8, 16, 2},
		{"all_reduce -b8 -e16 -n2", 8, 16, 2},
		{"--minbytes=8 --maxbytes 16 all_reduce --iters=2", 8, 16, 2},
		{"all_reduce -b 32MB -e 1GiB -n 2", 32 << 20, 1 << 30, 2},
		{"all_reduce -b 1k -e 2 M -n 2", 1024, 2 << 20, 2},
		{"all_reduce -b 0x10 -e 1.5K -n 2", 16, 1536, 2},
	} {
		p := newPerfFlags()
		tests, err := p.parse(splitArgs(c.args), &bytes.Buffer{})
		if err != nil {
			t.Errorf("%s: %v", c.args, err)
			continue
		}
		if len(tests) != 1 || tests[0] != "all_reduce" || p.o.MinBytes != c.min || p.o.MaxBytes != c.max || p.o.Iters != c.iters {
			t.Errorf("%s: tests %v min %d max %d iters %d", c.args, tests, p.o.MinBytes, p.o.MaxBytes, p.o.Iters)
		}
	}
	for _, bad := range []string{"8B", "8x", "-1", "K", "", "nan", "1e30G"} {
		if v, err := perf.ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, v)
		}
	}
}

// splitArgs splits on blanks, except "2 M" stays one argument.
func splitArgs(s string) []string {
	f := strings.Fields(strings.ReplaceAll(s, "2 M", "2\x00M"))
	for i := range f {
		f[i] = strings.ReplaceAll(f[i], "\x00", " ")
	}
	return f
}

// -r takes nccl-tests' strtol reading: "all" is root 0 (strtol stops at
// the first letter), -1 is every root.
func TestPerfRootAsNCCLTests(t *testing.T) {
	for arg, want := range map[string]int{"all": 0, "-1": -1, "3": 3, "0x2": 2} {
		p := newPerfFlags()
		if _, err := p.parse([]string{"broadcast", "-r", arg}, &bytes.Buffer{}); err != nil {
			t.Errorf("-r %s: %v", arg, err)
			continue
		}
		if p.o.Root != want || p.rootAll != (arg == "all") {
			t.Errorf("-r %s: root %d (want %d), noted as a word: %v", arg, p.o.Root, want, p.rootAll)
		}
	}
}

// perf -h is short and grouped; a usage error is one line and a hint.
func TestPerfHelpAndUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	if code := mainExit([]string{"perf", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("perf -h: exit %d", code)
	}
	help := out.String()
	if n := strings.Count(help, "\n"); n > 70 {
		t.Errorf("perf -h is %d lines, want at most 70:\n%s", n, help)
	}
	for _, want := range []string{"-b, --minbytes", "-J, --output_file", "Sizes", "Output", "Not supported"} {
		if !strings.Contains(help, want) {
			t.Errorf("perf -h lacks %q:\n%s", want, help)
		}
	}
	for _, l := range strings.Split(help, "\n") {
		if strings.Count(l, "--minbytes") > 0 && strings.Count(l, "-b") == 0 {
			t.Errorf("-b and --minbytes not on one line: %q", l)
		}
	}
	out.Reset()
	errb.Reset()
	if code := mainExit([]string{"perf", "all_reduce", "-b", "12X"}, &out, &errb); code != 2 {
		t.Errorf("bad size: exit %d, want 2", code)
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "12X") || !strings.Contains(lines[1], "nccl4go perf -h") {
		t.Errorf("usage error is not one line and a hint:\n%s", errb.String())
	}
	errb.Reset()
	mainExit([]string{"perf", "all_reduce", "-json"}, &out, &errb)
	if !strings.Contains(errb.String(), "--json") {
		t.Errorf("-json: no hint about --json:\n%s", errb.String())
	}
}

// The flags of the engine's nccl-tests features reach Options.
func TestPerfFlagsFeatures(t *testing.T) {
	t.Setenv("NCCL_TESTS_ALLTOALLV_SPREAD", "0.25")
	p := newPerfFlags()
	if _, err := p.parse(strings.Fields("alltoallv -R 2 -u 1 -x 1 -M 1 -I 1 -K 3 -S 1 -z 3 --ceiling -t 2 -g 2 -p 0 -D 0 -V 16"), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	o := p.o
	if o.Register != 2 || o.Unaligned != 1 || o.CTAPolicy != 1 || !o.MemoryReport || !o.PerIterTiming || o.PerIterSkip != 3 ||
		!o.Timestamps || !o.Ceiling || o.AlltoallvSpread == nil || *o.AlltoallvSpread != 0.25 || o.Blocking != 3 || o.Threads != 2 || o.GPUs != 2 {
		t.Errorf("options %+v", o)
	}
	if cfg := o.CommConfig(); cfg.CTAPolicy == nil || *cfg.CTAPolicy != 1 {
		t.Errorf("-x 1 not in the communicator configuration: %+v", cfg)
	}
	t.Setenv("NCCL_TESTS_ALLTOALLV_SPREAD", "lots")
	if _, err := newPerfFlags().parse([]string{"alltoallv"}, &bytes.Buffer{}); err == nil {
		t.Error("a bad NCCL_TESTS_ALLTOALLV_SPREAD was accepted")
	}
}

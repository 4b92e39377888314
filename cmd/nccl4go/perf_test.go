package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/perf"
)

func TestPerfFlags(t *testing.T) {
	p := newPerfFlags()
	tests, err := p.parse(strings.Fields("all_reduce_perf -b8 -e 128M -f 2 --iters 5 -w 3 -m 2 -c 0 -o avg -d half -z 2 -T 10 -a 3 -C 1 -y 0 -N 2 --devices 0,0"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tests, []string{"all_reduce"}) {
		t.Errorf("tests %v", tests)
	}
	o := p.o
	want := perf.Options{Test: "", GPUs: 1, Devices: []int{0, 0}, MinBytes: 8, MaxBytes: 128 << 20, StepBytes: 1 << 20, StepFactor: 2,
		Iters: 5, Warmup: 3, AggIters: 2, Cycles: 2, Check: 0, Op: "avg", Type: "half", Root: 0, Blocking: 2,
		Timeout: 10 * time.Second, Average: 3, CPUTime: true, Threads: 1}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options\n got %+v\nwant %+v", o, want)
	}
	// TEST after the flags, long names with =, every root, test all.
	p = newPerfFlags()
	tests, err = p.parse([]string{"--minbytes=1K", "-r", "-1", "-G", "3", "all"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != len(perf.Tests()) || p.o.MinBytes != 1024 || p.o.Root != -1 || p.o.Graph != 3 {
		t.Errorf("tests %v, options %+v", tests, p.o)
	}
	for _, bad := range [][]string{
		{},                                     // no test
		{"nope"},                               // unknown test
		{"all_reduce", "-R", "3"},              // registration: 0, 1 or 2
		{"all_reduce", "-D", "1"},              // device kernels
		{"all_reduce", "-u", "-1"},             // misalignment
		{"all_reduce", "-I", "2"},              // -I is 0 or 1
		{"all_reduce", "-K", "1"},              // -K without -I
		{"all_reduce", "-I", "1", "-G", "1"},   // -I cannot time graph replays
		{"all_reduce", "-b", "12X"},            // size
		{"all_reduce", "-b", "2M", "-e", "1M"}, // min > max
		{"all_reduce", "-d", "float128"},       // type
		{"all_reduce", "-o", "xor"},            // op
		{"all_reduce", "-G", "1", "-z", "1"},   // graph and blocking
		{"all_reduce", "--plot", "x.pdf"},      // plot format
		{"all_reduce", "extra", "-n", "1", "more"},
	} {
		p := newPerfFlags()
		_, err := p.parse(bad, &bytes.Buffer{})
		var ue *usageError
		if err == nil || !asUsage(err, &ue) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
	p = newPerfFlags()
	var help bytes.Buffer
	if _, err := p.parse([]string{"-h"}, &help); err != errHelp || !strings.Contains(help.String(), "--stepfactor") {
		t.Errorf("-h: %v\n%s", err, help.String())
	}
}

func asUsage(err error, ue **usageError) bool {
	u, ok := err.(*usageError)
	*ue = u
	return ok
}

func TestFakePerf(t *testing.T) {
	dir := t.TempDir()
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		js := filepath.Join(dir, "run.json")
		csvPath := filepath.Join(dir, "run.csv")
		plot := filepath.Join(dir, "run.png")
		out, _, err := runCLI(t, "perf", "all_reduce", "-b", "8", "-e", "64K", "-f", "4", "-n", "3", "-J", js, "--csv", csvPath, "--plot", plot)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# Writing JSON output to " + js, "# Collective test starting: all_reduce_perf",
			"# Out of bounds values : 0 OK", "# Collective test concluded: all_reduce_perf"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		s, err := perf.ReadJSONFile(js)
		if err != nil {
			t.Fatal(err)
		}
		if s.Test != "all_reduce" || len(s.Rows) != 7 || s.Rows[6].Size != 32768 {
			t.Errorf("JSON series: test %q, %d rows", s.Test, len(s.Rows))
		}
		f, err := os.Open(plot)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("plot is not a PNG: %v", err)
		}
		f.Close()
		csvText, _ := os.ReadFile(csvPath)
		if lines := strings.Split(strings.TrimSpace(string(csvText)), "\n"); len(lines) != 8 || !strings.HasPrefix(lines[1], "all_reduce,1,8,2,float,sum,-1,") {
			t.Errorf("CSV:\n%s", csvText)
		}
		// A second run to the same -J path goes to path.0, as nccl-tests does.
		out, _, err = runCLI(t, "perf", "sendrecv", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-J", js)
		if err != nil || !strings.Contains(out, "# Writing JSON output to "+js+".0") {
			t.Fatalf("second run: %v", err)
		}
		out, _, err = runCLI(t, "perf", "compare", js, js+".0", "--plot", filepath.Join(dir, "cmp.svg"))
		if err != nil || !strings.Contains(out, "# A: "+js) {
			t.Errorf("compare: %v\n%s", err, out)
		}
		// -json summary
		out, _, err = runCLI(t, "perf", "reduce_scatter", "-b", "1K", "-e", "1K", "-n", "1", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var sum perfSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil || !sum.OK || len(sum.Tests) != 1 || sum.Tests[0].Rows != 1 {
			t.Errorf("summary %+v: %v\n%s", sum, err, out)
		}
	})
}

// --csv - (help: "on stdout, instead of the table"): stdout is the CSV
// alone. With --json, which prints its summary on stdout too, it is a
// usage error: the two would be interleaved and neither could be read.
func TestFakePerfCSVStdout(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		out, _, err := runCLI(t, "perf", "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "1", "--progress", "never", "--csv", "-")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[1], "all_reduce,1,8,2,float,sum,-1,") {
			t.Errorf("stdout is not the CSV alone (a header and 4 rows):\n%s", out)
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "#") {
				t.Errorf("the table is on stdout beside the CSV: %q", l)
			}
		}
	})
	_, err := newPerfFlags().parse([]string{"all_reduce", "--json", "--csv", "-"}, &bytes.Buffer{})
	var uerr *usageError
	if !errors.As(err, &uerr) || !strings.Contains(err.Error(), "--csv -") {
		t.Errorf("--json --csv -: %v, want a usage error naming --csv -", err)
	}
}

// --devices (help: "CUDA devices, one rank each: 0,1,2 (replaces -g;
// repeats: NCCL_MULTI_RANK_GPU_ENABLE=1)"):
// one rank per entry whatever -g says; a repeated device without the
// variable is refused, with it two ranks share the GPU.
func TestFakePerfDevices(t *testing.T) {
	// -c 0: the fake moves no data between ranks, so a check would fail.
	args := []string{"perf", "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-c", "0", "--progress", "never", "-g", "3", "--devices"}
	ranks := func(t *testing.T, out string) int {
		return len(regexp.MustCompile(`(?m)^#\s+Rank\s+\d+ `).FindAllString(out, -1))
	}
	faketest.Run(t, faketest.Env{Devices: 3}, func(t *testing.T) {
		out, _, err := runCLI(t, append(args, "2,0")...)
		if err != nil {
			t.Fatal(err)
		}
		if n := ranks(t, out); n != 2 {
			t.Errorf("--devices 2,0 -g 3: %d rank lines, want 2", n)
		}
		if _, _, err := runCLI(t, append(args, "0,0")...); err == nil || !strings.Contains(err.Error(), "NCCL_MULTI_RANK_GPU_ENABLE=1") {
			t.Errorf("--devices 0,0 without NCCL_MULTI_RANK_GPU_ENABLE: %v, want an error naming it", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_MULTI_RANK_GPU_ENABLE=1"}}, func(t *testing.T) {
		out, _, err := runCLI(t, append(args, "0,0")...)
		if err != nil {
			t.Fatal(err)
		}
		if n := ranks(t, out); n != 2 {
			t.Errorf("--devices 0,0: %d rank lines, want 2", n)
		}
	})
}

// --init-timeout (help: "give up joining the job after DUR"): a rank
// whose job never meets (rank 1 of 2, no rank 0 and no store) fails
// naming the join once the timeout passes, not after the default 5m.
func TestFakePerfInitTimeout(t *testing.T) {
	port := testPort(t, "127.0.0.1") // nothing listens there
	faketest.Run(t, faketest.Env{Extra: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
		"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port)}}, func(t *testing.T) {
		start := time.Now()
		_, _, err := runCLI(t, "perf", "all_reduce", "-b", "8", "-e", "8", "-n", "1", "--progress", "never", "--init-timeout", "300ms")
		if err == nil || !strings.Contains(err.Error(), "joining") {
			t.Errorf("err %v, want one about joining the job", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("gave up after %v, not after --init-timeout 300ms", d)
		}
	})
}

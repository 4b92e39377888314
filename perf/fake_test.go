package perf_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/perf"
)

func TestFakeSmoke(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := perf.LocalWorld(context.Background(), []int{0}, perf.CommConfig("all_reduce"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, test := range perf.Tests() {
			o := perf.DefaultOptions(test)
			o.MinBytes, o.MaxBytes, o.StepFactor = 8, 1<<20, 4
			o.Iters = 2
			o.Op = "all"
			if test == "all_reduce" {
				o.Type, o.MaxBytes = "all", 4096
			}
			var buf bytes.Buffer
			rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &buf})
			if err != nil {
				t.Fatalf("%s: %v\n%s", test, err, buf.String())
			}
			if rep.Errors != 0 || !strings.Contains(buf.String(), "Out of bounds values : 0 OK") {
				t.Errorf("%s: %d errors\n%s", test, rep.Errors, buf.String())
			}
			if test == "all_reduce" || test == "alltoall" {
				t.Logf("%s", buf.String())
			}
		}
		// CUDA graphs (the fake runs captured work at capture time), grouped
		// iterations, blocking modes, the legacy stream, every root.
		for _, mod := range []func(o *perf.Options){
			func(o *perf.Options) { o.Graph = 2 },
			func(o *perf.Options) { o.Graph = 1; o.Op = "mulsum" },
			func(o *perf.Options) { o.AggIters = 3 },
			func(o *perf.Options) { o.Blocking = 1 },
			func(o *perf.Options) { o.Blocking = 3; o.CPUTime = true },
			func(o *perf.Options) { o.StreamNull = true },
			func(o *perf.Options) { o.Test = "broadcast"; o.Root = -1 },
			func(o *perf.Options) { o.Cycles = 2 },
		} {
			o := perf.DefaultOptions("all_reduce")
			o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters = 1024, 64<<10, 8, 2
			mod(&o)
			var buf bytes.Buffer
			rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &buf})
			if err != nil || rep.Errors != 0 || len(rep.Rows) == 0 {
				t.Errorf("%+v: %v, %d errors\n%s", o, err, rep.Errors, buf.String())
			}
			if o.CPUTime && !strings.Contains(buf.String(), "cputime") {
				t.Errorf("-C: no cputime column")
			}
		}
		// A root that is not a rank.
		o := perf.DefaultOptions("reduce")
		o.Root = 3
		if _, err := perf.Run(context.Background(), o, w, nil); err == nil {
			t.Error("root 3 of 1 rank accepted")
		}
	})
}

// A two-rank communicator of the fake moves no data: every check fails,
// and the report counts it (and nothing stops).
func TestFakeWrongResultsCounted(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := perf.LocalWorld(context.Background(), []int{0, 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		o := perf.DefaultOptions("all_reduce")
		o.MinBytes, o.MaxBytes, o.Iters = 4096, 4096, 1
		var buf bytes.Buffer
		rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if rep.NRanks != 2 || rep.Errors != 2 || rep.Rows[0].OutOfPlace.Wrong == 0 || !strings.Contains(buf.String(), "Out of bounds values : 2 FAILED") {
			t.Errorf("errors %d, rows %+v\n%s", rep.Errors, rep.Rows, buf.String())
		}
		if !strings.Contains(buf.String(), "nGpus 2") || !strings.Contains(buf.String(), "Rank  1") {
			t.Errorf("header\n%s", buf.String())
		}
	})
}

// CommConfig sets what nccl-tests sets for the loaded release, each field
// only where the version table says the release has it, and Init takes it.
func TestFakeCommConfigPerRelease(t *testing.T) {
	for _, tc := range []struct {
		r              int
		nvlink, maxP2P bool
	}{{22703, false, false}, {22803, true, false}, {23007, true, true}} {
		faketest.Run(t, faketest.Env{Release: tc.r}, func(t *testing.T) {
			cfg := perf.CommConfig("sendrecv")
			if got := cfg.NVLinkCentricSched != nil; got != tc.nvlink {
				t.Errorf("NCCL %d: NVLinkCentricSched set %v, want %v", tc.r, got, tc.nvlink)
			}
			if got := cfg.MaxP2PPeers != nil; got != tc.maxP2P {
				t.Errorf("NCCL %d: MaxP2PPeers set %v, want %v", tc.r, got, tc.maxP2P)
			}
			if cfg := perf.CommConfig("all_reduce"); cfg.MaxP2PPeers != nil {
				t.Errorf("NCCL %d: MaxP2PPeers set for all_reduce", tc.r)
			}
			w, err := perf.LocalWorld(context.Background(), []int{0}, cfg)
			if err != nil {
				t.Fatalf("NCCL %d: %v", tc.r, err)
			}
			w.Close()
		})
	}
}

// Close destroys a world of several local ranks together: one by one from
// one goroutine, the first Destroy would wait for ranks only a later one
// finalizes, as NCCL 2.31.0a16's finalize does (the fake reports that hang).
func TestFakeCloseLocalRanksTogether(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FINALIZE_WAITS_PEERS=1", "FAKE_NCCL_FINALIZE_WAIT_MS=200"}}, func(t *testing.T) {
		w, err := perf.LocalWorld(context.Background(), []int{0, 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive after Close; want 0", n)
		}
	})
}

package perf_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/perf"
)

// GPU tests: every test with data checks on one rank, on two ranks (two
// processes sharing GPU 0, distinct NCCL_HOSTID), and on two ranks of one
// process on one GPU (NCCL 2.30.3, NCCL_MULTI_RANK_GPU_ENABLE=1); and a
// CUDA graph replaying an all-reduce.

// sweep is a short sweep with checks on.
func sweep(test string) perf.Options {
	o := perf.DefaultOptions(test)
	o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Check = 8, 8<<20, 8, 5, 1
	o.Timeout = 2 * time.Minute
	return o
}

func runChecked(t *testing.T, w *perf.World, o perf.Options) *perf.Report {
	t.Helper()
	var out bytes.Buffer
	rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &out})
	if err != nil {
		t.Fatalf("%s: %v\n%s", o.Test, err, out.String())
	}
	if rep.Errors != 0 {
		t.Errorf("%s (type %s, op %s, graph %d): %d results with wrong elements\n%s", o.Test, o.Type, o.Op, o.Graph, rep.Errors, out.String())
	}
	if len(rep.Rows) == 0 && o.Test != "hypercube" {
		t.Errorf("%s: no rows", o.Test)
	}
	if testing.Verbose() && w.Proc == 0 {
		t.Logf("%s", out.String())
	}
	return rep
}

func TestGPUEveryTestOneRank(t *testing.T) {
	gputest.Require(t)
	w, err := perf.LocalWorld(context.Background(), []int{0}, perf.CommConfig("all_reduce"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, test := range perf.Tests() {
		runChecked(t, w, sweep(test))
	}
	// Every type and reduction of the reductions, small sizes.
	for _, test := range []string{"all_reduce", "reduce", "reduce_scatter"} {
		o := sweep(test)
		o.MaxBytes, o.Type, o.Op = 64<<10, "all", "all"
		runChecked(t, w, o)
	}
	// CUDA graphs, aggregation and the blocking modes.
	for _, mod := range []func(o *perf.Options){
		func(o *perf.Options) { o.Graph = 3 },
		func(o *perf.Options) { o.Graph = 2; o.Op = "mulsum" },
		func(o *perf.Options) { o.AggIters = 4 },
		func(o *perf.Options) { o.Blocking = 1 },
		func(o *perf.Options) { o.Blocking = 3 },
		func(o *perf.Options) { o.StreamNull = true },
	} {
		o := sweep("all_reduce")
		mod(&o)
		runChecked(t, w, o)
	}
}

func TestGPUEveryTestTwoProcesses(t *testing.T) {
	gputest.RunRanks(t, 2, 10*time.Minute, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		cfg := perf.CommConfig("all_reduce")
		cfg.Device = nccl.Ptr(0)
		comm, err := nccl.Init(nranks, rank, id, cfg)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		defer comm.Destroy()
		w := &perf.World{Comms: []*nccl.Communicator{comm}, Proc: rank, NProcs: nranks}
		for _, test := range perf.Tests() {
			o := sweep(test)
			o.MaxBytes = 1 << 20 // the socket transport between "hosts" is slow
			rep := runChecked(t, w, o)
			if rep.NRanks != 2 || len(rep.Devices) != 2 {
				t.Errorf("%s: %d ranks, %d device lines", test, rep.NRanks, len(rep.Devices))
			}
		}
		o := sweep("all_reduce")
		o.MaxBytes, o.Graph = 1<<20, 2
		runChecked(t, w, o)
	})
}

func TestGPUTwoRanksOneProcessOneGPU(t *testing.T) {
	gputest.Require(t)
	if err := gputest.MultiRankGPU(); err != nil {
		t.Skipf("two ranks of one process on GPU 0: %v (set NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL 2.30.3 or later)", err)
	}
	w, err := perf.LocalWorld(context.Background(), []int{0, 0}, perf.CommConfig("all_reduce"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, test := range perf.Tests() {
		o := sweep(test)
		o.Devices = []int{0, 0}
		rep := runChecked(t, w, o)
		if rep.NRanks != 2 {
			t.Errorf("%s: %d ranks", test, rep.NRanks)
		}
	}
}

// A PreMulSum all-reduce by 2, captured once and replayed 100 times,
// doubles the data 100 times.
func TestGPUGraphReplaysAllReduce(t *testing.T) {
	gputest.Require(t)
	dev := cuda.Device(0)
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 1 << 16
	host := make([]float64, n)
	for i := range host {
		host[i] = float64(i%7 + 1)
	}
	buf, err := cuda.AllocFrom(dev, host)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	op, err := nccl.PreMulSum(c, 2.0)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	// One eager call first: NCCL connects outside the capture.
	one, _ := cuda.Alloc[float64](dev, 1)
	defer one.Free()
	if err := c.AllReduce(nccl.BufferOf(one), nccl.BufferOf(one), nccl.Sum, s); err != nil {
		t.Fatal(err)
	}
	g, err := s.Capture(cuda.CaptureThreadLocal, func() error {
		if st, err := s.CaptureStatus(); err != nil || st != cuda.Capturing {
			t.Errorf("inside the capture: %v, %v", st, err)
		}
		return c.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), op.Op(), s)
	})
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	defer g.Destroy()
	exec, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	// Capture ran nothing.
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, _ := buf.ToHost()
	if got[0] != host[0] {
		t.Fatalf("the capture ran the all-reduce: %v", got[0])
	}
	for i := 0; i < 100; i++ {
		if err := exec.Launch(s); err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, err = buf.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	scale := 1.0
	for i := 0; i < 100; i++ {
		scale *= 2
	}
	for i := range got {
		if got[i] != host[i]*scale {
			t.Fatalf("element %d after 100 replays: %v, want %v", i, got[i], host[i]*scale)
		}
	}
}

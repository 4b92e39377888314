package nccl_test

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/gputest"
)

// requireBench loads the libraries a host-path benchmark runs on: the
// real ones on a GPU machine, the fakes with NCCL4GO_FAKE_BENCH=1 (the
// host path's own cost on any machine: the fake's calls do next to
// nothing), as in
//
//	NCCL4GO_FAKE_BENCH=1 go test -run '^$' -bench AllReduceHostPath .
//
// NCCL4GO_FAKE_BENCH_RELEASE picks the fake's release (default
// faketest.DefaultRelease); BenchmarkAllReduceWithHostPath needs 23100 or
// later.
func requireBench(b *testing.B) {
	if os.Getenv("NCCL4GO_FAKE_BENCH") != "1" {
		gputest.Require(b)
		return
	}
	release, _ := strconv.Atoi(os.Getenv("NCCL4GO_FAKE_BENCH_RELEASE"))
	ncclPath, cudaPath := faketest.Libraries(b, faketest.Env{Release: release})
	os.Setenv("NCCL4GO_CUDA_LIBRARY", cudaPath)
	if err := cuda.Load(cudaPath); err != nil {
		b.Skipf("cannot load the fake CUDA driver (a driver is loaded already?): %v", err)
	}
	if err := nccl.Load(ncclPath); err != nil {
		b.Skipf("cannot load the fake NCCL: %v", err)
	}
}

// benchComm is requireBench and a one-rank communicator on device 0,
// destroyed when the benchmark ends.
func benchComm(b *testing.B) *nccl.Communicator {
	b.Helper()
	requireBench(b)
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		b.Fatalf("InitAll: %v", err)
	}
	c := comms[0]
	b.Cleanup(func() { c.Destroy() })
	return c
}

// BenchmarkAllReduceHostPath measures the host cost of a call: an in-place
// all-reduce of one float32 on a one-rank communicator (a no-op for the
// GPU), from Go through the binding ("go") and from a loop written in C
// inside the shim ("c"), which calls ncclAllReduce directly. "compare" runs,
// in paired rounds, the binding, the shim's trampoline called from Go
// without the binding's logic ("raw"), the C loop twice and a cgo call of a
// C function that does nothing ("floor"), and reports the medians over
// rounds:
//
//   - go-ns/op, raw-ns/op, c-ns/op, floor-ns/op: each loop's time per call;
//   - diff-ns/op = go - c: what the binding costs over C, the figure with a
//     target (at most 50 with the recorder off, 70 with it on);
//   - binding-ns/op = go - raw: the binding's own lock, checks and record;
//   - shim-ns/op = raw - c - floor: the shim's trampoline beyond a bare cgo
//     call;
//   - aa-ns/op = c2 - c: the C loop against itself in the same round, the
//     A/A control (a difference within its spread is not a finding);
//     aa-abs-ns/op is the median of its absolute value;
//   - lock-ns/op: the C loop with one locked read-modify-write after each
//     call (what a Go call's return and the binding's unlock do), minus
//     the C loop: does such an instruction, right after NCCL's call, cost
//     more than usual? (On the H200: -1 to 9 ns, no.)
//
// "cgo-floor" is the bare cgo call alone. allocs/op must be 0 and
// cgo-calls/op 1.
func BenchmarkAllReduceHostPath(b *testing.B) {
	c := benchComm(b)
	s, err := cuda.Device(0).NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	mem, err := cuda.AllocFrom(0, []float32{1.5})
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Free()
	buf := nccl.BufferOf(mem)
	goLoop := func(n int) {
		for range n {
			if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
				b.Fatal(err)
			}
		}
	}
	cLoop := func(n int) {
		if st := capi.BenchAllReduceLoop(buf.Ptr, 1, int32(nccl.Float32), c.Handle(), s.Handle(), n); st.Code != 0 {
			b.Fatalf("C loop: result %d: %s", st.Code, st.Detail)
		}
	}
	// rawLoop is the crossing alone: the shim's trampoline called from Go
	// with no binding logic (no lock, no validation).
	rawLoop := func(n int) {
		comm, h := c.Handle(), s.Handle()
		for range n {
			if st := capi.AllReduce(buf.Ptr, buf.Ptr, 1, int32(nccl.Float32), int32(nccl.Sum), comm, h); st.Code != 0 {
				b.Fatalf("raw call: result %d: %s", st.Code, st.Detail)
			}
		}
	}
	sync := func() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	goLoop(1000) // warm up: identity, caches, NCCL's first-call setup
	sync()

	b.Run("go", func(b *testing.B) {
		b.ReportAllocs()
		calls := runtime.NumCgoCall()
		for b.Loop() {
			if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "cgo-calls/op")
		b.StopTimer()
		sync()
	})
	b.Run("c", func(b *testing.B) {
		b.ReportAllocs()
		cLoop(b.N)
		b.StopTimer()
		sync()
	})
	b.Run("compare", func(b *testing.B) {
		b.ReportAllocs()
		// Paired rounds: each round runs the three loops back to back,
		// starting with a different one each round (so that none always
		// follows the stream sync), and syncs between rounds so that the
		// stream's queue never fills. The figures are medians over
		// rounds: a shared machine's stalls hit single rounds.
		const round = 10000
		floorLoop := func(n int) {
			for range n {
				if capi.BenchFloor() != 0 {
					b.Fatal("floor")
				}
			}
		}
		cLockLoop := func(n int) {
			capi.BenchSetLockEach(true)
			defer capi.BenchSetLockEach(false)
			cLoop(n)
		}
		loops := [...]func(int){goLoop, rawLoop, cLoop, floorLoop, cLoop, cLockLoop}
		const nl = len(loops)
		var ns [nl][]float64 // go, raw, c, floor, c2
		var diff, binding, shim, aa, aaAbs, lock []float64
		done := 0
		for r := 0; done < b.N; r++ {
			n := min(round, b.N-done)
			var t [nl]float64
			for k := range nl {
				i := (r + k) % nl
				t0 := time.Now()
				loops[i](n)
				t[i] = float64(time.Since(t0).Nanoseconds()) / float64(n)
			}
			b.StopTimer()
			sync()
			for i := range nl {
				ns[i] = append(ns[i], t[i])
			}
			diff, binding = append(diff, t[0]-t[2]), append(binding, t[0]-t[1])
			shim = append(shim, t[1]-t[2]-t[3])
			aa, aaAbs = append(aa, t[4]-t[2]), append(aaAbs, math.Abs(t[4]-t[2]))
			lock = append(lock, t[5]-t[2])
			b.StartTimer()
			done += n
		}
		b.ReportMetric(median(ns[0]), "go-ns/op")
		b.ReportMetric(median(ns[1]), "raw-ns/op")
		b.ReportMetric(median(ns[2]), "c-ns/op")
		b.ReportMetric(median(ns[3]), "floor-ns/op")
		b.ReportMetric(median(diff), "diff-ns/op")
		b.ReportMetric(median(binding), "binding-ns/op")
		b.ReportMetric(median(shim), "shim-ns/op")
		b.ReportMetric(median(aa), "aa-ns/op")
		b.ReportMetric(median(aaAbs), "aa-abs-ns/op")
		b.ReportMetric(median(lock), "lock-ns/op")
	})
	// The floor under any binding: one cgo call to a C function that does
	// nothing.
	b.Run("cgo-floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if capi.BenchFloor() != 0 {
				b.Fatal("floor")
			}
		}
	})
}

// BenchmarkAsyncError is the cost of one ncclCommGetAsyncError through
// [nccl.Communicator.AsyncError] on an idle one-rank communicator: what the
// watchdog's asynchronous-error poll holds the communicator's lock for.
func BenchmarkAsyncError(b *testing.B) {
	c := benchComm(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.AsyncError(); err != nil {
			b.Fatal(err)
		}
	}
}

// median returns the median of xs, reordering them.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// BenchmarkAllReduceTwoRanks is the host path of a small all-reduce over two
// communicators of this process (one per GPU), each rank's call in a group
// driven by one goroutine: what a multi-rank call costs, group end included.
func BenchmarkAllReduceTwoRanks(b *testing.B) {
	gputest.Require(b)
	if n, err := cuda.Count(); err != nil || n < 2 {
		b.Skip("needs two GPUs")
	}
	comms, err := nccl.InitAll([]int{0, 1})
	if err != nil {
		b.Fatalf("InitAll: %v", err)
	}
	defer nccl.DestroyAll(comms...)
	bufs := make([]nccl.Buffer, 2)
	for i := range bufs {
		m, err := cuda.AllocFrom(cuda.Device(i), []float32{1})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Free()
		bufs[i] = nccl.BufferOf(m)
	}
	step := func() error {
		return nccl.Group(func() error {
			for i, c := range comms {
				if err := c.AllReduce(bufs[i], bufs[i], nccl.Sum, cuda.Stream{}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i := range comms {
		cuda.Device(i).Synchronize()
	}
}

// BenchmarkAllReduceWithHostPath is the host cost of a configured call
// (AllReduceWith, ncclAllReduceConfig) beside the plain AllReduce on the
// same communicator: "plain", "config-empty" (an empty CollConfig: the
// layout and the initializer's values), "config" (CTA bounds, an
// algorithm selection and one extension entry). allocs/op must be 0 and
// cgo-calls/op 1 in each. On the fakes it needs
// NCCL4GO_FAKE_BENCH_RELEASE=23203 (or 23100, 23102).
func BenchmarkAllReduceWithHostPath(b *testing.B) {
	c := benchComm(b)
	mem, err := cuda.AllocFrom(0, []float32{1.5})
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Free()
	buf := nccl.BufferOf(mem)
	if err := c.AllReduceWith(&nccl.CollConfig{}, buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
		b.Skipf("no per-collective config in the loaded NCCL (on the fakes, set NCCL4GO_FAKE_BENCH_RELEASE=23203): %v", err)
	}
	cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(1), MaxCTAs: nccl.Ptr(4)}
	if r, _ := nccl.Version(); r >= 23102 {
		cfg.AlgSelection = "ring"
	}
	cfg.Ext = []nccl.ConfigExt{{VendorID: 1, OptionID: 2, Int: 3}}
	empty := &nccl.CollConfig{} // built once: a config built in the call's arguments is the caller's allocation
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"plain", func() error { return c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}) }},
		{"config-empty", func() error { return c.AllReduceWith(empty, buf, buf, nccl.Sum, cuda.Stream{}) }},
		{"config", func() error { return c.AllReduceWith(cfg, buf, buf, nccl.Sum, cuda.Stream{}) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			calls := runtime.NumCgoCall()
			for b.Loop() {
				if err := tc.call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "cgo-calls/op")
		})
	}
}

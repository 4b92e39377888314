package nccl_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/gputest"
)

// BenchmarkAllReduceHostPath measures the host cost of a call: an in-place
// all-reduce of one float32 on a one-rank communicator (a no-op for the
// GPU), from Go through the binding ("go") and from a loop written in C
// inside the shim ("c"), which calls ncclAllReduce directly. "compare" runs
// both in one benchmark and reports go-ns/op, c-ns/op and their
// difference, diff-ns/op (the target: at most 100), each the median over
// paired rounds; "cgo-floor" is one bare cgo call. allocs/op must be 0
// and cgo-calls/op 1.
func BenchmarkAllReduceHostPath(b *testing.B) {
	gputest.Require(b)
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		b.Fatalf("InitAll: %v", err)
	}
	c := comms[0]
	defer c.Destroy()
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
		if st := capi.BenchAllReduceLoop(buf.Ptr, 1, int32(nccl.Float32), c.Ptr(), s.Handle(), n); st.Code != 0 {
			b.Fatalf("C loop: result %d: %s", st.Code, st.Detail)
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
		// Paired rounds: each round runs both loops back to back, Go
		// first in even rounds and C first in odd ones (so that neither
		// always follows the stream sync), and syncs between rounds so
		// that the stream's queue never fills. The figures are medians
		// over rounds: a shared machine's stalls hit single rounds.
		const round = 10000
		var goNs, cNs, diffNs []float64
		done := 0
		for done < b.N {
			n := min(round, b.N-done)
			var tg, tc time.Duration
			if len(goNs)%2 == 0 {
				t0 := time.Now()
				goLoop(n)
				t1 := time.Now()
				cLoop(n)
				tg, tc = t1.Sub(t0), time.Since(t1)
			} else {
				t0 := time.Now()
				cLoop(n)
				t1 := time.Now()
				goLoop(n)
				tc, tg = t1.Sub(t0), time.Since(t1)
			}
			b.StopTimer()
			sync()
			g, c := float64(tg.Nanoseconds())/float64(n), float64(tc.Nanoseconds())/float64(n)
			goNs, cNs, diffNs = append(goNs, g), append(cNs, c), append(diffNs, g-c)
			b.StartTimer()
			done += n
		}
		b.ReportMetric(median(goNs), "go-ns/op")
		b.ReportMetric(median(cNs), "c-ns/op")
		b.ReportMetric(median(diffNs), "diff-ns/op")
		b.ReportMetric(float64(len(diffNs)), "rounds")
	})
	// The floor under any binding: one cgo call to a C function that
	// returns a thread-local int.
	b.Run("cgo-floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if capi.GroupDepth() != 0 {
				b.Fatal("in a group")
			}
		}
	})
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
	defer func() {
		for _, c := range comms {
			c.Destroy()
		}
	}()
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

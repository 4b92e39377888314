package nccl_test

import (
	"runtime"
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
// difference, diff-ns/op (the target: at most 100). allocs/op must be 0
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
		// Alternate the two loops in rounds, so that both see the same
		// state of the machine, and sync between rounds so that the
		// stream's queue never fills.
		const round = 10000
		var goTime, cTime time.Duration
		done := 0
		for done < b.N {
			n := min(round, b.N-done)
			t0 := time.Now()
			goLoop(n)
			t1 := time.Now()
			cLoop(n)
			t2 := time.Now()
			b.StopTimer()
			sync()
			b.StartTimer()
			goTime += t1.Sub(t0)
			cTime += t2.Sub(t1)
			done += n
		}
		goNs := float64(goTime.Nanoseconds()) / float64(b.N)
		cNs := float64(cTime.Nanoseconds()) / float64(b.N)
		b.ReportMetric(goNs, "go-ns/op")
		b.ReportMetric(cNs, "c-ns/op")
		b.ReportMetric(goNs-cNs, "diff-ns/op")
	})
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

package perf

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/gputest"
)

// BenchmarkTimedLoop measures the engine's own host cost per iteration of
// the timed loop: an in-place all-reduce of one float on one rank (a no-op
// for the GPU: pure host path), through the engine ("engine", one
// benchTime of 10000 iterations per round, reported per iteration) and as
// the binding's bare call ("binding", BenchmarkAllReduceHostPath's "go"
// loop). engine - binding is the engine's share. Runs on a GPU, or on the
// fake libraries with NCCL_LIBRARY and NCCL4GO_CUDA_LIBRARY pointing at
// them.
func BenchmarkTimedLoop(b *testing.B) {
	gputest.Require(b)
	w, err := LocalWorld(context.Background(), []int{0}, CommConfig("all_reduce"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	o := DefaultOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.Check, o.Warmup = 4, 4, 0, 0
	const iters = 10000
	o.Iters = iters
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	coll, _ := lookupTest(o.Test)
	e := &bench{ctx: context.Background(), opts: o, coll: coll, world: w}
	defer e.free()
	if _, err := e.setup(); err != nil {
		b.Fatal(err)
	}
	e.dt, _ = lookupType("float")
	e.op, _ = lookupOp("sum")
	e.root = -1
	e.setSize(4)
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.benchTime(true); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*iters), "ns/iter")
	})
	r := e.ranks[0]
	buf := nccl.RawBuffer(r.recv, 1, nccl.Float32, int(r.dev))
	binding := func(b *testing.B) {
		for range iters {
			if err := r.comm.AllReduce(buf, buf, nccl.Sum, r.stream); err != nil {
				b.Fatal(err)
			}
		}
		if err := r.stream.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("binding", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			binding(b)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*iters), "ns/iter")
	})
	// compare: paired rounds, the order swapped every round; the median
	// per-iteration difference is the engine's share.
	b.Run("compare", func(b *testing.B) {
		var eng, bind, diff []float64
		for r := 0; b.Loop(); r++ {
			var t [2]float64
			for k := range 2 {
				i := (r + k) % 2
				t0 := time.Now()
				if i == 0 {
					if _, err := e.benchTime(true); err != nil {
						b.Fatal(err)
					}
				} else {
					binding(b)
				}
				t[i] = float64(time.Since(t0).Nanoseconds()) / iters
			}
			eng, bind, diff = append(eng, t[0]), append(bind, t[1]), append(diff, t[0]-t[1])
		}
		b.ReportMetric(median(eng), "engine-ns/iter")
		b.ReportMetric(median(bind), "binding-ns/iter")
		b.ReportMetric(median(diff), "share-ns/iter")
	})
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

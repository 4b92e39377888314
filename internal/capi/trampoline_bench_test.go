//go:build linux && cgo

package capi

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkTrampoline is the shim's own cost per call, on the no-op NCCL
// (testdata/noopnccl.c, whose functions return at once): "floor" is one
// bare cgo call (BenchFloor), "raw" the AllReduce trampoline called from Go
// while nothing needs checking (no group open, no record, no non-blocking
// communicator), "c" the same call made directly from a C loop (per call);
// "raw-in-group" and "raw-nonblocking" take the gate's slow paths. raw
// minus floor is what the shim adds to a cgo call (target: at most 15 ns).
func BenchmarkTrampoline(b *testing.B) {
	loadNoop(b)
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if BenchFloor() != 0 {
				b.Fatal("floor")
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := AllReduce(0x1000, 0x1000, 1, 7, 0, 0x100, 0); st.Code != 0 {
				b.Fatal(st)
			}
		}
	})
	b.Run("c", func(b *testing.B) {
		b.ReportAllocs()
		if st := BenchAllReduceLoop(0x1000, 1, 7, 0x100, 0, b.N); st.Code != 0 {
			b.Fatal(st)
		}
	})
	b.Run("compare", func(b *testing.B) {
		// Paired rounds, floor and raw back to back (alternating which
		// goes first), reported as medians over rounds: a shared
		// machine's stalls hit single rounds. shim-ns/op is the median of
		// the rounds' raw - floor.
		const round = 20000
		floor := func(n int) {
			for range n {
				BenchFloor()
			}
		}
		raw := func(n int) {
			for range n {
				AllReduce(0x1000, 0x1000, 1, 7, 0, 0x100, 0)
			}
		}
		loops := [2]func(int){floor, raw}
		var ns [2][]float64
		var diff []float64
		for done, r := 0, 0; done < b.N; r++ {
			n := min(round, b.N-done)
			var t [2]float64
			for k := range 2 {
				i := (r + k) % 2
				t0 := time.Now()
				loops[i](n)
				t[i] = float64(time.Since(t0).Nanoseconds()) / float64(n)
			}
			ns[0], ns[1] = append(ns[0], t[0]), append(ns[1], t[1])
			diff = append(diff, t[1]-t[0])
			done += n
		}
		b.ReportMetric(median(ns[0]), "floor-ns/op")
		b.ReportMetric(median(ns[1]), "raw-ns/op")
		b.ReportMetric(median(diff), "shim-ns/op")
	})
	b.Run("raw-in-group", func(b *testing.B) {
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		GroupStart()
		for b.Loop() {
			if st := AllReduce(0x1000, 0x1000, 1, 7, 0, 0x100, 0); st.Code != 0 {
				b.Fatal(st)
			}
		}
		GroupEnd()
		GroupRelease(GroupTake())
	})
	b.Run("raw-nonblocking", func(b *testing.B) {
		b.ReportAllocs()
		NonBlockingAdd(1)
		defer NonBlockingAdd(-1)
		for b.Loop() {
			if st := AllReduce(0x1000, 0x1000, 1, 7, 0, 0x100, 0); st.Code != 0 {
				b.Fatal(st)
			}
		}
	})
	b.Run("async-error", func(b *testing.B) {
		// A call with a pointer output: 0 allocations with #cgo noescape.
		b.ReportAllocs()
		for b.Loop() {
			if _, st := CommGetAsyncError(0x100); st.Code != 0 {
				b.Fatal(st)
			}
		}
	})
}

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

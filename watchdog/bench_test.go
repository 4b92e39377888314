package watchdog_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/watchdog"
)

// fakeBenchEnv makes BenchmarkWatchedAllReduce load the fake libraries
// into the benchmark's process instead of the real ones.
const fakeBenchEnv = "NCCL4GO_FAKE_BENCH"

// BenchmarkWatchedAllReduce measures what the watchdog adds to a call: an
// in-place all-reduce of one float32 on a one-rank communicator (no GPU
// work, so the host path alone) on a communicator not watched
// ("unwatched") and on one watched ("watched": a call joins the open run
// of its stream, and one cuEventRecord per stream and poll period). "compare" runs both in alternating
// rounds of 256 calls, waiting between rounds for the poller to take the
// events back, and reports the medians (unwatched-ns/op, watched-ns/op) and
// their difference, added-ns/op: the target is at most 60 on an H200.
// allocs/op must be 0. The rounds rotate the order of four communicators:
// the unwatched one, a second unwatched one (the A/A control: aa-ns/op is
// its difference to the first, the spread under which no difference means
// anything), the one watched at the fastest poll (1 ms: the poller's
// work, its asynchronous-error poll included, a hundred times as often as
// by default) and one watched at the default poll interval
// (added-default-ns/op).
//
// On a GPU machine it uses the real libraries; with NCCL4GO_FAKE_BENCH=1
// the fakes, whose event calls take a lock and walk the list of every
// event made (so the more events in flight, the slower: the figure there
// is an upper bound):
//
//	NCCL4GO_FAKE_BENCH=1 go test -run '^$' -bench WatchedAllReduce ./watchdog
func BenchmarkWatchedAllReduce(b *testing.B) {
	if os.Getenv(fakeBenchEnv) == "1" {
		ncclPath, cudaPath := faketest.Libraries(b, faketest.Env{})
		os.Setenv("NCCL4GO_CUDA_LIBRARY", cudaPath)
		if err := cuda.Load(cudaPath); err != nil {
			b.Skipf("cannot load the fake CUDA driver (a driver is loaded already?): %v", err)
		}
		if err := nccl.Load(ncclPath); err != nil {
			b.Skipf("cannot load the fake NCCL: %v", err)
		}
	} else {
		gputest.Require(b)
	}
	mk := func() *nccl.Communicator {
		comms, err := nccl.InitAll([]int{0})
		if err != nil {
			b.Fatalf("InitAll: %v", err)
		}
		return comms[0]
	}
	plain, plain2, watched, watchedDef := mk(), mk(), mk(), mk()
	for _, c := range []*nccl.Communicator{plain, plain2, watched, watchedDef} {
		defer c.Destroy()
	}
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
	w, err := watchdog.Watch(watched, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	wd, err := watchdog.Watch(watchedDef, &watchdog.Options{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer wd.Stop()
	loop := func(c *nccl.Communicator, n int) {
		for range n {
			if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
				b.Fatal(err)
			}
		}
	}
	drain := func() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); (w.Stats().Pending > 0 || wd.Stats().Pending > 0) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	// Warm up: identity, NCCL's first-call setup, the event pool, and the
	// watchdog's queues at the size a burst like the measured one needs
	// (the operations queued between two ticks, and those the device has
	// not finished): they grow to the largest backlog seen and stay, so a
	// short warm-up left their growth in B/op (47 on an H200).
	loop(plain, 1000)
	loop(plain2, 1000)
	loop(watched, 100000)
	loop(watchedDef, 100000)
	drain()

	for _, bc := range []struct {
		name string
		c    *nccl.Communicator
	}{{"unwatched", plain}, {"watched", watched}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			drain()
		})
	}
	b.Run("compare", func(b *testing.B) {
		const round = 256
		// b.N calls in all: rounds of round calls of each kind, so that
		// -benchtime 200000x runs 200000 of each, as the other
		// sub-benchmarks do.
		comms := [4]*nccl.Communicator{plain, plain2, watched, watchedDef}
		var ns [4][]float64
		var added, addedDef, aa []float64
		for done, r := 0, 0; done < b.N; done, r = done+round, r+1 {
			var t [4]float64
			for k := range 4 {
				i := (r + k) % 4
				t0 := time.Now()
				loop(comms[i], round)
				t[i] = float64(time.Since(t0).Nanoseconds()) / round
			}
			for i := range 4 {
				ns[i] = append(ns[i], t[i])
			}
			added, addedDef, aa = append(added, t[2]-t[0]), append(addedDef, t[3]-t[0]), append(aa, t[1]-t[0])
			b.StopTimer()
			drain()
			b.StartTimer()
		}
		b.ReportMetric(median(ns[0]), "unwatched-ns/op")
		b.ReportMetric(median(ns[2]), "watched-ns/op")
		b.ReportMetric(median(added), "added-ns/op")
		b.ReportMetric(median(addedDef), "added-default-ns/op")
		b.ReportMetric(median(aa), "aa-ns/op")
		b.ReportMetric(0, "ns/op")
	})
	if st := w.Stats(); st.Dropped != 0 {
		b.Errorf("watchdog dropped %d operations", st.Dropped)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

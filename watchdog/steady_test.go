package watchdog_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/watchdog"
)

// In steady state the watched path allocates nothing, the poller's ticks
// included: after a warm-up, batches of all-reduces separated by poller
// ticks (so that the backlog a tick finds is bounded by the batch, however
// the ticks are timed) allocate nothing but the runtime's own odd
// allocation. (The poller once started a goroutine and allocated a result
// for every asynchronous-error poll, one per tick: 2 allocations, ~117 B.)
func TestWatchedSteadyStateNoAllocations(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 1)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const batch = 200
		batches := func(n int) (ticks uint64) {
			for range n {
				for range batch {
					if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
						t.Fatal(err)
					}
				}
				p := w.Stats().Polls
				for deadline := time.Now().Add(5 * time.Second); w.Stats().Polls < p+2 && time.Now().Before(deadline); {
					time.Sleep(200 * time.Microsecond)
				}
				ticks += w.Stats().Polls - p
			}
			return ticks
		}
		batches(50) // warm: the pool of events, the queues at their size
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		ticks := batches(100)
		runtime.ReadMemStats(&m1)
		ops := 100 * batch
		bytes, allocs := m1.TotalAlloc-m0.TotalAlloc, m1.Mallocs-m0.Mallocs
		t.Logf("%d ops, %d ticks: %d bytes in %d allocations (stats %+v)", ops, ticks, bytes, allocs, w.Stats())
		// Not 0: the runtime itself allocates now and then (a sudog for a
		// contended mutex, the test's own waiting); the watched path once
		// made 2 allocations per tick, and the queues' growth would show
		// here too.
		if allocs > ticks/4 || bytes > uint64(ops)/2 {
			t.Errorf("steady state: %d bytes in %d allocations over %d watched all-reduces and %d poller ticks; want (almost) none", bytes, allocs, ops, ticks)
		}
		if st := w.Stats(); st.Dropped != 0 || w.Err() != nil {
			t.Errorf("stats %+v, Err %v", st, w.Err())
		}
	})
}

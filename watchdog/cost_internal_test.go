package watchdog

import (
	"runtime"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The README's and the package doc's cost of a watched call: a call that
// follows another on the same stream joins the open run and makes no CUDA
// call of its own; one cuEventRecord per stream and poll period, made by
// the period's first call. Counted in cgo calls (an AllReduce is one), the
// poller driven by hand (a poll interval of a minute keeps the process's
// poller away).
func TestOneEventRecordPerStreamAndPeriod(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.Init(1, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Destroy()
		mem, err := cuda.AllocFrom(0, make([]float32, 8))
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()
		buf := nccl.BufferOf(mem)
		allReduce := func() {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		cgo := func(n int) int64 {
			before := runtime.NumCgoCall()
			for range n {
				allReduce()
			}
			return runtime.NumCgoCall() - before
		}
		cgo(10) // first-call setup
		if got := cgo(1); got != 1 {
			t.Fatalf("unwatched AllReduce: %d cgo calls, want 1", got)
		}
		w, err := Watch(c, &Options{Timeout: time.Hour, PollInterval: time.Minute, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		settle(t, w)
		// tick ends a period; the asynchronous-error poll it starts runs on
		// a goroutine of its own (ncclCommGetAsyncError: cgo calls that are
		// not the calls'), so wait for it.
		tick := func() {
			w.tick()
			settle(t, w)
		}
		cgo(1) // the first period makes its event (cuEventCreate)
		tick()
		for period := 1; period <= 3; period++ {
			if got := cgo(1); got != 2 {
				t.Errorf("period %d: the first watched call made %d cgo calls, want 2 (the call and one cuEventRecord)", period, got)
			}
			if got := cgo(100); got != 100 {
				t.Errorf("period %d: 100 more watched calls made %d cgo calls, want 100 (each joins the open run)", period, got)
			}
			tick()
		}
	})
}

// settle waits until the process's poller has ticked w at least once (it
// does when Watch registers w; with a poll interval of a minute, not again)
// and the asynchronous-error poll that the tick started has ended: from
// then on only the test's own calls and ticks touch w.
func settle(t *testing.T, w *Watchdog) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); w.Stats().Polls == 0 || w.asyncOn.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the poller did not settle in 5 s: %+v", w.Stats())
		}
	}
}

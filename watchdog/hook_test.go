package watchdog_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

// completedOf counts the entries of the communicator named name that the
// dump shows watched and completed, and all its entries.
func completedOf(t *testing.T, name string) (completed, all int) {
	t.Helper()
	d := trace.Default().Snapshot("test")
	var id uint32
	for _, c := range d.Comms {
		if c.Name == name {
			id = c.ID
		}
	}
	for _, e := range d.Entries {
		if e.Comm != id || e.Op != trace.AllReduce {
			continue
		}
		all++
		if e.Watched && e.State == trace.Completed {
			completed++
		}
	}
	return completed, all
}

// A Watch refused because the communicator is already watched hides
// nothing from the watchdog in charge: every operation queued while other
// goroutines try to Watch is followed to completion (the refused Watch
// used to take the observer slot, then give it back).
func TestRefusedWatchHidesNothing(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=8192"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "refused"})
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 10 * time.Second, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const n = 3000
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if w2, err := watchdog.Watch(c, nil); err == nil {
						w2.Stop()
						t.Error("second Watch accepted")
						return
					} else if !strings.Contains(err.Error(), "already watched") {
						t.Errorf("second Watch: %v", err)
						return
					}
				}
			}()
		}
		for range n {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for w.Stats().Pending > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if done, all := completedOf(t, "refused"); done != n || all != n {
			t.Errorf("%d of %d operations (recorded: %d) followed to completion by the watchdog in charge", done, n, all)
		}
		if err := w.Err(); err != nil {
			t.Errorf("watchdog failed: %v", err)
		}
	})
}

// Once stopped, a watchdog leaves the communicator's operations alone:
// their entries are not watched, so a dump reads them "enqueued", never
// stuck.
func TestStoppedWatchdogWatchesNothing(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "stopped"})
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 10 * time.Second, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		d := trace.Default().Snapshot("test")
		for _, e := range d.Entries {
			if e.Op == trace.AllReduce && e.Watched {
				t.Errorf("entry watched after Stop: %+v", e)
			}
		}
		// Watch again works, and follows again.
		w, err = watchdog.Watch(c, &watchdog.Options{Timeout: 10 * time.Second, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for w.Stats().Pending > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if done, all := completedOf(t, "stopped"); done != 1 || all != 2 {
			t.Errorf("%d of %d AllReduces watched and completed; want 1 of 2", done, all)
		}
	})
}

// A lifecycle operation that hangs (a Split on a non-blocking communicator
// whose job never ends) is what the watchdog blames, not the collective
// before it, which completed.
func TestHungSplitBlamed(t *testing.T) {
	for _, hang := range []string{"ncclCommSplit", "ncclCommFinalize"} {
		faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=" + hang}}, func(t *testing.T) {
			c := oneRank(t, &nccl.Config{Blocking: nccl.Ptr(false)})
			if err := c.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			buf := floats(t, 4)
			failed := make(chan error, 1)
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond, NoDump: true,
				OnFailure: func(err error) { failed <- err }})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := trace.Split
			if hang == "ncclCommSplit" {
				if _, err := c.Split(0, 0, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				want = trace.Finalize
				if err := c.Finalize(); err != nil {
					t.Fatal(err)
				}
			}
			var got error
			select {
			case got = <-failed:
			case <-time.After(10 * time.Second):
				t.Fatal("no timeout reported for the hung " + want.String())
			}
			te, ok := got.(*watchdog.TimeoutError)
			if !ok || te.Op.Op != want {
				t.Fatalf("watchdog reported %v; want a timeout of the %v", got, want)
			}
			if want == trace.Split && te.Op.Seq != 2 {
				t.Errorf("the Split's seq %d, want 2", te.Op.Seq)
			}
		})
	}
}

// A watchdog stopped while operations are in flight (their events never
// complete here) gives them up: a later dump reads them "enqueued", not
// stuck (they were watched, and nobody would complete them).
func TestStopGivesUpPending(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64", "FAKE_CUDA_EVENT_HANG=0"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "given-up"})
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Hour, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		watched := 0
		for _, e := range trace.Default().Snapshot("test").Entries {
			if e.Op == trace.AllReduce && e.Watched {
				watched++
			}
		}
		if watched != 3 {
			t.Fatalf("%d AllReduces watched while the watchdog runs, want 3", watched)
		}
		time.Sleep(20 * time.Millisecond) // let the poller start the first
		w.Stop()
		d := trace.Default().Snapshot("test")
		for _, e := range d.Entries {
			if e.Op == trace.AllReduce && e.Watched && e.State != trace.Completed {
				t.Errorf("entry left watched and not completed after Stop: %+v", e)
			}
		}
	})
}

package nccl_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// panicHook panics in Queued once.
type panicHook struct{ armed bool }

func (h *panicHook) Queued(nccl.QueuedOp) {
	if h.armed {
		h.armed = false
		panic("hook failed")
	}
}
func (h *panicHook) GroupEnded() {}

// TestAddHookBadInput: a nil communicator, a destroyed one, removes run
// concurrently and after Destroy, and a hook that panics: typed errors,
// no panic of the binding's own, and the communicator stays usable.
func TestAddHookBadInput(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		var nilComm *nccl.Communicator
		if _, err := nilComm.AddHook(&countHook{}); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("AddHook on a nil *Communicator = %v, want ErrNotInitialized", err)
		}
		c := fakeComm(t, 1, 0, nil)
		buf := collBuf(t, 0, f32s(4)...)
		h := &countHook{}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() { defer wg.Done(); remove() }()
		}
		wg.Wait()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		if h.n() != 0 {
			t.Errorf("a removed hook was told %d times", h.n())
		}
		// A hook that panics: the panic reaches the caller, and the
		// communicator's lock is not left held.
		p := &panicHook{armed: true}
		rp, err := c.AddHook(p)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the hook's panic did not reach the caller")
				}
			}()
			c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{})
		}()
		done := make(chan error, 1)
		go func() { done <- c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}) }()
		if err := <-done; err != nil {
			t.Errorf("AllReduce after a hook panicked: %v", err)
		}
		rp()
		r2, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		r2() // after Destroy: nothing to do, no panic
		if _, err := c.AddHook(h); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("AddHook after Destroy = %v, want ErrClosed", err)
		}
	})
}

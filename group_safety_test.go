package nccl_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Tests of what must not happen while NCCL holds a communicator's work in
// a group, or after Finalize: freeing it under NCCL, or new work on it.

func wantUsage(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, nccl.ErrInvalidUsage) {
		t.Errorf("%s: %v, want ErrInvalidUsage", what, err)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q lacks %q", what, err, w)
		}
	}
}

// openGroupElsewhere runs fn in a Group on another goroutine and returns
// once fn has returned, with that group still open; end lets the group end
// and returns its error.
func openGroupElsewhere(t *testing.T, fn func() error) (end func() error) {
	t.Helper()
	inGroup, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- nccl.Group(func() error {
			err := fn()
			close(inGroup)
			<-release
			return err
		})
	}()
	<-inGroup
	return func() error {
		close(release)
		return <-done
	}
}

// Inside a group NCCL would defer Finalize, Destroy and Abort to the
// group's end, after the binding freed what they write: refused.
func TestLifecycleInsideGroupRefused(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := nccl.Group(func() error {
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				return err
			}
			wantUsage(t, "Finalize in a group", c.Finalize(), "inside a group")
			wantUsage(t, "Destroy in a group", c.Destroy(), "inside a group")
			wantUsage(t, "Abort in a group", c.Abort(), "inside a group")
			return nil
		})
		if err != nil {
			t.Fatalf("Group: %v", err)
		}
		noNCCLCall(t, "ncclCommFinalize")
		noNCCLCall(t, "ncclCommDestroy")
		noNCCLCall(t, "ncclCommAbort")
		// After the group all three work.
		if err := c.Finalize(); err != nil {
			t.Errorf("Finalize after the group: %v", err)
		}
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy after the group: %v", err)
		}
	})
}

// Another goroutine's open group holds work of the communicator: Abort and
// Destroy refuse at once (they neither free it under the group nor wait).
func TestAbortWhileAnotherGroupHoldsCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		end := openGroupElsewhere(t, func() error { return c.AllReduce(b, b, nccl.Sum, cuda.Stream{}) })
		wantUsage(t, "Abort during another goroutine's group", c.Abort(), "group another goroutine has not ended")
		wantUsage(t, "Destroy during another goroutine's group", c.Destroy(), "group another goroutine has not ended")
		if err := end(); err != nil {
			t.Fatalf("Group: %v", err)
		}
		noNCCLCall(t, "ncclCommAbort")
		if err := c.Abort(); err != nil {
			t.Errorf("Abort after the group ended: %v", err)
		}
	})
}

// A finalized communicator takes no new work: NCCL would accept it, and
// Destroy frees the communicator under it.
func TestNoOperationsAfterFinalize(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		if err := c.Finalize(); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"AllReduce": c.AllReduce(b, b, nccl.Sum, cuda.Stream{}),
			"Send":      c.Send(b, 1, cuda.Stream{}),
		} {
			if !errors.Is(err, nccl.ErrClosed) || !strings.Contains(err.Error(), "finalized") {
				t.Errorf("%s after Finalize: %v, want ErrClosed naming the finalize", name, err)
			}
		}
		if _, err := c.RegisterBuffer(b); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("RegisterBuffer after Finalize: %v, want ErrClosed", err)
		}
		noNCCLCall(t, "ncclAllReduce")
		noNCCLCall(t, "ncclSend")
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy after Finalize: %v", err)
		}
	})
}

// GroupEnd closes only a level GroupStart opened; Group ends a GroupStart
// its function left open, and says so.
func TestGroupEndMatchesGroupStart(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := nccl.Group(func() error {
			wantUsage(t, "GroupEnd inside Group", nccl.GroupEnd(), "opened by Group")
			// Group's level is still open: the send to self still matches
			// its receive at the group's end.
			if err := c.Send(b, 0, cuda.Stream{}); err != nil {
				return err
			}
			return c.Recv(b, 0, cuda.Stream{})
		})
		if err != nil {
			t.Fatalf("Group: %v", err)
		}
		// Manual nesting inside Group is fine when balanced.
		err = nccl.Group(func() error {
			if err := nccl.GroupStart(); err != nil {
				return err
			}
			return nccl.GroupEnd()
		})
		if err != nil {
			t.Errorf("balanced GroupStart/GroupEnd inside Group: %v", err)
		}
		err = nccl.Group(func() error { return nccl.GroupStart() })
		wantUsage(t, "GroupStart left open inside Group", err, "without its GroupEnd")
		wantUsage(t, "GroupEnd after Group", nccl.GroupEnd(), "not in a group")
		_, err = nccl.GroupSimulate(func() error { return nccl.GroupEnd() })
		wantUsage(t, "GroupEnd inside GroupSimulate", err, "opened by Group")
		wantUsage(t, "GroupEnd after GroupSimulate", nccl.GroupEnd(), "not in a group")
	})
}

// Abort during a blocking init (which NCCL gives no handle to) does not
// return nil and forget it: the init aborts the communicator once NCCL
// returns it.
func TestAbortDuringBlockingInit(t *testing.T) {
	collFake(t, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		var c nccl.Communicator
		done := make(chan error, 1)
		go func() { done <- c.Initialize(1, 0, id, nil) }()
		time.Sleep(100 * time.Millisecond) // the init sleeps 400 ms in the fake
		if err := c.Abort(); !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("Abort during a blocking init: %v, want ErrInProgress", err)
		}
		err = <-done
		if !errors.Is(err, nccl.ErrClosed) || !strings.Contains(err.Error(), "Abort was called during the init") {
			t.Errorf("Initialize after an Abort: %v, want ErrClosed naming the Abort", err)
		}
		if _, err := c.NRanks(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("NRanks after the init aborted: %v, want ErrClosed", err)
		}
		// A later Abort request does not outlive its init.
		var d nccl.Communicator
		if err := d.Initialize(1, 0, id, nil); err != nil {
			t.Fatalf("a second Initialize: %v", err)
		}
		d.Destroy()
	}, "FAKE_NCCL_INIT_DELAY_MS=400")
}

// While one goroutine's open group holds a communicator's queue (here with
// a Split), another goroutine cannot queue work on it, in a group or not
// (NCCL's queue of a communicator belongs to one group); the Split stays
// pending until its own group ends.
func TestOtherGoroutineCannotQueueIntoHeldCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		p := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		var child *nccl.Communicator
		end := openGroupElsewhere(t, func() error {
			var err error
			child, err = p.Split(0, 0, nil)
			return err
		})
		wantUsage(t, "a group queueing on the held communicator",
			nccl.Group(func() error { return p.AllReduce(b, b, nccl.Sum, cuda.Stream{}) }), "another goroutine's open group")
		wantUsage(t, "a call queueing on the held communicator",
			p.AllReduce(b, b, nccl.Sum, cuda.Stream{}), "another goroutine's open group")
		if n, err := p.NRanks(); err != nil || n != 1 {
			t.Errorf("NRanks of the held communicator: %d, %v (queries queue nothing)", n, err)
		}
		_, errBefore := child.NRanks()
		before := fmt.Sprint(errBefore)
		if !errors.Is(errBefore, nccl.ErrInProgress) {
			t.Errorf("child's NRanks while its group is open: %v, want ErrInProgress", errBefore)
		}
		if err := end(); err != nil {
			t.Fatalf("Group with Split: %v", err)
		}
		n, err := child.NRanks()
		if err != nil || n != 1 {
			t.Fatalf("child after its group ended: NRanks %d, %v (before it ended: %s)", n, err, before)
		}
		t.Logf("child's NRanks while its group was open: %s", before)
		if err := child.Destroy(); err != nil {
			t.Errorf("child Destroy: %v", err)
		}
		if err := p.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("AllReduce after the group ended: %v", err)
		}
	})
}

// A child made by Split in one group is usable in a later group that also
// uses the parent, from this goroutine and from another.
func TestSplitChildInLaterGroup(t *testing.T) {
	collFake(t, func(t *testing.T) {
		p := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		var child *nccl.Communicator
		if err := nccl.Group(func() error {
			var err error
			child, err = p.Split(0, 0, nil)
			return err
		}); err != nil {
			t.Fatalf("Group with Split: %v", err)
		}
		defer child.Destroy()
		step := func() error {
			return nccl.Group(func() error {
				return errors.Join(p.AllReduce(b, b, nccl.Sum, cuda.Stream{}), child.AllReduce(b, b, nccl.Sum, cuda.Stream{}))
			})
		}
		if err := step(); err != nil {
			t.Errorf("a later group over the parent and the child: %v", err)
		}
		done := make(chan error)
		go func() { done <- step() }()
		if err := <-done; err != nil {
			t.Errorf("the same from another goroutine: %v", err)
		}
	})
}

// GroupSimulate ends a GroupStart its function left open, says so, and
// leaves no group open and no hold on the communicator.
func TestGroupSimulateEndsUnmatchedGroupStart(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		_, err := nccl.GroupSimulate(func() error {
			if err := nccl.GroupStart(); err != nil {
				return err
			}
			return c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
		})
		wantUsage(t, "GroupSimulate with a GroupStart left open", err, "without its GroupEnd")
		wantUsage(t, "GroupEnd after GroupSimulate", nccl.GroupEnd(), "not in a group")
		done := make(chan error)
		go func() { done <- c.AllReduce(b, b, nccl.Sum, cuda.Stream{}) }()
		if err := <-done; err != nil {
			t.Errorf("AllReduce from another goroutine after the simulation: %v", err)
		}
	})
}

// After Finalize no child can be made; after Revoke collectives are
// refused and Finalize is not allowed, but Split still works.
func TestFinalizedAndRevoked(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		if err := c.Finalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Split(0, 0, nil); !errors.Is(err, nccl.ErrClosed) || !strings.Contains(err.Error(), "finalized") {
			t.Errorf("Split after Finalize: %v, want ErrClosed", err)
		}
		noNCCLCall(t, "ncclCommSplit")

		r := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		if err := r.Revoke(0); err != nil {
			t.Fatal(err)
		}
		if err := r.AllReduce(b, b, nccl.Sum, cuda.Stream{}); !errors.Is(err, nccl.ErrClosed) || !strings.Contains(err.Error(), "revoked") {
			t.Errorf("AllReduce after Revoke: %v, want ErrClosed naming the revoke", err)
		}
		wantUsage(t, "Finalize after Revoke", r.Finalize(), "revoked")
		child, err := r.Split(0, 0, nil)
		if err != nil {
			t.Fatalf("Split after Revoke: %v", err)
		}
		if err := child.Destroy(); err != nil {
			t.Errorf("child Destroy: %v", err)
		}
		if err := r.Destroy(); err != nil {
			t.Errorf("Destroy after Revoke: %v", err)
		}
	})
}

// Groups of other goroutines end while this goroutine's group makes Split
// children and windows on the same communicator (or is refused, when
// another group holds it): a child or window never settles before its own
// group's end.
func TestGroupOutputsUnderConcurrentGroups(t *testing.T) {
	collFake(t, func(t *testing.T) {
		p := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		mem := mustMemAlloc[float32](t, 0, 1024)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					nccl.Group(func() error { return p.AllReduce(b, b, nccl.Sum, cuda.Stream{}) })
				}
			}()
		}
		made := 0
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			var child *nccl.Communicator
			var w *nccl.Window
			err := nccl.Group(func() error {
				var err error
				if child, err = p.Split(0, 0, nil); err != nil {
					return err
				}
				if w, err = p.RegisterWindow(nccl.BufferOf(mem), 0); err != nil {
					return err
				}
				time.Sleep(20 * time.Microsecond) // let the other groups end meanwhile
				if _, err := child.NRanks(); !errors.Is(err, nccl.ErrInProgress) {
					t.Errorf("Split child settled inside its own open group: %v", err)
				}
				return nil
			})
			if err != nil {
				if !errors.Is(err, nccl.ErrInvalidUsage) {
					t.Fatalf("group: %v", err)
				}
				continue // another goroutine's group held p
			}
			made++
			if n, err := child.NRanks(); err != nil || n != 1 {
				t.Errorf("child after its group: %d, %v", n, err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("window Close: %v", err)
			}
			child.Destroy()
		}
		stop.Store(true)
		wg.Wait()
		if made == 0 {
			t.Error("no group of Split and RegisterWindow went through in 1 s")
		}
		t.Logf("%d groups with a Split and a window", made)
	})
}

// A Finalize that NCCL fails does not stop Destroy from freeing the
// communicator (only the binding's own group refusals do).
func TestDestroyAfterFailedFinalize(t *testing.T) {
	collFake(t, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.Init(2, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("Destroy with a failing finalize: %v, want NCCL's invalid usage reported", err)
		}
		if c.IsValid() {
			t.Error("Destroy left the communicator allocated after NCCL failed its finalize")
		}
	}, "FAKE_NCCL_FAIL=ncclCommFinalize=5")
}

// No device communicator after Finalize or Revoke.
func TestDevCommAfterFinalizeOrRevoke(t *testing.T) {
	collFake(t, func(t *testing.T) {
		f := collComm(t, 2, 0, 0)
		if err := f.Finalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.CreateDevComm(nil); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("CreateDevComm after Finalize: %v, want ErrClosed", err)
		}
		r := collComm(t, 2, 0, 0)
		if err := r.Revoke(0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.CreateDevComm(nil); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("CreateDevComm after Revoke: %v, want ErrClosed", err)
		}
		noNCCLCall(t, "ncclDevCommCreate")
	})
}

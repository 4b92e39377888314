package nccl_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/spin"
)

// race runs a and b at the same instant on two goroutines: each spins
// until both run (a channel's wake-up would start one several µs late).
func race(a, b func()) {
	var ready atomic.Int32
	var wg sync.WaitGroup
	wg.Add(2)
	run := func(f func()) {
		defer wg.Done()
		ready.Add(1)
		for i := 0; ready.Load() < 2; i++ {
			if i > 1000 { // the other one is not running: let it
				spin.Yield()
			}
		}
		f()
	}
	go run(a)
	go run(b)
	wg.Wait()
}

// jitter spins for a time that varies with i, so that a race's two sides
// meet at different points of each other over the rounds.
func jitter(i int) {
	n := (i * 7919) % 3000
	x := 0
	for j := range n {
		x += j
	}
	sink = x
}

var sink int

// rawComm is a one-rank communicator of the fake, without a cleanup (the
// tests release it themselves).
func rawComm(t *testing.T) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Of two concurrent AbortCause calls exactly one aborts, and the cause the
// communicator keeps is that call's (a cause passed through a field could
// be the other caller's).
func TestAbortCauseConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for i := range 10000 {
			c := rawComm(t)
			ca, cb := fmt.Errorf("cause A %d", i), fmt.Errorf("cause B %d", i)
			var ea, eb error
			race(func() { ea = c.AbortCause(ca) }, func() { eb = c.AbortCause(cb) })
			if (ea == nil) == (eb == nil) {
				t.Fatalf("round %d: AbortCause returned %v and %v; want exactly one nil", i, ea, eb)
			}
			winner, loser := ca, cb
			if eb == nil {
				winner, loser = cb, ca
			}
			if _, err := c.NRanks(); !errors.Is(err, winner) || errors.Is(err, loser) {
				t.Fatalf("round %d: after the abort: %v; want the cause of the call that aborted (%v)", i, err, winner)
			}
			if err := errors.Join(ea, eb); !errors.Is(err, nccl.ErrClosed) {
				t.Fatalf("round %d: the refused AbortCause: %v; want ErrClosed", i, err)
			}
		}
	})
}

// Of two concurrent Aborts, or a Destroy and an Abort, exactly one
// reports success.
func TestReleaseRaceOneSuccess(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for i := range 10000 {
			c := rawComm(t)
			var ea, eb error
			if i%2 == 0 {
				race(func() { ea = c.Abort() }, func() { eb = c.Abort() })
			} else {
				race(func() { ea = c.Destroy() }, func() { eb = c.Abort() })
			}
			if (ea == nil) == (eb == nil) {
				t.Fatalf("round %d: %v and %v; want exactly one nil", i, ea, eb)
			}
			if err := errors.Join(ea, eb); !errors.Is(err, nccl.ErrClosed) {
				t.Fatalf("round %d: the losing call: %v; want ErrClosed", i, err)
			}
		}
	})
}

// RegisterWindow and CreateDevComm racing Destroy return a window (device
// communicator) or an error, never (nil, nil): a Destroy that closes the
// new resource while its creation waits (a non-blocking communicator, in
// the ...Context variants) makes the creation fail with ErrClosed.
func TestCreateRacingDestroy(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_LSA_TEAMS=1"}}, func(t *testing.T) {
		buf := nccl.BufferOf(mustMemAlloc[float32](t, 0, 1024))
		for i := range 20000 {
			c := rawComm(t)
			if _, err := c.TraceComm(); err != nil { // the slow first-use path, out of the race
				t.Fatal(err)
			}
			var (
				w    *nccl.Window
				d    *nccl.DevComm
				err  error
				derr error
			)
			if i%2 == 0 {
				race(func() { w, err = c.RegisterWindowContext(t.Context(), buf, 0) }, func() { jitter(i); derr = c.Destroy() })
				if w == nil && err == nil {
					t.Fatalf("round %d: RegisterWindow racing Destroy returned (nil, nil)", i)
				}
			} else {
				race(func() { d, err = c.CreateDevCommContext(t.Context(), nil) }, func() { jitter(i); derr = c.Destroy() })
				if d == nil && err == nil {
					t.Fatalf("round %d: CreateDevComm racing Destroy returned (nil, nil)", i)
				}
			}
			if derr != nil {
				t.Fatalf("round %d: Destroy: %v", i, derr)
			}
			if err != nil && !errors.Is(err, nccl.ErrClosed) && !errors.Is(err, nccl.ErrNotInitialized) {
				t.Fatalf("round %d: %v; want ErrClosed", i, err)
			}
		}
	})
}

// A Split child dropped by the program while NCCL is still creating it is
// reported as a leak, and aborted by its parent's release, so that nothing
// of it stays alive in NCCL.
func TestDroppedPendingChild(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=3"}}, func(t *testing.T) {
		leaks := make(chan nccl.Leak, 4)
		nccl.SetLeakHandler(func(l nccl.Leak) { leaks <- l })
		defer nccl.SetLeakHandler(nil)
		parent := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		func() {
			child, err := parent.Split(0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = child // dropped while pending
		}()
		var got nccl.Leak
		for i := 0; i < 50 && got.Stack == ""; i++ {
			runtime.GC()
			select {
			case got = <-leaks:
			case <-time.After(20 * time.Millisecond):
			}
		}
		if got.Stack == "" {
			t.Fatal("no leak reported for a dropped pending child")
		}
		if got.Op != "Split" || !containsAny(got.Stack, "TestDroppedPendingChild") {
			t.Errorf("leak %+v; want the Split that made it, with its stack", got)
		}
		if err := parent.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := parent.Destroy(); err != nil {
			t.Fatal(err)
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive after the parent's Destroy; want 0 (the dropped child aborted)", n)
		}
	})
}

// A Split whose parent breaks while NCCL's job still runs (a peer failed)
// fails, and the child the job stores later is aborted with the parent,
// not left alive in NCCL.
func TestSplitFailsWhileJobRuns(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=1", "FAKE_NCCL_ASYNC_FAIL=ncclCommSplit=6", "FAKE_NCCL_ASYNC_EARLY=2"}}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		parent, err := nccl.InitContext(t.Context(), 2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		child, err := parent.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Wait(t.Context()); !errors.Is(err, nccl.ErrRemote) {
			t.Fatalf("Wait on the child: %v, want ErrRemote", err)
		}
		if child.IsValid() {
			t.Fatal("the failed child is valid")
		}
		// NCCL's job ends now, storing the child.
		for range 3 {
			parent.AsyncError()
		}
		if n := faketest.LiveComms(t); n != 2 {
			t.Fatalf("%d communicators of the fake alive; want 2 (the parent and the child its job stored late)", n)
		}
		if err := parent.Abort(); err != nil {
			t.Fatal(err)
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive after the parent's Abort; want 0 (the late child aborted)", n)
		}
	})
}

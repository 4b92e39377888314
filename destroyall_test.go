package nccl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// The fake's finalize waits for the other ranks of its communicator in this
// process, as NCCL 2.31.0a16 was measured to (issue #21): a wait it gives up
// after FAKE_NCCL_FINALIZE_WAIT_MS, saying real NCCL would have hung.
var finalizeWaits = []string{"FAKE_NCCL_FINALIZE_WAITS_PEERS=1", "FAKE_NCCL_FINALIZE_WAIT_MS=200"}

// initAll is nccl.InitAll(devices), failing the test on an error.
func initAll(t *testing.T, devices ...int) []*nccl.Communicator {
	t.Helper()
	comms, err := nccl.InitAll(devices)
	if err != nil {
		t.Fatalf("InitAll(%v): %v", devices, err)
	}
	return comms
}

// wantWouldHang checks that err is the fake's report of a finalize that
// real NCCL would not have returned from.
func wantWouldHang(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "would have hung") {
		t.Fatalf("%s: %v; want the fake's report that ncclCommFinalize would have hung", what, err)
	}
}

// wantAllDestroyed checks that none of comms is valid any more and the fake
// holds no communicator.
func wantAllDestroyed(t *testing.T, comms []*nccl.Communicator) {
	t.Helper()
	for i, c := range comms {
		if c.IsValid() {
			t.Errorf("communicator %d still valid", i)
		}
	}
	if n := faketest.LiveComms(t); n != 0 {
		t.Errorf("%d communicator(s) of the fake alive; want 0", n)
	}
}

// The rule is modelled: destroying InitAll's ranks one after the other from
// one goroutine is what hung on 2.31.0a16; the fake reports it.
func TestDestroyLoopWouldHangWhenFinalizeWaitsForPeers(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: finalizeWaits}, func(t *testing.T) {
		comms := initAll(t, 0, 1)
		wantWouldHang(t, "Destroy of rank 0 before rank 1 is finalized", comms[0].Destroy())
		if err := comms[1].Destroy(); err != nil { // its only peer is gone
			t.Fatalf("Destroy of rank 1: %v", err)
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive; want 0", n)
		}
	})
}

// The rule is on by default for the fake's 2.31+ releases, off for 2.30.7
// (whose finalize did not wait: the same loop passed on the H200).
func TestFinalizeWaitsForPeersByRelease(t *testing.T) {
	for _, tc := range []struct {
		release int
		hangs   bool
	}{{23007, false}, {23100, true}, {23203, true}} {
		faketest.Run(t, faketest.Env{Release: tc.release, Extra: []string{"FAKE_NCCL_FINALIZE_WAIT_MS=200"}}, func(t *testing.T) {
			comms := initAll(t, 0, 1)
			err := comms[0].Destroy()
			if tc.hangs {
				wantWouldHang(t, "Destroy loop", err)
			} else if err != nil {
				t.Fatalf("Destroy of rank 0: %v", err)
			}
			if err := comms[1].Destroy(); err != nil {
				t.Fatalf("Destroy of rank 1: %v", err)
			}
		})
	}
}

// Ranks driven by goroutines of their own finalize together: the rule
// makes each wait for the other, not fail.
func TestConcurrentDestroyWithFinalizeWaitingForPeers(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FINALIZE_WAITS_PEERS=1", "FAKE_NCCL_FINALIZE_WAIT_MS=5000", "NCCL_MULTI_RANK_GPU_ENABLE=1"}}, func(t *testing.T) {
		comms := initAll(t, 0, 1, 0)
		errs := make(chan error, len(comms))
		for _, c := range comms {
			go func() { errs <- c.Destroy() }()
		}
		for range comms {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive; want 0", n)
		}
	})
}

// DestroyAll finalizes InitAll's ranks in one group, so the rule that hangs
// a loop of Destroy lets it through, and leaves nothing behind: no
// communicator of the fake, no group hold, and a flight recorder whose
// Finalize entries of the ranks belong to one group.
func TestDestroyAll(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FINALIZE_WAITS_PEERS=1", "FAKE_NCCL_FINALIZE_WAIT_MS=5000", "NCCL_MULTI_RANK_GPU_ENABLE=1"}}, func(t *testing.T) {
		comms := initAll(t, 0, 0, 1)
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Fatalf("DestroyAll: %v", err)
		}
		for i, c := range comms {
			if c.IsValid() {
				t.Errorf("communicator %d still valid", i)
			}
			if err := c.Destroy(); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Destroy of communicator %d after DestroyAll: %v, want ErrClosed", i, err)
			}
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive; want 0", n)
		}
		if d, n := capi.GroupDepth(), capi.GroupRecords(); d != 0 || n != 0 {
			t.Errorf("group depth %d, %d group record(s) after DestroyAll; want 0, 0", d, n)
		}
		groups := map[uint64]int{}
		destroys := 0
		for _, e := range trace.Default().Snapshot("test").Entries {
			switch e.Op {
			case trace.Finalize:
				groups[e.Group]++
			case trace.Destroy:
				destroys++
			}
		}
		if n, one := groups[maxKey(groups)], len(groups) == 1; !one || n != len(comms) || groups[0] != 0 {
			t.Errorf("Finalize entries by group id %v; want all %d in one group", groups, len(comms))
		}
		if destroys != len(comms) {
			t.Errorf("%d Destroy entries recorded; want %d", destroys, len(comms))
		}
	})
}

// DestroyAll skips nil, null, repeated and already destroyed entries
// without error, and destroys non-blocking communicators (finalized one
// after the other without waiting) beside blocking ones.
func TestDestroyAllMixed(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: finalizeWaits}, func(t *testing.T) {
		blocking := initAll(t, 0, 1)
		gone := initAll(t, 0)[0]
		if err := gone.Destroy(); err != nil {
			t.Fatal(err)
		}
		aborted := initAll(t, 1)[0]
		if err := aborted.Abort(); err != nil {
			t.Fatal(err)
		}
		id := newFakeID(t)
		nb := make([]*nccl.Communicator, 2)
		for r := range nb {
			c, err := nccl.InitContext(t.Context(), 2, r, id, &nccl.Config{Blocking: nccl.Ptr(false), Device: nccl.Ptr(r)})
			if err != nil {
				t.Fatal(err)
			}
			nb[r] = c
		}
		var null nccl.Communicator
		err := nccl.DestroyAll(nil, &null, gone, nb[0], blocking[0], blocking[0], aborted, nb[1], blocking[1], nil)
		if err != nil {
			t.Fatalf("DestroyAll: %v", err)
		}
		wantAllDestroyed(t, append(blocking, nb...))
		if err := nccl.DestroyAll(); err != nil {
			t.Errorf("DestroyAll(): %v", err)
		}
	})
}

// DestroyAll's errors name each communicator's index; the others are
// destroyed all the same.
func TestDestroyAllNamesFailures(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: append([]string{"FAKE_NCCL_FAIL=ncclCommDestroy=3@2", "NCCL_MULTI_RANK_GPU_ENABLE=1"}, finalizeWaits...)}, func(t *testing.T) {
		comms := initAll(t, 0, 1, 0)
		err := nccl.DestroyAll(comms...)
		if err == nil || !strings.Contains(err.Error(), "DestroyAll: communicator 1:") || strings.Contains(err.Error(), "communicator 0:") ||
			strings.Contains(err.Error(), "communicator 2:") || !errors.Is(err, nccl.ErrInternal) {
			t.Fatalf("DestroyAll: %v; want the failure of communicator 1's ncclCommDestroy, named by its index", err)
		}
		wantAllDestroyed(t, comms)
	})
}

// Inside a group DestroyAll refuses and destroys nothing: NCCL would defer
// the finalizes to the group's end.
func TestDestroyAllInsideGroup(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: finalizeWaits}, func(t *testing.T) {
		comms := initAll(t, 0, 1)
		err := nccl.Group(func() error { return nccl.DestroyAll(comms...) })
		if !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Fatalf("DestroyAll inside Group: %v, want ErrInvalidUsage", err)
		}
		for i, c := range comms {
			if !c.IsValid() {
				t.Errorf("communicator %d destroyed by a refused DestroyAll", i)
			}
		}
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Fatalf("DestroyAll after the group: %v", err)
		}
	})
}

func maxKey(m map[uint64]int) uint64 {
	var k uint64
	for g := range m {
		k = max(k, g)
	}
	return k
}

// DestroyAllContext bounds the wait for non-blocking communicators whose
// finalize never completes: when ctx ends they are aborted, and the error
// says why.
func TestDestroyAllContextAbortsNonBlocking(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=ncclCommFinalize"}}, func(t *testing.T) {
		id := newFakeID(t)
		nb := make([]*nccl.Communicator, 2)
		for r := range nb {
			c, err := nccl.InitContext(t.Context(), 2, r, id, &nccl.Config{Blocking: nccl.Ptr(false), Device: nccl.Ptr(r)})
			if err != nil {
				t.Fatal(err)
			}
			nb[r] = c
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err := nccl.DestroyAllContext(ctx, nb...)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "communicator 0:") ||
			!strings.Contains(err.Error(), "communicator 1:") {
			t.Fatalf("DestroyAllContext: %v; want the deadline, for communicators 0 and 1", err)
		}
		wantAllDestroyed(t, nb)
		// Both finalizes were issued before the first wait ended in an abort.
		finalizes := 0
		for _, l := range faketest.LogLines(t) {
			if l == "ncclCommFinalize" {
				finalizes++
			}
			if l == "ncclCommAbort" && finalizes != 2 {
				t.Fatalf("ncclCommAbort after %d ncclCommFinalize call(s); want both finalizes issued first", finalizes)
			}
		}
	})
}

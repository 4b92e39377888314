package nccl_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CPU tests of lifecycle.go on the fake libraries (internal/faketest): each
// scenario runs in a child process that loads fake NCCL and CUDA.

func nonBlocking(cfg *nccl.Config) bool { return cfg != nil && cfg.Blocking != nil && !*cfg.Blocking }

func TestFakeSplit(t *testing.T) {
	for _, polls := range []string{"0", "3"} {
		faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=" + polls}}, func(t *testing.T) {
			parent := fakeComm(t, 3, 1, nil)
			child, err := parent.Split(0, 2, nil)
			if err != nil {
				t.Fatalf("Split: %v", err)
			}
			if !child.IsValid() {
				t.Fatalf("child %v not valid", child)
			}
			if n, r := identity(t, child); n != 3 || r != 2 {
				t.Errorf("child rank %d/%d, want 2/3 (the fake ranks by key)", r, n)
			}
			if d, _ := child.Device(); d != 0 {
				t.Errorf("child on %v", d)
			}
			none, err := parent.Split(nccl.NoColor, 0, nil)
			if err != nil || none == nil || none.IsValid() || none.Handle() != 0 {
				t.Fatalf("Split(NoColor) = %v, %v; want a null communicator", none, err)
			}
			if _, err := none.NRanks(); !errors.Is(err, nccl.ErrNotInitialized) {
				t.Errorf("NRanks of the NoColor communicator: %v", err)
			}
			if err := none.Destroy(); err != nil {
				t.Errorf("Destroy of the NoColor communicator: %v", err)
			}
			// A child with its own config, blocking by default.
			c2, err := parent.Split(1, 0, &nccl.Config{Device: nccl.Ptr(0), CommName: "child"})
			if err != nil {
				t.Fatalf("Split with a config: %v", err)
			}
			if err := c2.Destroy(); err != nil {
				t.Errorf("Destroy c2: %v", err)
			}
			if err := child.Destroy(); err != nil {
				t.Errorf("Destroy child: %v", err)
			}
			if err := parent.Destroy(); err != nil {
				t.Errorf("Destroy parent: %v", err)
			}
			if _, err := parent.Split(0, 0, nil); !errors.Is(err, nccl.ErrClosed) || !errors.Is(err, nccl.ErrNotInitialized) {
				t.Errorf("Split after Destroy: %v, want ErrClosed", err)
			}
		})
	}
}

func TestFakeSplitBadInput(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.Split(-5, 0, nil)
		wantArg(t, "color -5", err, "color")
		_, err = c.Split(0, 0, &nccl.Config{Device: nccl.Ptr(1)})
		wantArg(t, "device of another GPU", err, "Config.Device")
		_, err = c.Split(0, 0, &nccl.Config{MinCTAs: nccl.Ptr(0)})
		wantArg(t, "bad config", err, "Config.MinCTAs")
		var null nccl.Communicator
		if _, err := null.Split(0, 0, nil); !errors.Is(err, nccl.ErrNotInitialized) || !strings.HasPrefix(err.Error(), "nccl: Split: ") {
			t.Errorf("Split on a null communicator: %v", err)
		}
		var nilc *nccl.Communicator
		if _, err := nilc.Split(0, 0, nil); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("Split on nil: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 21704, Version: 21901}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.Split(0, 0, nil)
		wantUnsupported(t, "Split on 2.17", err, "ncclCommSplit", 21801)
	})
}

// A split that NCCL fails asynchronously: the child NCCL stored is aborted.
func TestFakeSplitFails(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_ASYNC_FAIL=ncclCommSplit=6", "FAKE_NCCL_POLLS=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		child, err := c.Split(0, 0, nil)
		if !errors.Is(err, nccl.ErrRemote) || child != nil {
			t.Fatalf("Split = %v, %v; want ErrRemote", child, err)
		}
		if n := faketest.Calls(t, "ncclCommAbort"); n != 1 {
			t.Errorf("%d ncclCommAbort calls, want 1 (the failed child)", n)
		}
	})
	// The same inside a group: the group's end reports it, and so does the
	// child's first use.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_ASYNC_FAIL=ncclCommSplit=6"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		var child *nccl.Communicator
		err := nccl.Group(func() error {
			var err error
			child, err = c.Split(0, 0, nil)
			return err
		})
		if !errors.Is(err, nccl.ErrRemote) {
			t.Errorf("Group = %v, want ErrRemote", err)
		}
		if _, err := child.NRanks(); !errors.Is(err, nccl.ErrRemote) {
			t.Errorf("first use of the failed child: %v, want ErrRemote", err)
		}
		if _, err := child.NRanks(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("later use of the failed child: %v, want ErrClosed", err)
		}
		if n := faketest.Calls(t, "ncclCommAbort"); n != 1 {
			t.Errorf("%d ncclCommAbort calls, want 1 (the failed child)", n)
		}
	})
}

// Split on a non-blocking parent returns a child still being created;
// Wait (on the child) makes it ready.
func TestFakeSplitNonBlocking(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=100"}}, func(t *testing.T) {
		cfg := &nccl.Config{Blocking: nccl.Ptr(false)}
		parent := fakeComm(t, 2, 0, cfg)
		ctx := context.Background()
		if err := parent.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		child, err := parent.Split(0, 1, nil)
		if err != nil {
			t.Fatalf("Split: %v", err)
		}
		if !strings.Contains(child.String(), "being created by Split") {
			t.Errorf("pending child reads %q", child)
		}
		if _, err := child.NRanks(); !errors.Is(err, nccl.ErrInProgress) || !strings.Contains(err.Error(), "Split") {
			t.Errorf("NRanks of a pending child: %v, want ErrInProgress", err)
		}
		if err := child.Wait(ctx); err != nil {
			t.Fatalf("child.Wait: %v", err)
		}
		if !child.IsValid() {
			t.Fatal("child not valid after Wait")
		}
		if n, r := identity(t, child); n != 2 || r != 1 {
			t.Errorf("child %d/%d", r, n)
		}
		// The child inherits the non-blocking mode: its Destroy still works.
		if err := child.Destroy(); err != nil {
			t.Errorf("child.Destroy: %v", err)
		}

		// A second child, left pending while the parent is destroyed: the
		// parent's Destroy waits for its split, and the child is ready.
		child2, err := parent.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := parent.Destroy(); err != nil {
			t.Fatalf("parent.Destroy: %v", err)
		}
		if err := child2.Wait(ctx); err != nil || !child2.IsValid() {
			t.Fatalf("child2 after the parent's Destroy: %v, valid %v", err, child2.IsValid())
		}
		if err := child2.Destroy(); err != nil {
			t.Errorf("child2.Destroy: %v", err)
		}
	})
}

// A split that never completes: SplitContext returns at its deadline with
// both the context's and NCCL's state, aborting parent and child; a
// non-blocking child can be aborted on its own.
func TestFakeSplitCancel(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=ncclCommSplit"}}, func(t *testing.T) {
		before := runtime.NumGoroutine()
		// Only a non-blocking communicator's wait can be cut short.
		parent := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		child, err := parent.SplitContext(ctx, 0, 0, nil)
		ctxErr(t, "SplitContext", err, time.Since(start), 3*time.Second)
		if child != nil || parent.IsValid() {
			t.Errorf("after the deadline: child %v, parent valid %v", child, parent.IsValid())
		}
		noLeftGoroutines(t, before)

		nb := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err := nb.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		child, err = nb.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Abort(); err != nil {
			t.Errorf("Abort of a pending child: %v", err)
		}
		if err := child.Abort(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("second Abort: %v, want ErrClosed", err)
		}
		if _, err := child.NRanks(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("NRanks of an aborted child: %v", err)
		}
		if err := nb.Abort(); err != nil {
			t.Errorf("parent Abort: %v", err)
		}
	})
}

// Split inside a group: the child exists once the group ends.
func TestFakeSplitInGroup(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		parent := fakeComm(t, 2, 0, nil)
		var child, none *nccl.Communicator
		err := nccl.Group(func() error {
			var err error
			if child, err = parent.Split(0, 0, nil); err != nil {
				return err
			}
			if none, err = parent.Split(nccl.NoColor, 0, nil); err != nil {
				return err
			}
			if _, err := child.NRanks(); !errors.Is(err, nccl.ErrInProgress) {
				t.Errorf("NRanks inside the group: %v, want ErrInProgress", err)
			}
			if err := child.Wait(context.Background()); !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("Wait inside the group: %v, want ErrInvalidUsage", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Group: %v", err)
		}
		if n, _ := identity(t, child); n != 2 {
			t.Errorf("child nranks %d", n)
		}
		if none.IsValid() {
			t.Error("NoColor child valid")
		}
		if err := child.Destroy(); err != nil {
			t.Error(err)
		}
	})
}

func TestFakeShrink(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, nil)
		exclude := []int{3, 0}
		child, err := c.Shrink(exclude, nil, nccl.ShrinkDefault)
		if err != nil {
			t.Fatalf("Shrink: %v", err)
		}
		if !slices.Equal(exclude, []int{3, 0}) {
			t.Errorf("Shrink modified the caller's slice: %v", exclude)
		}
		if n, r := identity(t, child); n != 2 || r != 0 {
			t.Errorf("child rank %d/%d, want 0/2", r, n)
		}
		if err := child.Destroy(); err != nil {
			t.Error(err)
		}
		child, err = c.Shrink([]int{2}, &nccl.Config{ShrinkShare: nccl.Ptr(false)}, nccl.ShrinkAbort)
		if err != nil {
			t.Fatalf("Shrink(ShrinkAbort): %v", err)
		}
		if n, r := identity(t, child); n != 3 || r != 1 {
			t.Errorf("child rank %d/%d, want 1/3", r, n)
		}
		child.Destroy()

		for _, tc := range []struct {
			name    string
			exclude []int
			flags   nccl.ShrinkFlag
			arg     string
		}{
			{"empty", nil, 0, "exclude"},
			{"duplicate", []int{2, 2}, 0, "exclude"},
			{"out of range", []int{4}, 0, "exclude"},
			{"negative", []int{-1}, 0, "exclude"},
			{"own rank", []int{1}, 0, "exclude"},
			{"every rank", []int{0, 1, 2, 3}, 0, "exclude"},
			{"bad flags", []int{2}, 7, "flags"},
		} {
			_, err := c.Shrink(tc.exclude, nil, tc.flags)
			wantArg(t, tc.name, err, tc.arg)
			if tc.name == "every rank" && !strings.Contains(err.Error(), "all 4 ranks") {
				t.Errorf("every rank: %v", err)
			}
		}
		_, err = c.Shrink([]int{2}, &nccl.Config{Device: nccl.Ptr(1)}, 0)
		wantArg(t, "other device", err, "Config.Device")
		c.Destroy()
		if _, err := c.Shrink([]int{2}, nil, 0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Shrink after Destroy: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22304}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.Shrink([]int{1}, nil, 0)
		wantUnsupported(t, "Shrink on 2.23", err, "ncclCommShrink", 22703)
	})
}

func TestFakeGrow(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 1, nil)
		id, err := c.GetUniqueID()
		if err != nil || id.IsZero() {
			t.Fatalf("GetUniqueID = %v, %v", id, err)
		}
		grown, err := c.Grow(4, &id, nccl.ExistingRank, nil)
		if err != nil {
			t.Fatalf("Grow (coordinator): %v", err)
		}
		if n, r := identity(t, grown); n != 4 || r != 1 {
			t.Errorf("grown rank %d/%d, want 1/4", r, n)
		}
		other, err := c.Grow(4, nil, nccl.ExistingRank, nil)
		if err != nil {
			t.Fatalf("Grow (existing rank without id): %v", err)
		}
		other.Destroy()

		var null nccl.Communicator
		joined, err := null.Grow(4, &id, 3, &nccl.Config{Device: nccl.Ptr(1)})
		if err != nil {
			t.Fatalf("Grow (joining rank): %v", err)
		}
		if n, r := identity(t, joined); n != 4 || r != 3 {
			t.Errorf("joined rank %d/%d, want 3/4", r, n)
		}
		if d, _ := joined.Device(); d != 1 {
			t.Errorf("joined on %v, want cuda:1", d)
		}
		var nilc *nccl.Communicator
		j2, err := nilc.Grow(4, &id, 2, nil)
		if err != nil {
			t.Fatalf("Grow on a nil *Communicator: %v", err)
		}
		if d, _ := j2.Device(); d != 0 {
			t.Errorf("joined on %v, want cuda:0", d)
		}
		for _, x := range []*nccl.Communicator{grown, joined, j2} {
			if err := x.Destroy(); err != nil {
				t.Error(err)
			}
		}

		// Bad input, for each role.
		_, err = c.Grow(4, &id, 2, nil)
		wantArg(t, "existing rank with a rank", err, "rank")
		_, err = c.Grow(2, &id, nccl.ExistingRank, nil)
		wantArg(t, "nranks not above the size", err, "nranks")
		_, err = c.Grow(4, &nccl.UniqueID{}, nccl.ExistingRank, nil)
		wantArg(t, "zero id", err, "id")
		_, err = c.Grow(4, nil, nccl.ExistingRank, &nccl.Config{Device: nccl.Ptr(1)})
		wantArg(t, "existing rank on another device", err, "Config.Device")
		_, err = null.Grow(4, nil, 3, nil)
		wantArg(t, "joining without an id", err, "id")
		_, err = null.Grow(4, &id, nccl.ExistingRank, nil)
		wantArg(t, "joining as an existing rank", err, "rank")
		_, err = null.Grow(4, &id, 4, nil)
		wantArg(t, "joining rank out of range", err, "rank")
		_, err = null.Grow(0, &id, 0, nil)
		wantArg(t, "nranks 0", err, "nranks")
		_, err = null.Grow(4, &id, 3, &nccl.Config{Device: nccl.Ptr(9)})
		wantArg(t, "joining on a missing device", err, "Config.Device")

		c.Destroy()
		if _, err := c.GetUniqueID(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("GetUniqueID after Destroy: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_COMM_ID=127.0.0.1:1234"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		defer c.Destroy()
		if _, err := c.GetUniqueID(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("GetUniqueID with NCCL_COMM_ID: %v, want ErrInvalidUsage", err)
		}
	})
	// A grow whose new ranks never arrive returns at the deadline.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=ncclCommGrow"}}, func(t *testing.T) {
		before := runtime.NumGoroutine()
		c := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		defer c.Abort()
		id, _ := c.GetUniqueID()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		g, err := c.GrowContext(ctx, 3, &id, nccl.ExistingRank, nil)
		ctxErr(t, "GrowContext", err, time.Since(start), 3*time.Second)
		if g != nil || !c.IsValid() {
			t.Errorf("grown %v; the parent (not involved) valid: %v", g, c.IsValid())
		}
		noLeftGoroutines(t, before)
	})
}

// Every 2.29+ call fails with ErrUnsupported on NCCL 2.28.3.
func TestFakeUnsupportedOn228(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803, Extra: []string{"FAKE_NCCL_HOST_RMA=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.GetUniqueID()
		wantUnsupported(t, "GetUniqueID", err, "ncclCommGetUniqueId", 22902)
		id, _ := nccl.NewUniqueID()
		_, err = c.Grow(3, &id, nccl.ExistingRank, nil)
		wantUnsupported(t, "Grow (existing)", err, "ncclCommGrow", 22902)
		_, err = (&nccl.Communicator{}).Grow(3, &id, 2, nil)
		wantUnsupported(t, "Grow (joining)", err, "ncclCommGrow", 22902)
		wantUnsupported(t, "Suspend", c.Suspend(nccl.SuspendMem), "ncclCommSuspend", 22907)
		wantUnsupported(t, "Resume", c.Resume(), "ncclCommResume", 22907)
		_, err = c.MemStat(nccl.MemStatGPUMemTotal)
		wantUnsupported(t, "MemStat", err, "ncclCommMemStats", 22907)
		wantUnsupported(t, "Revoke", c.Revoke(0), "ncclCommRevoke", 22807)

		buf, err := nccl.MemAlloc[float32](0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatalf("RegisterWindow on 2.28: %v", err)
		}
		_, err = w.UserPtr()
		wantUnsupported(t, "UserPtr", err, "ncclWinGetUserPtr", 22902)
		_, err = w.LSAPointer(0, 0)
		wantUnsupported(t, "LSAPointer", err, "ncclGetLsaDevicePointer", 22902)
		_, err = w.PeerPointer(0, 0)
		wantUnsupported(t, "PeerPointer", err, "ncclGetPeerDevicePointer", 22902)
		_, err = w.MultimemPointer(0)
		wantUnsupported(t, "MultimemPointer", err, "ncclGetLsaMultimemDevicePointer", 22902)
		_, err = c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowStrictOrdering)
		wantUnsupported(t, "WindowStrictOrdering", err, "NCCL_WIN_STRICT_ORDERING", 22907)
		var s cuda.Stream
		wantUnsupported(t, "PutSignal", c.PutSignal(nccl.BufferOf(buf), 1, w, 0, s), "ncclPutSignal", 22902)
		wantUnsupported(t, "PutSignal without a window", c.PutSignal(nccl.BufferOf(buf), 1, nil, 0, s), "ncclPutSignal", 22902)
		wantUnsupported(t, "Signal", c.Signal(1, s), "ncclSignal", 22902)
		wantUnsupported(t, "WaitSignal", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 1, OpCount: 1}}, s), "ncclWaitSignal", 22902)
		if err := w.Close(); err != nil {
			t.Errorf("Window.Close: %v", err)
		}
	})
	// Revoke is there from 2.28.7.
	faketest.Run(t, faketest.Env{Release: 22807}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		if err := c.Revoke(0); err != nil {
			t.Errorf("Revoke on 2.28.7: %v", err)
		}
	})
}

func TestFakeRevokeSuspendMemStat(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
			cfg := &nccl.Config{Blocking: nccl.Ptr(blocking)}
			c := fakeComm(t, 2, 0, cfg)
			ctx := context.Background()
			wait := func() {
				if err := c.Wait(ctx); err != nil {
					t.Fatalf("Wait: %v", err)
				}
			}
			wait()
			total, err := c.MemStat(nccl.MemStatGPUMemTotal)
			if err != nil || total != 3<<20 {
				t.Errorf("MemStat(total) = %d, %v", total, err)
			}
			if err := c.Suspend(nccl.SuspendMem); err != nil {
				t.Fatalf("Suspend: %v", err)
			}
			wait()
			if v, err := c.MemStat(nccl.MemStatGPUMemSuspended); err != nil || v != 1 {
				t.Errorf("MemStat(suspended) = %d, %v; want 1", v, err)
			}
			if err := c.Resume(); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if v, err := c.MemStat(nccl.MemStatGPUMemSuspended); err != nil || v != 0 {
				t.Errorf("MemStat(suspended) after Resume = %d, %v; want 0", v, err)
			}
			wantArg(t, "Suspend(3)", c.Suspend(3), "flags")
			_, err = c.MemStat(9)
			wantArg(t, "MemStat(9)", err, "stat")
			wantArg(t, "Revoke(1)", c.Revoke(1), "flags")
			if err := c.Revoke(0); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			wait()
			if err := c.Finalize(); !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("Finalize after Revoke: %v, want ErrInvalidUsage", err)
			}
			if err := c.Destroy(); err != nil {
				t.Errorf("Destroy after Revoke: %v", err)
			}
			if err := c.Suspend(0); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Suspend after Destroy: %v", err)
			}
		})
	}
}

// A non-blocking init completes through the context-aware Wait; one whose
// peers never arrive is aborted at the deadline, leaving no goroutine.
func TestFakeNonBlockingInit(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=50"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err := c.AsyncError(); !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("AsyncError right after a non-blocking init: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if err := c.AsyncError(); err != nil {
			t.Errorf("AsyncError after Wait: %v", err)
		}
		if n, r := identity(t, c); n != 2 || r != 0 {
			t.Errorf("%d/%d", r, n)
		}
		if err := c.Destroy(); err != nil {
			t.Error(err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=1"}}, func(t *testing.T) {
		before := runtime.NumGoroutine()
		id, _ := nccl.NewUniqueID()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		c, err := nccl.InitContext(ctx, 2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		ctxErr(t, "InitContext", err, time.Since(start), 3*time.Second)
		if c != nil {
			t.Errorf("InitContext returned %v", c)
		}
		nb, err := nccl.Init(2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel2()
		start = time.Now()
		err = nb.Wait(ctx2)
		ctxErr(t, "Wait", err, time.Since(start), 3*time.Second)
		if nb.IsValid() {
			t.Error("the communicator survived its cancelled wait")
		}
		noLeftGoroutines(t, before)
	})
}

// The leak handler sees a dropped communicator, with where it was made,
// and never one that was destroyed.
func TestFakeLeak(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		faketest.AllowLeakedComms("the test drops a live communicator to see it reported")
		leaks := make(chan nccl.Leak, 4)
		nccl.SetLeakHandler(func(l nccl.Leak) { leaks <- l })
		defer nccl.SetLeakHandler(nil)
		var destroyed uintptr
		func() {
			id, _ := nccl.NewUniqueID()
			c, err := nccl.Init(1, 0, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := nccl.Init(1, 0, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			destroyed = d.Handle()
			if err := d.Destroy(); err != nil {
				t.Fatal(err)
			}
			_ = c.Handle()
		}()
		var got nccl.Leak
		for i := 0; i < 50 && got.Handle == 0; i++ {
			runtime.GC()
			select {
			case got = <-leaks:
			case <-time.After(20 * time.Millisecond):
			}
		}
		if got.Handle == 0 {
			t.Fatal("no leak reported for a dropped communicator")
		}
		if got.Handle == destroyed {
			t.Errorf("leak reported for the destroyed communicator %#x", destroyed)
		}
		if !strings.Contains(got.Stack, "TestFakeLeak") {
			t.Errorf("leak stack does not show where it was created:\n%s", got.Stack)
		}
		for i := 0; i < 5; i++ {
			runtime.GC()
			select {
			case l := <-leaks:
				t.Errorf("second leak reported: %#x (destroyed %#x)", l.Handle, destroyed)
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

package nccl_test

import (
	"errors"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// A DevResource or TeamResource that no constructor made (a composite
// literal) owns no C node: CreateDevComm refuses it instead of writing
// through a nil pointer.
func TestHostileZeroValueResources(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{{}}})
		wantArg(t, "a zero DevResource", err, "DevCommRequirements.Resources[0]")
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{{}}})
		wantArg(t, "a zero TeamResource", err, "DevCommRequirements.Teams[0]")
		if n := faketest.Calls(t, "ncclDevCommCreate"); n != 0 {
			t.Errorf("ncclDevCommCreate called %d times", n)
		}
	})
}

// A team whose fields do not fit NCCL's int is refused, not truncated.
func TestHostileTeamPastInt32(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		for _, team := range []nccl.Team{
			{NRanks: 2, Rank: 0, Stride: 1 << 32},
			{NRanks: 1<<32 + 2, Rank: 0, Stride: 1},
			{NRanks: math.MaxInt32 + 1, Rank: 0, Stride: 1},
		} {
			_, err := nccl.NewTeamResource(team, false)
			wantArg(t, "NewTeamResource", err, "team")
			_, err = nccl.LSABarrierResource(team, 1)
			wantArg(t, "LSABarrierResource", err, "team")
		}
		c := fakeComm(t, 2, 0, nil)
		_, err := c.TeamRankToWorld(nccl.Team{NRanks: 2, Rank: 0, Stride: 1<<32 + 1}, 1)
		wantArg(t, "TeamRankToWorld", err, "team")
	})
}

// A Config string with a NUL byte is refused: C would read only the part
// before it, silently naming another network or communicator.
func TestHostileConfigStringWithNUL(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		id := newFakeID(t)
		for _, tc := range []struct {
			cfg *nccl.Config
			arg string
		}{
			{&nccl.Config{NetName: "Socket\x00IB"}, "Config.NetName"},
			{&nccl.Config{CommName: "job\x00other"}, "Config.CommName"},
		} {
			c, err := nccl.Init(1, 0, id, tc.cfg)
			if err == nil {
				c.Destroy()
			}
			wantArg(t, tc.arg, err, tc.arg)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig"); n != 0 {
			t.Errorf("NCCL called %d times for refused configs", n)
		}
	})
}

// A team's multimem handle belongs to the device communicator of one
// communicator: a window of another communicator cannot turn it into an
// address (NCCL would add the window's offset to a foreign multicast
// base).
func TestHostileMultimemPointerForeignWindow(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		a := fakeComm(t, 2, 0, nil)
		b := fakeComm(t, 2, 0, nil)
		world, err := a.TeamWorld()
		if err != nil {
			t.Fatal(err)
		}
		mm, err := nccl.NewTeamResource(world, true)
		if err != nil {
			t.Fatal(err)
		}
		d, err := a.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{mm}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		buf := mustMemAlloc[float32](t, 0, 1024)
		w, err := b.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		calls := faketest.Calls(t, "ncclGetMultimemDevicePointer")
		_, err = w.MultimemPointerFor(mm, 0)
		wantArg(t, "a window of another communicator", err, "team")
		if n := faketest.Calls(t, "ncclGetMultimemDevicePointer"); n != calls {
			t.Errorf("NCCL called %d times", n-calls)
		}
	})
}

// A nil *Window answers MultimemPointerFor with an error, not a panic.
func TestHostileMultimemPointerNilWindow(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		a, world := fakeWorld(t, 2, 0)
		mm, _ := nccl.NewTeamResource(world, true)
		d, err := a.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{mm}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var w *nccl.Window
		if _, err := w.MultimemPointerFor(mm, 0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("nil window: %v, want ErrClosed", err)
		}
	})
}

// The refusal of a resource used twice reads as English: "an LSA barrier
// requirement", "an LLA2A requirement", "a team requirement".
func TestHostileResourceReuseMessage(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		bar, _ := nccl.LSABarrierResource(world, 1)
		a2a, _ := nccl.LLA2AResource(1, 1)
		team, _ := nccl.NewTeamResource(world, false)
		reqs := &nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar, a2a}, Teams: []*nccl.TeamResource{team}}
		d, err := c.CreateDevComm(reqs)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for _, tc := range []struct {
			reqs *nccl.DevCommRequirements
			want string
		}{
			{&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}}, "an LSA barrier requirement already"},
			{&nccl.DevCommRequirements{Resources: []*nccl.DevResource{a2a}}, "an LLA2A requirement already"},
			{&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{team}}, "a team requirement already"},
		} {
			_, err := c.CreateDevComm(tc.reqs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("reuse: %v, want %q", err, tc.want)
			}
		}
	})
}

// leafErrors flattens joined errors (errors.Join, and fmt.Errorf wrapping
// a join) into their leaves.
func leafErrors(err error) []error {
	type multi interface{ Unwrap() []error }
	if err == nil {
		return nil
	}
	if m, ok := err.(multi); ok {
		var out []error
		for _, e := range m.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	if u := errors.Unwrap(err); u != nil {
		if _, ok := u.(multi); ok {
			return leafErrors(u)
		}
	}
	return []error{err}
}

// Concurrent DestroyAll calls over the same communicators behave as
// concurrent Destroys: every communicator is destroyed once, and the
// callers that lost the race learn it with ErrClosed, never with an
// invalid-usage error about a group they did not open (the other call's
// finalize group).
func TestHostileConcurrentDestroyAll(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FINALIZE_WAITS_PEERS=1", "FAKE_NCCL_FINALIZE_WAIT_MS=3000", "NCCL_MULTI_RANK_GPU_ENABLE=1"}}, func(t *testing.T) {
		for round := 0; round < 60; round++ {
			comms := initAll(t, 0, 0, 1)
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for g := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[g] = nccl.DestroyAll(comms...) }()
			}
			wg.Wait()
			for _, e := range leafErrors(errors.Join(errs...)) {
				if !errors.Is(e, nccl.ErrClosed) {
					t.Fatalf("round %d: %v, want only ErrClosed errors", round, e)
				}
			}
			for i, c := range comms {
				if c.IsValid() {
					t.Fatalf("round %d: communicator %d still valid", round, i)
				}
			}
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Errorf("%d communicator(s) of the fake alive", n)
		}
	})
}

// A team whose members would span more world ranks than NCCL's int holds
// is refused: NCCL's rank arithmetic would wrap around and could land on
// a valid rank (member 2 of {3 ranks, stride 2^31-1} from rank 3 wrapped
// to rank 1).
func TestHostileTeamSpanPastInt32(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c := fakeComm(t, 4, 3, nil)
		wide := nccl.Team{NRanks: 3, Rank: 0, Stride: math.MaxInt32}
		got, err := c.TeamRankToWorld(wide, 2)
		if err == nil {
			t.Errorf("TeamRankToWorld(%v, 2) = %d, want an ArgError", wide, got)
		}
		wantArg(t, "TeamRankToWorld", err, "team")
		_, err = nccl.NewTeamResource(wide, false)
		wantArg(t, "NewTeamResource", err, "team")
		_, err = nccl.LSABarrierResource(wide, 1)
		wantArg(t, "LSABarrierResource", err, "team")
		// The widest team that fits: 2 members 2^31-2 apart.
		if _, err := nccl.NewTeamResource(nccl.Team{NRanks: 2, Rank: 0, Stride: math.MaxInt32 - 1}, false); err != nil {
			t.Errorf("the widest team: %v", err)
		}
	})
}

// The C nodes of device resources and teams are freed on every path once
// the resource is unreachable: never used, refused by CreateDevComm, used
// by a device communicator that was closed, or by one whose communicator
// was destroyed first.
func TestHostileResourceCMemoryFreed(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		// settle collects until want nodes are live (cleanups run on
		// their own goroutine), for at most 10 s.
		settle := func(want int64) int64 {
			for deadline := time.Now().Add(10 * time.Second); ; {
				runtime.GC()
				if n := capi.LiveResources(); n == want || time.Now().After(deadline) {
					return n
				}
				time.Sleep(time.Millisecond)
			}
		}
		base := settle(0)
		func() {
			c, world := fakeWorld(t, 2, 0)
			for range 10 {
				// never used
				if _, err := nccl.LSABarrierResource(world, 2); err != nil {
					t.Fatal(err)
				}
				if _, err := nccl.NewTeamResource(world, true); err != nil {
					t.Fatal(err)
				}
				// refused: a bad requirement beside it
				a2a, _ := nccl.LLA2AResource(1, 1)
				if _, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{a2a}, GINQueueDepth: nccl.Ptr(-1)}); err == nil {
					t.Fatal("a bad GINQueueDepth was accepted")
				}
				// used, then closed
				bar, _ := nccl.LSABarrierResource(world, 1)
				mm, _ := nccl.NewTeamResource(world, true)
				d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}, Teams: []*nccl.TeamResource{mm}})
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// used by a device communicator whose communicator is destroyed first
			bar, _ := nccl.LSABarrierResource(world, 1)
			if _, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}}); err != nil {
				t.Fatal(err)
			}
			if got := capi.LiveResources() - base; got < 1 {
				t.Errorf("%d resource nodes live while one serves a device communicator", got)
			}
			if err := c.Destroy(); err != nil {
				t.Fatal(err)
			}
		}()
		if n := settle(base) - base; n != 0 {
			t.Errorf("%d resource C node(s) not freed", n)
		}
	})
}

// A count past C's int is refused with a reason that says so, not "must be
// at least 1" (the old message for MinCTAs 1<<40).
func TestHostileCountPastIntMessage(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 64)
		b := nccl.BufferOf(buf)
		err := c.AllReduceWith(&nccl.CollConfig{MinCTAs: nccl.Ptr(1 << 40)}, b, b, nccl.Sum, cuda.Stream{})
		wantArgErr(t, err, "AllReduceWith", "CollConfig.MinCTAs", "at most 2147483647")
		id := newFakeID(t)
		_, err = nccl.Init(1, 0, id, &nccl.Config{NVLSCTAs: nccl.Ptr(1 << 40)})
		wantArgErr(t, err, "Init", "Config.NVLSCTAs", "at most 2147483647")
	})
}

// The methods of a DevResource or TeamResource literal say that it was
// not made by its constructor (they read "the  requirement serves no
// device communicator yet" and "made without multimem").
func TestHostileZeroValueResourceMethods(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		_, _, err := (&nccl.DevResource{}).Handle()
		wantArgErr(t, err, "DevResource.Handle", "resource", "not made by LSABarrierResource, LLA2AResource or GINBarrierResource")
		_, err = (&nccl.DevResource{}).GINSignal()
		wantArgErr(t, err, "DevResource.GINSignal", "resource", "not made by")
		var arg [8]byte
		_, err = (&nccl.DevResource{}).PutKernelArg(arg[:])
		wantArgErr(t, err, "DevResource.PutKernelArg", "resource", "not made by")
		_, err = (&nccl.TeamResource{}).MultimemHandle()
		wantArgErr(t, err, "TeamResource.MultimemHandle", "team", "not made by NewTeamResource")
	})
}

// A zero cuda.Event (never made) as LaunchCompletionEvent is refused as
// such, not as "made without cuda.EventDisableTiming".
func TestHostileZeroLaunchCompletionEvent(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 64)
		b := nccl.BufferOf(buf)
		err := c.AllReduceWith(&nccl.CollConfig{LaunchCompletionEvent: &cuda.Event{}}, b, b, nccl.Sum, cuda.Stream{})
		wantArgErr(t, err, "AllReduceWith", "CollConfig.LaunchCompletionEvent", "zero cuda.Event", "NewEventFlags")
	})
}

// LLA2ACalcSlots blames the argument at fault, with true figures: an
// element size past 2^31-8 overflows NCCL's rounding to 8 bytes (it read
// "maxElts: 1 elements of 2147483647 bytes: 2147483648 slots or more
// overflow NCCL's int", for 268435456 slots).
func TestHostileLLA2ACalcSlotsMessage(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		_, err := nccl.LLA2ACalcSlots(1, math.MaxInt32)
		wantArgErr(t, err, "LLA2ACalcSlots", "maxEltSize", "2147483647", "2^31-8")
		_, err = nccl.LLA2ACalcSlots(1<<28, 64)
		wantArgErr(t, err, "LLA2ACalcSlots", "maxElts", "2147483648 slots")
	})
}

// Counts whose product with the team or slot size wraps around 2^64 (and
// whose int32 is 0) are refused, not passed to NCCL as 0 barriers or
// blocks.
func TestHostileResourceCountWrapsAround(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		one := nccl.Team{NRanks: 1, Rank: 0, Stride: 1}
		_, err := nccl.LSABarrierResource(one, 1<<62) // (3+1) × 2^62 = 2^64
		wantArgErr(t, err, "LSABarrierResource", "nBarriers", "past NCCL's int")
		_, err = nccl.LLA2AResource(1<<60, 1) // 2^60 × 3 × 16: a multiple of 2^64
		wantArgErr(t, err, "LLA2AResource", "nBlocks", "past NCCL's int")
		c, world := fakeWorld(t, 4, 1)
		_, err = c.GINBarrierResource(world, 1<<62) // 4 × 2^62 = 2^64
		wantArgErr(t, err, "GINBarrierResource", "nBarriers", "past NCCL's int")
		for _, fn := range []string{"ncclLsaBarrierCreateRequirement", "ncclLLA2ACreateRequirement", "ncclGinBarrierCreateRequirement"} {
			noNCCLCall(t, fn)
		}
	})
}

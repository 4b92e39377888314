package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The communicator's lifecycle against the fake NCCL and CUDA driver
// (internal/faketest): one process, two fake devices.

func TestCommInitIdentity(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c, err := nccl.Init(1, 0, newFakeID(t), &nccl.Config{Device: nccl.Ptr(1)})
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		if !c.IsValid() || c.Handle() == 0 {
			t.Fatalf("IsValid %v Handle %#x", c.IsValid(), c.Handle())
		}
		if n, err := c.NRanks(); err != nil || n != 1 {
			t.Errorf("NRanks = %d, %v", n, err)
		}
		if r, err := c.Rank(); err != nil || r != 0 {
			t.Errorf("Rank = %d, %v", r, err)
		}
		if d, err := c.Device(); err != nil || d != 1 {
			t.Errorf("Device = %s, %v", d, err)
		}
		if s := c.String(); !strings.Contains(s, "rank 0/1") || !strings.Contains(s, "cuda:1") ||
			!strings.Contains(s, fmt.Sprintf("%#x", c.Handle())) {
			t.Errorf("String = %q", s)
		}
		if err := c.AsyncError(); err != nil {
			t.Errorf("AsyncError: %v", err)
		}
		if err := c.Wait(context.Background()); err != nil {
			t.Errorf("Wait: %v", err)
		}
		if _, err := c.LastError(); err != nil {
			t.Errorf("LastError: %v", err)
		}
		// The identity is cached: asking again does not call NCCL.
		before := faketest.Calls(t, "ncclCommCount")
		for range 3 {
			c.NRanks()
			c.Rank()
			c.Device()
		}
		if after := faketest.Calls(t, "ncclCommCount"); after != before || before != 1 {
			t.Errorf("ncclCommCount called %d times, then %d", before, after)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig"); n != 1 {
			t.Errorf("ncclCommInitRankConfig called %d times", n)
		}
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if c.IsValid() || c.Handle() != 0 || !strings.Contains(c.String(), "destroyed") {
			t.Errorf("after Destroy: IsValid %v Handle %#x String %q", c.IsValid(), c.Handle(), c.String())
		}
		if faketest.Calls(t, "ncclCommFinalize") != 1 || faketest.Calls(t, "ncclCommDestroy") != 1 {
			t.Errorf("Destroy made %d finalize and %d destroy calls, want 1 and 1",
				faketest.Calls(t, "ncclCommFinalize"), faketest.Calls(t, "ncclCommDestroy"))
		}
	})
}

func TestCommInitialize(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		var c nccl.Communicator
		if c.IsValid() || c.String() != "nccl.Communicator(null)" {
			t.Fatalf("the zero Communicator: valid %v, %q", c.IsValid(), c.String())
		}
		id := newFakeID(t)
		if err := c.Initialize(1, 0, id, nil); err != nil {
			t.Fatalf("Initialize: %v", err)
		}
		if d, err := c.Device(); err != nil || d != 0 {
			t.Errorf("Device = %s, %v; want the default cuda:0", d, err)
		}
		ptr := c.Handle()
		if err := c.Initialize(1, 0, id, nil); err == nil || c.Handle() != ptr {
			t.Errorf("Initialize of an initialized communicator: %v (ptr %#x, was %#x)", err, c.Handle(), ptr)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig"); n != 1 {
			t.Errorf("the second Initialize called NCCL (%d inits)", n)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		// A destroyed communicator can be initialized again.
		if err := c.Initialize(1, 0, id, nil); err != nil {
			t.Fatalf("Initialize after Destroy: %v", err)
		}
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCommBadArguments(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		id := newFakeID(t)
		cases := []struct {
			name    string
			nranks  int
			rank    int
			id      nccl.UniqueID
			cfg     *nccl.Config
			arg     string
			isCause error
		}{
			{"nranks 0", 0, 0, id, nil, "nranks", nil},
			{"nranks -1", -1, 0, id, nil, "nranks", nil},
			{"rank -1", 2, -1, id, nil, "rank", nil},
			{"rank = nranks", 2, 2, id, nil, "rank", nil},
			{"zero id", 1, 0, nccl.UniqueID{}, nil, "id", nil},
			{"device 5", 1, 0, id, &nccl.Config{Device: nccl.Ptr(5)}, "Config.Device", cuda.ErrInvalidDevice},
			{"device -1", 1, 0, id, &nccl.Config{Device: nccl.Ptr(-1)}, "Config.Device", cuda.ErrInvalidDevice},
		}
		for _, c := range cases {
			comm, err := nccl.Init(c.nranks, c.rank, c.id, c.cfg)
			var ae *nccl.ArgError
			if comm != nil || !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != c.arg {
				t.Errorf("%s: %v, %v; want an ArgError for %s", c.name, comm, err, c.arg)
				continue
			}
			if !strings.Contains(err.Error(), c.arg) {
				t.Errorf("%s: %q does not name %s", c.name, err, c.arg)
			}
			if c.isCause != nil && !errors.Is(err, c.isCause) {
				t.Errorf("%s: %v does not wrap %v", c.name, err, c.isCause)
			}
		}
		if _, err := nccl.InitScalable(1, 0, nil, nil); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("InitScalable without ids: %v", err)
		}
		if _, err := nccl.InitScalable(1, 0, []nccl.UniqueID{id, id}, nil); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("InitScalable with more ids than ranks: %v", err)
		}
		var nilComm *nccl.Communicator
		if err := nilComm.Initialize(1, 0, id, nil); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("Initialize of a nil *Communicator: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := nccl.InitContext(ctx, 1, 0, id, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("InitContext with a cancelled context: %v", err)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig") + faketest.Calls(t, "ncclCommInitRankScalable"); n != 0 {
			t.Errorf("bad arguments reached NCCL %d times", n)
		}
	})
}

// commAccessors calls every method of a communicator that needs a live one
// (the property accessors of propsAccessors and these), keyed by the
// method's name.
func commAccessors(c *nccl.Communicator) map[string]error {
	errs := propsAccessors(c)
	_, errs["NRanks"] = c.NRanks()
	_, errs["Rank"] = c.Rank()
	_, errs["Device"] = c.Device()
	errs["AsyncError"] = c.AsyncError()
	_, errs["LastError"] = c.LastError()
	errs["Wait"] = c.Wait(context.Background())
	return errs
}

// wantNotInitialized checks that every accessor fails with
// ErrNotInitialized naming what was attempted, and ErrClosed exactly when
// closed.
func wantNotInitialized(t *testing.T, what string, c *nccl.Communicator, closed bool) {
	t.Helper()
	for op, err := range commAccessors(c) {
		var se *nccl.StateError
		if !errors.Is(err, nccl.ErrNotInitialized) || !errors.As(err, &se) {
			t.Errorf("%s: %s: %v, want ErrNotInitialized", what, op, err)
			continue
		}
		if se.Op != op || !strings.HasPrefix(err.Error(), "nccl: "+op+": ") {
			t.Errorf("%s: %q: StateError.Op %q, want the method's name %s", what, err, se.Op, op)
		}
		if errors.Is(err, nccl.ErrClosed) != closed {
			t.Errorf("%s: %s: errors.Is(ErrClosed) = %v", what, op, !closed)
		}
	}
}

func TestCommNullAndClosed(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		var nilComm *nccl.Communicator
		wantNotInitialized(t, "nil", nilComm, false)
		if nilComm.Handle() != 0 || nilComm.IsValid() || nilComm.String() != "nccl.Communicator(null)" {
			t.Errorf("nil: Handle %#x IsValid %v String %q", nilComm.Handle(), nilComm.IsValid(), nilComm.String())
		}
		for op, err := range map[string]error{"Destroy": nilComm.Destroy(), "Abort": nilComm.Abort(),
			"Finalize": nilComm.Finalize()} {
			if err != nil {
				t.Errorf("nil: %s: %v", op, err)
			}
		}

		null := new(nccl.Communicator)
		wantNotInitialized(t, "null", null, false)
		for op, err := range map[string]error{"Destroy": null.Destroy(), "Abort": null.Abort(), "Finalize": null.Finalize()} {
			if err != nil {
				t.Errorf("null: %s: %v", op, err)
			}
		}

		id := newFakeID(t)
		destroyed, err := nccl.Init(1, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := destroyed.Destroy(); err != nil {
			t.Fatal(err)
		}
		wantNotInitialized(t, "destroyed", destroyed, true)
		if err := destroyed.Destroy(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("a second Destroy: %v, want ErrClosed", err)
		}
		if err := destroyed.Abort(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Abort after Destroy: %v, want ErrClosed", err)
		}

		aborted, err := nccl.Init(1, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := aborted.Abort(); err != nil {
			t.Fatal(err)
		}
		wantNotInitialized(t, "aborted", aborted, true)
		if err := aborted.Destroy(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Destroy after Abort: %v, want ErrClosed", err)
		}
		if err := aborted.Abort(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("a second Abort: %v, want ErrClosed", err)
		}
		if !strings.Contains(aborted.String(), "aborted") {
			t.Errorf("String = %q", aborted.String())
		}
		// NCCL saw each communicator freed once, and never a freed one again.
		if d, a := faketest.Calls(t, "ncclCommDestroy"), faketest.Calls(t, "ncclCommAbort"); d != 1 || a != 1 {
			t.Errorf("%d ncclCommDestroy and %d ncclCommAbort calls, want 1 and 1", d, a)
		}
	})
}

func TestCommFinalizeThenDestroy(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c, err := nccl.Init(1, 0, newFakeID(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Finalize(); err != nil {
			t.Fatalf("Finalize: %v", err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy after Finalize: %v", err)
		}
		if n := faketest.Calls(t, "ncclCommFinalize"); n != 1 {
			t.Errorf("ncclCommFinalize called %d times, want once", n)
		}
	})
}

func TestCommInitAll(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		comms, err := nccl.InitAll(nil)
		if err != nil {
			t.Fatalf("InitAll(nil): %v", err)
		}
		if len(comms) != 2 {
			t.Fatalf("%d communicators, want one per fake device", len(comms))
		}
		for i, c := range comms {
			n, err1 := c.NRanks()
			r, err2 := c.Rank()
			d, err3 := c.Device()
			if err := errors.Join(err1, err2, err3); err != nil || n != 2 || r != i || int(d) != i {
				t.Errorf("communicator %d: rank %d/%d on %s, %v", i, r, n, d, err)
			}
		}
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Errorf("DestroyAll: %v", err)
		}
		// One device listed: one rank.
		comms, err = nccl.InitAll([]int{1})
		if err != nil || len(comms) != 1 {
			t.Fatalf("InitAll([1]) = %d communicators, %v", len(comms), err)
		}
		if d, _ := comms[0].Device(); d != 1 {
			t.Errorf("InitAll([1]) placed rank 0 on %s", d)
		}
		comms[0].Destroy()

		for name, devs := range map[string][]int{"empty": {}, "device 5": {0, 5}, "device -1": {-1}} {
			if comms, err := nccl.InitAll(devs); !errors.Is(err, nccl.ErrInvalidArgument) || comms != nil {
				t.Errorf("InitAll %s: %d communicators, %v; want ErrInvalidArgument", name, len(comms), err)
			}
		}
		if _, err := nccl.InitAllContext(context.Background(), nil, &nccl.Config{Device: nccl.Ptr(0)}); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("InitAll with Config.Device: %v", err)
		}
		// Two ranks on one GPU need NCCL 2.30.3 and NCCL_MULTI_RANK_GPU_ENABLE=1.
		var ae *nccl.ArgError
		if _, err := nccl.InitAll([]int{0, 0}); !errors.As(err, &ae) || ae.Arg != "devices" ||
			!strings.Contains(err.Error(), "NCCL_MULTI_RANK_GPU_ENABLE") {
			t.Errorf("InitAll([0 0]) on 2.30.7 without the opt-out: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		comms, err := nccl.InitAll([]int{0, 0})
		var ae *nccl.ArgError
		if comms != nil || !errors.As(err, &ae) || ae.Arg != "devices" || !strings.Contains(err.Error(), "2.30.3") {
			t.Errorf("InitAll([0 0]) on 2.28.3: %v, want an ArgError for devices naming 2.30.3", err)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig"); n != 0 {
			t.Errorf("a refused InitAll called NCCL %d times", n)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_MULTI_RANK_GPU_ENABLE=1"}}, func(t *testing.T) {
		comms, err := nccl.InitAll([]int{0, 0})
		if err != nil || len(comms) != 2 {
			t.Fatalf("InitAll([0 0]) with the opt-out: %v", err)
		}
		for i, c := range comms {
			if r, _ := c.Rank(); r != i {
				t.Errorf("rank %d", r)
			}
			c.Destroy()
		}
	})
	faketest.Run(t, faketest.Env{Devices: -1}, func(t *testing.T) {
		if _, err := nccl.InitAll(nil); !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("InitAll without a device: %v, want cuda.ErrNoDevice", err)
		}
	})
}

// A non-blocking communicator whose creation never completes (its peers
// never come): the wait bounded by a context gives up in time, aborts it
// and leaves no goroutine behind. (A blocking creation waits inside NCCL,
// where a context cannot reach it.)
func TestCommInitContextTimeout(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=1"}}, func(t *testing.T) {
		id := newFakeID(t)
		before := runtime.NumGoroutine()
		start := time.Now() // before the deadline is set: the wait is at least 200 ms from here
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		c, err := nccl.InitContext(ctx, 1, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err == nil {
			err = c.Wait(ctx) // a non-blocking Init returns before the communicator is ready
		}
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nccl.ErrInProgress) {
			t.Fatalf("InitContext and Wait of a hung rank: %v, %v; want DeadlineExceeded and ErrInProgress", c, err)
		}
		if c != nil && c.IsValid() {
			t.Errorf("the hung communicator is still valid: %v", c)
		}
		if took < 200*time.Millisecond || took > time.Second {
			t.Errorf("InitContext returned after %v, want 200ms to 1s", took)
		}
		if n := faketest.Calls(t, "ncclCommAbort"); n != 1 {
			t.Errorf("the hung communicator was aborted %d times, want once", n)
		}
		if n, ok := settleGoroutines(before); !ok {
			t.Errorf("%d goroutines after the timeout, %d before", n, before)
		}
	})
}

func TestCommInitWaits(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=50"}}, func(t *testing.T) {
		// A blocking creation is complete when NCCL returns.
		c, err := nccl.Init(1, 0, newFakeID(t), nil)
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		if err := c.AsyncError(); err != nil {
			t.Errorf("AsyncError after a blocking Init: %v", err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		// A non-blocking one stays in progress for 50 polls: the first call
		// that needs it waits.
		before := faketest.Calls(t, "ncclCommGetAsyncError")
		c, err = nccl.Init(1, 0, newFakeID(t), &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatalf("non-blocking Init: %v", err)
		}
		if n, err := c.NRanks(); err != nil || n != 1 {
			t.Errorf("NRanks of a communicator in progress = %d, %v", n, err)
		}
		if n := faketest.Calls(t, "ncclCommGetAsyncError") - before; n < 51 {
			t.Errorf("ncclCommGetAsyncError polled %d times, want at least 51", n)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
	// A non-blocking communicator returns at once; Wait waits.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=5"}}, func(t *testing.T) {
		c, err := nccl.Init(1, 0, newFakeID(t), &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		if err := c.AsyncError(); !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("AsyncError right after a non-blocking Init: %v, want ErrInProgress", err)
		}
		if err := c.Wait(context.Background()); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if err := c.AsyncError(); err != nil {
			t.Errorf("AsyncError after Wait: %v", err)
		}
		if n, err := c.NRanks(); err != nil || n != 1 {
			t.Errorf("NRanks = %d, %v", n, err)
		}
		c.Destroy()
	})
}

func TestCommInitFails(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FAIL=ncclCommInitRankConfig=5"}}, func(t *testing.T) {
		c, err := nccl.Init(1, 0, newFakeID(t), nil)
		var ne *nccl.Error
		if c != nil || !errors.As(err, &ne) {
			t.Fatalf("Init: %v, %v; want an *nccl.Error", c, err)
		}
		if ne.Code != nccl.InvalidUsage || ne.Op != "Init" || !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("%+v, want code InvalidUsage from Init", *ne)
		}
		if want := "fake: ncclCommInitRankConfig: injected failure"; !strings.Contains(ne.Detail, want) {
			t.Errorf("Detail %q, want the library's last error %q", ne.Detail, want)
		}
	})
	// The creation fails after it started: the error of the asynchronous
	// state, and the half-made communicator is aborted.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_ASYNC_FAIL=6"}}, func(t *testing.T) {
		c, err := nccl.Init(1, 0, newFakeID(t), nil)
		if c != nil || !errors.Is(err, nccl.ErrRemote) {
			t.Fatalf("Init: %v, %v; want ErrRemote", c, err)
		}
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.RemoteError {
			t.Errorf("%v is not an *nccl.Error with RemoteError", err)
		}
		if n := faketest.Calls(t, "ncclCommAbort"); n != 1 {
			t.Errorf("the failed communicator was aborted %d times, want once", n)
		}
	})
	// Without a CUDA driver nothing reaches NCCL.
	faketest.Run(t, faketest.Env{NoCUDA: true}, func(t *testing.T) {
		_, err := nccl.Init(1, 0, nccl.UniqueID{1}, nil)
		if !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Errorf("Init without a CUDA driver: %v", err)
		}
	})
}

// Blocking's doc: NCCL_COMM_BLOCKING=0 makes NCCL run a communicator whose
// config asks for blocking non-blocking, and Blocking says so.
func TestBlockingFollowsNCCLCommBlocking(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_COMM_BLOCKING=0"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{Blocking: nccl.Ptr(true)})
		if err := c.Wait(context.Background()); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if c.Blocking() {
			t.Error("Blocking() = true for a communicator NCCL_COMM_BLOCKING=0 made non-blocking")
		}
		if err := c.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
}

package nccl_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
)

// initOne creates a one-rank communicator on device 0.
func initOne(t testing.TB) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	c, err := nccl.Init(1, 0, id, nil)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return c
}

func TestGPUInitIdentityDestroy(t *testing.T) {
	r := gputest.Require(t)
	t.Logf("NCCL %s", r)
	c := initOne(t)
	if !c.IsValid() || c.Handle() == 0 {
		t.Fatalf("after Init: IsValid %v Handle %#x", c.IsValid(), c.Handle())
	}
	n, err := c.NRanks()
	if err != nil || n != 1 {
		t.Errorf("NRanks = %d, %v; want 1", n, err)
	}
	rank, err := c.Rank()
	if err != nil || rank != 0 {
		t.Errorf("Rank = %d, %v; want 0", rank, err)
	}
	dev, err := c.Device()
	if err != nil || dev != 0 {
		t.Errorf("Device = %v, %v; want cuda:0", dev, err)
	}
	if s := c.String(); !strings.Contains(s, "rank 0/1") || !strings.Contains(s, "cuda:0") {
		t.Errorf("String = %q", s)
	}
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if c.IsValid() || c.Handle() != 0 {
		t.Errorf("after Destroy: IsValid %v Handle %#x", c.IsValid(), c.Handle())
	}
	if err := c.Destroy(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("second Destroy = %v, want ErrClosed", err)
	}
	if err := c.Abort(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Abort after Destroy = %v, want ErrClosed", err)
	}
}

// accessors lists every identity and capability accessor, for the null and
// destroyed cases.
func accessors(c *nccl.Communicator) map[string]func() error {
	return map[string]func() error{
		"NRanks":           func() error { _, err := c.NRanks(); return err },
		"Rank":             func() error { _, err := c.Rank(); return err },
		"Device":           func() error { _, err := c.Device(); return err },
		"CUDADevice":       func() error { _, err := c.CUDADevice(); return err },
		"NVMLDevice":       func() error { _, err := c.NVMLDevice(); return err },
		"DeviceAPISupport": func() error { _, err := c.DeviceAPISupport(); return err },
		"MultimemSupport":  func() error { _, err := c.MultimemSupport(); return err },
		"GINType":          func() error { _, err := c.GINType(); return err },
		"NumLSATeams":      func() error { _, err := c.NumLSATeams(); return err },
		"HostRMASupport":   func() error { _, err := c.HostRMASupport(); return err },
		"RailedGINType":    func() error { _, err := c.RailedGINType(); return err },
		"Properties":       func() error { _, err := c.Properties(); return err },
		"AsyncError":       func() error { return c.AsyncError() },
		"LastError":        func() error { _, err := c.LastError(); return err },
		"Wait":             func() error { return c.Wait(context.Background()) },
	}
}

func TestGPUAccessorsOnNullAndDestroyed(t *testing.T) {
	gputest.Require(t)
	var null nccl.Communicator
	for op, f := range accessors(&null) {
		err := f()
		if !errors.Is(err, nccl.ErrNotInitialized) || !strings.HasPrefix(err.Error(), "nccl: "+op+": ") {
			t.Errorf("null: %s: %v, want ErrNotInitialized naming the operation", op, err)
		}
	}
	if null.String() != "nccl.Communicator(null)" || null.IsValid() {
		t.Errorf("null String %q IsValid %v", null.String(), null.IsValid())
	}
	for name, f := range map[string]func() error{"Destroy": null.Destroy, "Abort": null.Abort, "Finalize": null.Finalize} {
		if err := f(); err != nil {
			t.Errorf("%s on null = %v, want nil", name, err)
		}
	}
	c := initOne(t)
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	for op, f := range accessors(c) {
		err := f()
		if !errors.Is(err, nccl.ErrNotInitialized) || !errors.Is(err, nccl.ErrClosed) || !strings.HasPrefix(err.Error(), "nccl: "+op+": ") {
			t.Errorf("destroyed: %s: %v, want ErrNotInitialized and ErrClosed naming the operation", op, err)
		}
	}
}

func TestGPUInitializeAndAbort(t *testing.T) {
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	var c nccl.Communicator
	if err := c.Initialize(1, 0, id, nil); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if err := c.Initialize(1, 0, id, nil); !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "already initialized") {
		t.Errorf("second Initialize = %v, want already initialized", err)
	}
	if err := c.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if _, err := c.NRanks(); !errors.Is(err, nccl.ErrClosed) || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("NRanks after Abort = %v", err)
	}
	// A destroyed or aborted communicator can be initialized again.
	id2, _ := nccl.NewUniqueID()
	if err := c.Initialize(1, 0, id2, nil); err != nil {
		t.Fatalf("Initialize after Abort: %v", err)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy after Finalize: %v", err)
	}
}

func TestGPUBadInput(t *testing.T) {
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := cuda.Count()
	cases := []struct {
		name string
		call func() error
		arg  string
	}{
		{"nranks 0", func() error { _, err := nccl.Init(0, 0, id, nil); return err }, "nranks"},
		{"nranks -3", func() error { _, err := nccl.Init(-3, 0, id, nil); return err }, "nranks"},
		{"rank -1", func() error { _, err := nccl.Init(2, -1, id, nil); return err }, "rank"},
		{"rank == nranks", func() error { _, err := nccl.Init(2, 2, id, nil); return err }, "rank"},
		{"zero id", func() error { _, err := nccl.Init(1, 0, nccl.UniqueID{}, nil); return err }, "id"},
		{"device out of range", func() error {
			_, err := nccl.Init(1, 0, id, &nccl.Config{Device: nccl.Ptr(n + 7)})
			return err
		}, "Config.Device"},
		{"negative device", func() error { _, err := nccl.Init(1, 0, id, &nccl.Config{Device: nccl.Ptr(-1)}); return err }, "Config.Device"},
		{"MinCTAs > MaxCTAs", func() error {
			_, err := nccl.Init(1, 0, id, &nccl.Config{MinCTAs: nccl.Ptr(8), MaxCTAs: nccl.Ptr(4)})
			return err
		}, "Config.MinCTAs"},
		{"empty InitAll", func() error { _, err := nccl.InitAll([]int{}); return err }, "devices"},
		{"InitAll bad device", func() error { _, err := nccl.InitAll([]int{n + 3}); return err }, "Config.Device"},
	}
	for _, tc := range cases {
		err := tc.call()
		var ae *nccl.ArgError
		if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("%s: %v, want an ArgError on %s", tc.name, err, tc.arg)
		}
	}
	var u nccl.UniqueID
	if err := u.UnmarshalBinary(make([]byte, 127)); !errors.Is(err, nccl.ErrInvalidArgument) {
		t.Errorf("127-byte id: %v", err)
	}
}

func TestGPUInitAll(t *testing.T) {
	gputest.Require(t)
	n, _ := cuda.Count()
	comms, err := nccl.InitAll(nil)
	if err != nil {
		t.Fatalf("InitAll(nil): %v", err)
	}
	if len(comms) != n {
		t.Fatalf("InitAll(nil) gave %d communicators for %d GPUs", len(comms), n)
	}
	for i, c := range comms {
		nr, err1 := c.NRanks()
		r, err2 := c.Rank()
		d, err3 := c.Device()
		if nr != n || r != i || int(d) != i || err1 != nil || err2 != nil || err3 != nil {
			t.Errorf("comm %d: nranks %d rank %d device %v (%v; %v; %v; async %v)", i, nr, r, d, err1, err2, err3, c.AsyncError())
		}
	}
	if err := nccl.DestroyAll(comms...); err != nil {
		t.Errorf("DestroyAll: %v", err)
	}
	r, _ := nccl.Version()
	two, err := nccl.InitAll([]int{0, 0})
	if gputest.MultiRankGPU() != nil {
		if !errors.Is(err, nccl.ErrInvalidArgument) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("InitAll([0 0]) on NCCL %s: %v, want a clear refusal", r, err)
		}
	} else if err != nil {
		t.Errorf("InitAll([0 0]) on NCCL %s with NCCL_MULTI_RANK_GPU_ENABLE=1: %v", r, err)
	}
	// Where ranks may share a GPU, the call succeeds: destroy what it made.
	if err == nil {
		if err := nccl.DestroyAll(two...); err != nil {
			t.Errorf("DestroyAll of InitAll([0 0]): %v", err)
		}
	}
}

// TestGPUTwoRanksOneProcess: on NCCL >= 2.30.3 with NCCL_MULTI_RANK_GPU_ENABLE=1,
// two ranks of this process share GPU 0.
func TestGPUTwoRanksOneProcess(t *testing.T) {
	gputest.Require(t)
	if err := gputest.MultiRankGPU(); err != nil {
		t.Skipf("two ranks on one GPU in one process: %v", err)
	}
	comms, err := nccl.InitAll([]int{0, 0})
	if err != nil {
		t.Fatalf("InitAll([0 0]): %v", err)
	}
	for i, c := range comms {
		n, err1 := c.NRanks()
		r, err2 := c.Rank()
		d, err3 := c.Device()
		if n != 2 || r != i || d != 0 || err1 != nil || err2 != nil || err3 != nil {
			t.Errorf("comm %d: %v: %v; %v; %v", i, c, err1, err2, err3)
		}
	}
	if err := nccl.DestroyAll(comms...); err != nil {
		t.Errorf("DestroyAll: %v", err)
	}
}

// TestGPUTwoRanksTwoProcesses: two ranks, two processes, one GPU, distinct
// NCCL_HOSTID (works on stock NCCL).
func TestGPUTwoRanksTwoProcesses(t *testing.T) {
	gputest.RunRanks(t, 2, 90*time.Second, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		c, err := nccl.Init(nranks, rank, id, nil)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		n, _ := c.NRanks()
		r, _ := c.Rank()
		if n != nranks || r != rank {
			t.Errorf("rank %d: NRanks %d Rank %d", rank, n, r)
		}
		checkProperties(t, c, rank, nranks)
		if err := c.Destroy(); err != nil {
			t.Errorf("rank %d: Destroy: %v", rank, err)
		}
	})
}

// checkProperties compares the capability properties with the classic
// queries, or checks they are unsupported where the loaded NCCL lacks them.
func checkProperties(t *testing.T, c *nccl.Communicator, rank, nranks int) {
	t.Helper()
	r, _ := nccl.Version()
	p, err := c.Properties()
	if r < 22902 {
		var ue *nccl.UnsupportedError
		if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ue) || ue.Feature != "ncclCommQueryProperties" || ue.Since.String() != "2.29.2" {
			t.Errorf("Properties on NCCL %s = %v, want ncclCommQueryProperties unsupported before 2.29.2", r, err)
		}
		if _, err := c.GINType(); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("GINType on NCCL %s = %v, want ErrUnsupported", r, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Properties on NCCL %s: %v", r, err)
	}
	dev, _ := c.Device()
	if p.Rank != rank || p.NRanks != nranks || p.CUDADevice != int(dev) {
		t.Errorf("properties %+v disagree with rank %d/%d on %v", p, rank, nranks, dev)
	}
	if wide := p.NumLSATeams != nil; wide != (r >= 22907) {
		t.Errorf("NCCL %s: later fields present = %v", r, wide)
	}
	if p.NumLSATeams != nil {
		if *p.NumLSATeams < 1 || p.HostRMASupport == nil || p.RailedGINType == nil {
			t.Errorf("NCCL %s: later fields %+v: want at least one LSA team and every field present", r, p)
		}
	}
	if p.GINType.String() == "" || strings.HasPrefix(p.GINType.String(), "ncclGinType(") {
		t.Errorf("GIN type %v", p.GINType)
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Errorf("properties to JSON: %v", err)
	}
	t.Logf("rank %d properties: %s", rank, js)
}

func TestGPUProperties(t *testing.T) {
	gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()
	checkProperties(t, c, 0, 1)
}

// TestGPUInitTimeout: a non-blocking init whose peer never arrives returns
// within its deadline, aborted, with both the context's and NCCL's state visible, and
// leaves no goroutine behind.
func TestGPUInitTimeout(t *testing.T) {
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	// Only a non-blocking communicator's init can be cut short.
	c, err := nccl.InitContext(ctx, 2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
	took := time.Since(start)
	if err == nil {
		c.Destroy()
		t.Fatal("Init of 2 ranks with one rank succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nccl.ErrInProgress) {
		t.Errorf("err = %v, want DeadlineExceeded and ErrInProgress", err)
	}
	if took > 4*time.Second {
		t.Errorf("returned after %v, deadline 2s", took)
	}
	for i := 0; i < 50 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Errorf("%d goroutines before, %d after", before, g)
	}
	t.Logf("returned after %v: %v", took, err)
}

func TestGPUNCCLLibrary(t *testing.T) {
	r := gputest.Require(t)
	p, err := nccl.LibraryPath()
	if err != nil || p == "" {
		t.Fatalf("LibraryPath = %q, %v", p, err)
	}
	if want := os.Getenv("NCCL_LIBRARY"); want != "" && p != want {
		t.Logf("NCCL_LIBRARY=%s, loaded %s", want, p)
	}
	if r < nccl.MinRelease || r.Major() != 2 {
		t.Errorf("Version %s", r)
	}
	s, err := nccl.ErrorString(nccl.InvalidUsage)
	if err != nil || s == "" {
		t.Errorf("ErrorString = %q, %v", s, err)
	}
	t.Logf("NCCL %s from %s", r, p)
}

package nccl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
)

// GPU tests of registration.go, window.go, memalloc.go and onesided.go.

func TestGPURegistrationOneRank(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()

	plain, err := cuda.Alloc[float32](0, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Free()
	rb, err := c.RegisterBuffer(nccl.BufferOf(plain))
	if err != nil {
		t.Fatalf("RegisterBuffer: %v", err)
	}
	if h, err := rb.Handle(); err != nil {
		t.Errorf("Handle = %#x, %v", h, err)
	}
	if err := rb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := rb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// A buffer of another device (no second GPU needed to name one).
	_, err = c.RegisterBuffer(nccl.RawBuffer(plain.Ptr(), 16, nccl.Float32, 1))
	wantArg(t, "buffer of another device", err, "buf")

	mem, err := nccl.MemAlloc[float32](0, 1<<16)
	if err != nil {
		t.Fatalf("MemAlloc: %v", err)
	}
	defer mem.Free()
	if mem.Ptr()%4096 != 0 {
		t.Errorf("MemAlloc memory at %#x", mem.Ptr())
	}
	w, err := c.RegisterWindow(nccl.BufferOf(mem), nccl.WindowCollSymmetric)
	switch {
	case errors.Is(err, nccl.ErrNoWindow):
		t.Logf("NCCL %s made no window for one rank: %v", r, err)
	case err != nil:
		t.Fatalf("RegisterWindow: %v", err)
	default:
		checkWindowOneRank(t, r, c, w, mem)
	}

	// A window buffer that is not cuMem memory: NCCL refuses it, makes no
	// window where it has no symmetric memory, or (2.28, one rank) accepts
	// it as a local registration. Whatever it does, the binding reports it
	// cleanly and the window closes.
	wp, err := c.RegisterWindow(nccl.BufferOf(plain), 0)
	var ne *nccl.Error
	switch {
	case err == nil && wp != nil:
		t.Logf("NCCL %s accepted a window of cuMemAlloc memory: %v", r, wp)
		if err := wp.Close(); err != nil {
			t.Errorf("closing it: %v", err)
		}
	case errors.As(err, &ne) || errors.Is(err, nccl.ErrNoWindow):
		t.Logf("window of cuMemAlloc memory: %v", err)
	default:
		t.Errorf("window of cuMemAlloc memory = %v, %v; want a window, NCCL's refusal or ErrNoWindow", wp, err)
	}
	part, _ := mem.Sub(1, 1000)
	_, err = c.RegisterWindow(nccl.BufferOf(part), 0)
	if r >= 22803 {
		wantArg(t, "unaligned window buffer", err, "buf")
	}
	_, err = c.RegisterWindow(nccl.BufferOf(mem), 16)
	wantArg(t, "window flags 16", err, "flags")
	_, err = c.RegisterWindow(nccl.BufferOf(mem), nccl.WindowStrictOrdering)
	if r < 22907 {
		sinceOK(t, "WindowStrictOrdering", err, r, 22907, "NCCL_WIN_STRICT_ORDERING")
	}

	// One-sided calls: unsupported before 2.29.2; with one rank, and
	// without host RMA support, refused with a clear error.
	s := cuda.Device(0).DefaultStream()
	err = c.Signal(0, s)
	if sinceOK(t, "Signal", err, r, 22902, "ncclSignal") {
		t.Logf("Signal to self: %v", err)
	}
	sinceOK(t, "WaitSignal", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 0, OpCount: 1}}, s), r, 22902, "ncclWaitSignal")
	if r < 22902 {
		sinceOK(t, "PutSignal", c.PutSignal(nccl.BufferOf(mem), 0, nil, 0, s), r, 22902, "ncclPutSignal")
	}
	wantArg(t, "WaitSignal with no descriptor", c.WaitSignal(nil, s), "descs")

	// Destroy closes what is open; Close afterwards is nil; registering
	// after Destroy fails.
	d := initOne(t)
	rb2, err := d.RegisterBuffer(nccl.BufferOf(plain))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(); err != nil {
		t.Fatalf("Destroy with a registered buffer: %v", err)
	}
	if err := rb2.Close(); err != nil {
		t.Errorf("Close after Destroy: %v", err)
	}
	if _, err := d.RegisterBuffer(nccl.BufferOf(plain)); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("RegisterBuffer after Destroy: %v", err)
	}
	if _, err := d.RegisterWindow(nccl.BufferOf(mem), 0); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("RegisterWindow after Destroy: %v", err)
	}
}

// checkWindowOneRank checks a window of one rank's MemAlloc memory.
func checkWindowOneRank(t *testing.T, r nccl.Release, c *nccl.Communicator, w *nccl.Window, mem cuda.Slice[float32]) {
	t.Helper()
	h, err := w.Handle()
	if err != nil || h == 0 {
		t.Fatalf("Handle = %#x, %v", h, err)
	}
	p, err := w.UserPtr()
	if sinceOK(t, "UserPtr", err, r, 22902, "ncclWinGetUserPtr") && (err != nil || p != mem.Ptr()) {
		t.Errorf("UserPtr = %#x, %v; want %#x", p, err, mem.Ptr())
	}
	p, err = w.LSAPointer(0, 64)
	if sinceOK(t, "LSAPointer", err, r, 22902, "ncclGetLsaDevicePointer") && (err != nil || p == 0) {
		t.Errorf("LSAPointer(0, 64) = %#x, %v", p, err)
	}
	p, err = w.PeerPointer(0, 0)
	if sinceOK(t, "PeerPointer", err, r, 22902, "ncclGetPeerDevicePointer") && (err != nil || p == 0) {
		t.Errorf("PeerPointer(0, 0) = %#x, %v", p, err)
	}
	p, err = w.MultimemPointer(0)
	if sinceOK(t, "MultimemPointer", err, r, 22902, "ncclGetLsaMultimemDevicePointer") &&
		err != nil && !errors.Is(err, nccl.ErrUnsupported) {
		t.Errorf("MultimemPointer = %#x, %v", p, err)
	}
	_, err = w.LSAPointer(0, w.Size())
	if r >= 22902 {
		wantArg(t, "offset past the window", err, "offsetBytes")
	} else {
		sinceOK(t, "LSAPointer past the window", err, r, 22902, "ncclGetLsaDevicePointer")
	}
	err = c.PutSignal(nccl.BufferOf(mem), 0, w, 0, cuda.Device(0).DefaultStream())
	sinceOK(t, "PutSignal", err, r, 22902, "ncclPutSignal")
	t.Logf("PutSignal to self on one rank: %v", err)
	if err := w.Close(); err != nil {
		t.Errorf("Window.Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Window.Close: %v", err)
	}
	if _, err := w.Handle(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Handle after Close: %v", err)
	}
}

// Two ranks: a non-blocking init completing through Wait, windows
// (registered directly and inside a group), one-sided signals where the
// communicator supports them, and a device communicator.
func TestGPURegistrationRanks(t *testing.T) {
	gputest.RunRanks(t, 2, 90*time.Second, nil, func(t *testing.T, rank, n int, id nccl.UniqueID) {
		r, err := nccl.Version()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
		defer cancel()
		c, err := nccl.InitContext(ctx, n, rank, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatalf("rank %d: non-blocking Init: %v", rank, err)
		}
		defer c.DestroyContext(ctx)
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("rank %d: Wait for the non-blocking init: %v", rank, err)
		}
		if cn, cr := identity(t, c); cn != n || cr != rank {
			t.Fatalf("rank %d: %d/%d", rank, cr, cn)
		}

		// A blocking child, from a non-blocking split.
		b, err := c.SplitContext(ctx, 0, rank, &nccl.Config{Blocking: nccl.Ptr(true)})
		if err != nil {
			t.Fatalf("rank %d: Split: %v", rank, err)
		}
		if err := b.Wait(ctx); err != nil {
			t.Fatalf("rank %d: child Wait: %v", rank, err)
		}
		defer b.DestroyContext(ctx)

		mem, err := nccl.MemAlloc[float32](0, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()

		// On the non-blocking communicator: known after Wait.
		w, err := c.RegisterWindowContext(ctx, nccl.BufferOf(mem), nccl.WindowCollSymmetric)
		if errors.Is(err, nccl.ErrNoWindow) {
			// Ranks on separate "hosts" (NCCL_HOSTID) share no memory.
			t.Logf("rank %d: NCCL made no window across hosts: %v", rank, err)
			return
		}
		if err != nil {
			t.Fatalf("rank %d: RegisterWindow (non-blocking): %v", rank, err)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("rank %d: Wait for the window: %v", rank, err)
		}
		haveWindow := checkWindowKind(t, rank, "non-blocking", w)

		// On the blocking child, inside a group: known at the group's end.
		var gw *nccl.Window
		err = nccl.GroupContext(ctx, func() error {
			var err error
			gw, err = b.RegisterWindow(nccl.BufferOf(mem), 0)
			return err
		})
		if err != nil {
			t.Fatalf("rank %d: RegisterWindow in a group: %v", rank, err)
		}
		if checkWindowKind(t, rank, "grouped", gw) != haveWindow {
			t.Errorf("rank %d: a window on one communicator but not on its child", rank)
		}
		gw.Close()

		if haveWindow {
			exchangeSignals(t, r, c, w, mem, rank)
		} else if r < 22902 {
			sinceOK(t, "Signal", c.Signal(1-rank, cuda.Stream{}), r, 22902, "ncclSignal")
		}
		if err := w.Close(); err != nil {
			t.Errorf("rank %d: Window.Close: %v", rank, err)
		}
		checkDevCommRanks(t, r, b, rank, n)
	})
}

// checkWindowKind checks that a window is either usable or absent with
// ErrNoWindow (ranks on distinct "hosts" may have no symmetric memory).
func checkWindowKind(t *testing.T, rank int, what string, w *nccl.Window) bool {
	t.Helper()
	h, err := w.Handle()
	switch {
	case err == nil && h != 0:
		return true
	case errors.Is(err, nccl.ErrNoWindow) && errors.Is(err, nccl.ErrUnsupported):
		t.Logf("rank %d: %s window: none: %v", rank, what, err)
		return false
	}
	t.Errorf("rank %d: %s window: Handle = %#x, %v; want a window or ErrNoWindow", rank, what, h, err)
	return false
}

// exchangeSignals: rank 0 puts 4 elements into rank 1's window at element
// 100 and signals; rank 1 waits and reads them.
func exchangeSignals(t *testing.T, r nccl.Release, c *nccl.Communicator, w *nccl.Window, mem cuda.Slice[float32], rank int) {
	t.Helper()
	s := cuda.Device(0).DefaultStream()
	if r < 22902 {
		sinceOK(t, "PutSignal", c.PutSignal(nccl.BufferOf(mem), 1-rank, w, 0, s), r, 22902, "ncclPutSignal")
		return
	}
	rma, err := c.HostRMASupport()
	switch {
	case r < 22907:
		t.Logf("NCCL %s does not report host RMA support: the exchange is not tried", r)
		return
	case err != nil:
		t.Fatalf("HostRMASupport: %v", err)
	case !rma:
		if err := c.Signal(1-rank, s); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("rank %d: Signal without host RMA: %v, want ErrUnsupported", rank, err)
		}
		return
	}
	src, _ := mem.Sub(0, 4)
	if rank == 0 {
		if err := src.CopyFromHost([]float32{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
		if err := c.PutSignal(nccl.BufferOf(src), 1, w, 100, s); err != nil {
			t.Fatalf("PutSignal: %v", err)
		}
	} else {
		if err := c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 0, OpCount: 1}}, s); err != nil {
			t.Fatalf("WaitSignal: %v", err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rank == 1 {
		got, err := mem.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		if got[100] != 1 || got[103] != 4 {
			t.Errorf("rank 1 window after PutSignal at element 100: %v", got[100:104])
		}
	}
}

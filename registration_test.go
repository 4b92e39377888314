package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CPU tests of registration.go, window.go, memalloc.go and onesided.go on the
// fake libraries.

func mustAlloc[T cuda.Elem](t *testing.T, dev cuda.Device, n int) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.Alloc[T](dev, n)
	if err != nil {
		t.Fatalf("cuda.Alloc: %v", err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

func mustMemAlloc[T cuda.Elem](t *testing.T, dev cuda.Device, n int) cuda.Slice[T] {
	t.Helper()
	s, err := nccl.MemAlloc[T](dev, n)
	if err != nil {
		t.Fatalf("MemAlloc: %v", err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

func TestFakeRegisterBuffer(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustAlloc[float32](t, 0, 256)
		rb, err := c.RegisterBuffer(nccl.BufferOf(buf))
		if err != nil {
			t.Fatalf("RegisterBuffer: %v", err)
		}
		if h, err := rb.Handle(); err != nil || h == 0 {
			t.Errorf("Handle = %#x, %v", h, err)
		}
		if rb.Size() != 1024 || rb.Buffer().Ptr != buf.Ptr() {
			t.Errorf("size %d buffer %v", rb.Size(), rb.Buffer())
		}
		if err := rb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := rb.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := rb.Handle(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Handle after Close: %v", err)
		}
		other := mustAlloc[float32](t, 1, 16)
		_, err = c.RegisterBuffer(nccl.BufferOf(other))
		wantArg(t, "buffer of another device", err, "buf")
		freed, _ := cuda.Alloc[float32](0, 4)
		freed.Free()
		_, err = c.RegisterBuffer(nccl.BufferOf(freed))
		wantArg(t, "freed buffer", err, "buf")
		_, err = c.RegisterBuffer(nccl.Buffer{})
		wantArg(t, "zero buffer", err, "buf")

		// Destroy deregisters what is still registered; Close after it is nil.
		rb2, err := c.RegisterBuffer(nccl.BufferOf(buf))
		if err != nil {
			t.Fatal(err)
		}
		before := faketest.Calls(t, "ncclCommDeregister")
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if n := faketest.Calls(t, "ncclCommDeregister") - before; n != 1 {
			t.Errorf("Destroy made %d ncclCommDeregister calls, want 1", n)
		}
		if err := rb2.Close(); err != nil {
			t.Errorf("Close after Destroy: %v", err)
		}
		if _, err := c.RegisterBuffer(nccl.BufferOf(buf)); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("RegisterBuffer after Destroy: %v, want ErrClosed", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_LOCAL_REGISTER=0"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		rb, err := c.RegisterBuffer(nccl.BufferOf(mustAlloc[int32](t, 0, 8)))
		if err != nil {
			t.Fatal(err)
		}
		if h, err := rb.Handle(); err != nil || h != 0 {
			t.Errorf("Handle with local registration off = %#x, %v; want 0", h, err)
		}
		if err := rb.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestFakeMemAlloc(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := nccl.MemAlloc[float64](1, 10)
		if err != nil {
			t.Fatal(err)
		}
		if s.Device() != 1 || s.Len() != 10 || s.Ptr()%4096 != 0 {
			t.Errorf("MemAlloc gave %v elements on %v at %#x", s.Len(), s.Device(), s.Ptr())
		}
		if err := s.CopyFromHost(make([]float64, 10)); err != nil {
			t.Errorf("copy into MemAlloc memory: %v", err)
		}
		if err := s.Free(); err != nil {
			t.Errorf("Free: %v", err)
		}
		if faketest.Calls(t, "ncclMemFree") != 1 {
			t.Errorf("Free did not call ncclMemFree")
		}
		if err := s.Free(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("second Free: %v", err)
		}
		_, err = nccl.MemAlloc[float32](0, 0)
		wantArg(t, "0 elements", err, "n")
		_, err = nccl.MemAlloc[float32](7, 1)
		wantArg(t, "missing device", err, "dev")
		p, err := nccl.MemAllocRaw(0, 100)
		if err != nil || p == 0 {
			t.Fatalf("MemAllocRaw = %#x, %v", p, err)
		}
		if err := nccl.MemFree(p); err != nil {
			t.Errorf("MemFree: %v", err)
		}
		if err := nccl.MemFree(p); !errors.Is(err, nccl.ErrUnhandledCUDA) {
			t.Errorf("second MemFree: %v", err)
		}
	})
}

func TestFakeWindow(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_LSA_TEAMS=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 1024)
		w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric|nccl.WindowStrictOrdering)
		if err != nil {
			t.Fatalf("RegisterWindow: %v", err)
		}
		if h, err := w.Handle(); err != nil || h == 0 {
			t.Fatalf("Handle = %#x, %v", h, err)
		}
		if w.Err() != nil || w.Size() != 4096 || w.Flags() != nccl.WindowCollSymmetric|nccl.WindowStrictOrdering {
			t.Errorf("window %v: err %v size %d flags %v", w, w.Err(), w.Size(), w.Flags())
		}
		if p, err := w.UserPtr(); err != nil || p != buf.Ptr() {
			t.Errorf("UserPtr = %#x, %v; want %#x", p, err, buf.Ptr())
		}
		if p, err := w.LSAPointer(0, 16); err != nil || p != buf.Ptr()+16 {
			t.Errorf("LSAPointer(0, 16) = %#x, %v", p, err)
		}
		if p, err := w.PeerPointer(1, 8); err != nil || p == 0 {
			t.Errorf("PeerPointer(1, 8) = %#x, %v", p, err)
		}
		if _, err := w.MultimemPointer(0); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("MultimemPointer without multimem: %v, want ErrUnsupported", err)
		}
		_, err = w.LSAPointer(0, 4096)
		wantArg(t, "offset past the end", err, "offsetBytes")
		_, err = w.PeerPointer(2, 0)
		wantArg(t, "peer out of range", err, "peer")
		_, err = w.LSAPointer(-1, 0)
		wantArg(t, "negative LSA rank", err, "lsaRank")
		if _, err := w.LSAPointer(5, 0); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("LSA rank beyond the team: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := w.Handle(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Handle after Close: %v", err)
		}

		// Bad input.
		_, err = c.RegisterWindow(nccl.BufferOf(buf), 0x10)
		wantArg(t, "flags 0x10", err, "flags")
		part, _ := buf.Sub(1, 100)
		_, err = c.RegisterWindow(nccl.BufferOf(part), 0)
		wantArg(t, "unaligned buffer", err, "buf")
		_, err = c.RegisterWindow(nccl.BufferOf(mustMemAlloc[float32](t, 1, 16)), 0)
		wantArg(t, "buffer of another device", err, "buf")
		plain := mustAlloc[float32](t, 0, 1024)
		if _, err := c.RegisterWindow(nccl.BufferOf(plain), 0); !errors.Is(err, nccl.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "cuMem") {
			t.Errorf("window of cuMemAlloc memory: %v, want NCCL's invalid argument", err)
		}

		// Destroy deregisters; Close and methods afterwards.
		w2, err := c.RegisterWindow(nccl.BufferOf(buf), 0)
		if err != nil {
			t.Fatal(err)
		}
		before := faketest.Calls(t, "ncclCommWindowDeregister")
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if n := faketest.Calls(t, "ncclCommWindowDeregister") - before; n != 1 {
			t.Errorf("Destroy made %d ncclCommWindowDeregister calls, want 1", n)
		}
		if err := w2.Close(); err != nil {
			t.Errorf("Close after Destroy: %v", err)
		}
		if _, err := w2.UserPtr(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("UserPtr after Destroy: %v", err)
		}
		if _, err := c.RegisterWindow(nccl.BufferOf(buf), 0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("RegisterWindow after Destroy: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := mustMemAlloc[uint8](t, 0, 8192)
		w, err := c.RegisterWindow(nccl.BufferOf(buf), 0)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := w.MultimemPointer(4096); err != nil || p == 0 {
			t.Errorf("MultimemPointer = %#x, %v", p, err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22903}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		_, err := c.RegisterWindow(nccl.BufferOf(mustMemAlloc[uint8](t, 0, 4096)), nccl.WindowStrictOrdering)
		wantUnsupported(t, "WindowStrictOrdering on 2.29.3", err, "NCCL_WIN_STRICT_ORDERING", 22907)
	})
}

// NCCL 2.32.3's window flags: WindowGINOnly (0x04) and WindowCFTCounted
// (0x08) reach ncclCommWindowRegister as nccl4py's WindowFlag values, alone
// and combined with the older flags; before 2.32.3 each is refused with an
// UnsupportedError naming it and 2.32.3, and an unknown bit with an
// ArgError, without calling NCCL.
func TestFakeWindowFlags2323(t *testing.T) {
	if nccl.WindowGINOnly != 0x04 || nccl.WindowCFTCounted != 0x08 {
		t.Fatalf("WindowGINOnly %#x, WindowCFTCounted %#x; want nccl4py's WindowFlag.GIN_ONLY 4 and CFT_COUNTED 8",
			int(nccl.WindowGINOnly), int(nccl.WindowCFTCounted))
	}
	flags := []nccl.WindowFlag{nccl.WindowGINOnly, nccl.WindowCFTCounted,
		nccl.WindowCollSymmetric | nccl.WindowStrictOrdering | nccl.WindowGINOnly | nccl.WindowCFTCounted}
	faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 1024)
		for _, f := range flags {
			w, err := c.RegisterWindow(nccl.BufferOf(buf), f)
			if err != nil {
				t.Fatalf("RegisterWindow(%#x): %v", int(f), err)
			}
			if w.Flags() != f {
				t.Errorf("Flags() = %#x, want %#x", int(w.Flags()), int(f))
			}
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		}
		var got []string
		for _, l := range faketest.LogLines(t) {
			if strings.HasPrefix(l, "window ") {
				got = append(got, l)
			}
		}
		want := []string{"window ncclCommWindowRegister flags=0x4", "window ncclCommWindowRegister flags=0x8",
			"window ncclCommWindowRegister flags=0xf"}
		if !slices.Equal(got, want) {
			t.Errorf("NCCL got %q, want %q", got, want)
		}
		_, err := c.RegisterWindow(nccl.BufferOf(buf), 0x10)
		wantArg(t, "flag 0x10 on 2.32.3", err, "flags")
	})
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 1024)
		for _, tc := range []struct {
			f    nccl.WindowFlag
			name string
		}{
			{nccl.WindowGINOnly, "NCCL_WIN_GIN_ONLY"}, {nccl.WindowCFTCounted, "NCCL_WIN_CFT_COUNTED"},
			{nccl.WindowCollSymmetric | nccl.WindowCFTCounted, "NCCL_WIN_CFT_COUNTED"},
		} {
			_, err := c.RegisterWindow(nccl.BufferOf(buf), tc.f)
			wantUnsupported(t, fmt.Sprintf("flags %#x on 2.31.2", int(tc.f)), err, tc.name, 23203)
			if err == nil || !strings.Contains(err.Error(), "requires NCCL 2.32.3, loaded 2.31.2") {
				t.Errorf("%v does not say 2.32.3 is needed", err)
			}
		}
		if n := faketest.Calls(t, "ncclCommWindowRegister"); n != 0 {
			t.Errorf("ncclCommWindowRegister called %d times", n)
		}
	})
}

// Where NCCL makes no window, the error says so and matches ErrNoWindow
// and ErrUnsupported, outside and inside a group.
func TestFakeNoWindow(t *testing.T) {
	for _, r := range []int{22803, 23007} {
		faketest.Run(t, faketest.Env{Release: r, Extra: []string{"FAKE_NCCL_NO_WINDOW=1"}}, func(t *testing.T) {
			c := fakeComm(t, 2, 0, nil)
			buf := nccl.BufferOf(mustMemAlloc[float32](t, 0, 1024))
			w, err := c.RegisterWindow(buf, 0)
			if w != nil || !errors.Is(err, nccl.ErrNoWindow) || !errors.Is(err, nccl.ErrUnsupported) ||
				!errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "no window") {
				t.Fatalf("RegisterWindow without symmetric memory = %v, %v; want ErrNoWindow", w, err)
			}
			t.Logf("%v", err)
			err = nccl.Group(func() error {
				var err error
				w, err = c.RegisterWindow(buf, 0)
				return err
			})
			if err != nil || w == nil {
				t.Fatalf("RegisterWindow in a group = %v, %v; want a window known at the end", w, err)
			}
			if _, err := w.Handle(); !errors.Is(err, nccl.ErrNoWindow) {
				t.Errorf("Handle of a window NCCL did not make: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// A window registered in a group, or on a non-blocking communicator, is
// known at the group's end or after Wait; it is tracked meanwhile.
func TestFakeWindowDeferred(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=3"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := nccl.BufferOf(mustMemAlloc[float32](t, 0, 1024))
		var w *nccl.Window
		err := nccl.Group(func() error {
			var err error
			if w, err = c.RegisterWindow(buf, 0); err != nil {
				return err
			}
			if _, err := w.Handle(); !errors.Is(err, nccl.ErrInProgress) {
				t.Errorf("Handle inside the group: %v, want ErrInProgress", err)
			}
			if err := w.Close(); !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("Close inside the group: %v, want ErrInvalidUsage", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := w.Handle(); err != nil || h == 0 {
			t.Fatalf("Handle after the group = %#x, %v", h, err)
		}
		if err := w.Close(); err != nil {
			t.Error(err)
		}

		// Inside a group, then the communicator aborted before the end: the
		// window is closed with it.
		nccl.GroupStart()
		w2, err := c.RegisterWindow(buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		nccl.GroupEnd()
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := w2.Handle(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("Handle after Abort: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=3", "FAKE_NCCL_COLL_POLLS=3"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		defer c.Abort()
		ctx := context.Background()
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		buf := nccl.BufferOf(mustMemAlloc[float32](t, 0, 1024))
		w, err := c.RegisterWindow(buf, nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Handle(); !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("Handle of a window in progress: %v", err)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		// The wait settled it: a later operation in progress does not hide it.
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		if h, err := w.Handle(); err != nil || h == 0 {
			t.Errorf("Handle after Wait = %#x, %v", h, err)
		}
	})
	// A registration that fails when it runs.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FAIL=ncclCommWindowRegister=5"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.RegisterWindow(nccl.BufferOf(mustMemAlloc[float32](t, 0, 1024)), 0)
		if !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("RegisterWindow = %v, want the injected ErrInvalidUsage", err)
		}
	})
}

func TestFakeSignals(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HOST_RMA=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		mem := mustMemAlloc[float32](t, 0, 64)
		if err := mem.CopyFromHost(func() []float32 {
			v := make([]float32, 64)
			for i := range v {
				v[i] = float32(i)
			}
			return v
		}()); err != nil {
			t.Fatal(err)
		}
		w, err := c.RegisterWindow(nccl.BufferOf(mem), nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := mem.Sub(0, 4)
		s := cuda.Device(0).DefaultStream()
		// A put to self lands offsetElems ELEMENTS into the window.
		if err := c.PutSignal(nccl.BufferOf(src), 0, w, 10, s); err != nil {
			t.Fatalf("PutSignal: %v", err)
		}
		got, _ := mem.ToHost()
		for i := 0; i < 4; i++ {
			if got[10+i] != float32(i) {
				t.Fatalf("after PutSignal at element 10: %v", got[8:16])
			}
		}
		if err := c.Signal(1, s); err != nil {
			t.Errorf("Signal: %v", err)
		}
		if err := c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 1, OpCount: 2}, {Peer: 0, OpCount: 1}}, s); err != nil {
			t.Errorf("WaitSignal: %v", err)
		}
		many := make([]nccl.WaitSignalDesc, 20)
		for i := range many {
			many[i] = nccl.WaitSignalDesc{Peer: i % 2, OpCount: 1}
		}
		if err := c.WaitSignal(many, s); err != nil {
			t.Errorf("WaitSignal of 20: %v", err)
		}
		err = nccl.Group(func() error {
			if err := c.Signal(1, s); err != nil {
				return err
			}
			return c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 1, OpCount: 1}}, s)
		})
		if err != nil {
			t.Errorf("signals in a group: %v", err)
		}
		if n := testing.AllocsPerRun(100, func() { c.Signal(1, s) }); n != 0 {
			t.Errorf("Signal allocates %v times per call", n)
		}

		// Bad input.
		wantArg(t, "Signal to rank 2", c.Signal(2, s), "peer")
		wantArg(t, "Signal on another device's stream", c.Signal(1, cuda.Device(1).DefaultStream()), "stream")
		wantArg(t, "no descriptors", c.WaitSignal(nil, s), "descs")
		wantArg(t, "peer out of range", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 2, OpCount: 1}}, s), "descs[0].Peer")
		wantArg(t, "OpCount 0", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 0, OpCount: 1}, {Peer: 1}}, s), "descs[1].OpCount")
		wantArg(t, "signal index", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 0, OpCount: 1, SignalIndex: 1}}, s), "descs[0].SignalIndex")
		wantArg(t, "context", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 0, OpCount: 1, Context: 1}}, s), "descs[0].Context")
		wantArg(t, "nil window", c.PutSignal(nccl.BufferOf(src), 1, nil, 0, s), "peerWin")
		wantArg(t, "negative offset", c.PutSignal(nccl.BufferOf(src), 1, w, -1, s), "offsetElems")
		// NCCL checks only where local starts: the binding checks where
		// the write ends in the 64-element window.
		wantArg(t, "write past the window's end", c.PutSignal(nccl.BufferOf(src), 1, w, 61, s), "offsetElems")
		wantArg(t, "offset past the window", c.PutSignal(nccl.BufferOf(src), 1, w, 1<<40, s), "offsetElems")
		if err := c.PutSignal(nccl.BufferOf(src), 1, w, 60, s); err != nil {
			t.Errorf("PutSignal of the window's last 4 elements: %v", err)
		}
		wantArg(t, "OpCount above int", c.WaitSignal([]nccl.WaitSignalDesc{{Peer: 1, OpCount: 1 << 40}}, s), "descs[0].OpCount")
		wantArg(t, "peer out of range", c.PutSignal(nccl.BufferOf(src), 3, w, 0, s), "peer")
		wantArg(t, "local on another device", c.PutSignal(nccl.BufferOf(mustAlloc[float32](t, 1, 4)), 1, w, 0, s), "local")
		other := fakeComm(t, 2, 0, nil)
		ow, err := other.RegisterWindow(nccl.BufferOf(mustMemAlloc[float32](t, 0, 64)), nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		wantArg(t, "window of another communicator", c.PutSignal(nccl.BufferOf(src), 1, ow, 0, s), "peerWin")
		outside := mustMemAlloc[float32](t, 0, 4)
		if err := c.PutSignal(nccl.BufferOf(outside), 1, w, 0, s); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("PutSignal from outside a window: %v, want NCCL's invalid argument", err)
		}
		w.Close()
		if err := c.PutSignal(nccl.BufferOf(src), 1, w, 0, s); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("PutSignal with a closed window: %v", err)
		}
	})
	// Without host RMA support (reported from 2.29.7) the binding says so.
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		err := c.Signal(1, cuda.Stream{})
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "hostRmaSupport") {
			t.Errorf("Signal without host RMA: %v", err)
		}
	})
	// 2.29.3 does not report it: NCCL refuses.
	faketest.Run(t, faketest.Env{Release: 22903}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		if err := c.Signal(1, cuda.Stream{}); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("Signal without host RMA on 2.29.3: %v", err)
		}
	})
}

// Methods on nil resources report a closed resource instead of panicking.
func TestNilResources(t *testing.T) {
	var w *nccl.Window
	var d *nccl.DevComm
	var rb *nccl.RegisteredBuffer
	for name, err := range map[string]error{
		"Window.Close": w.Close(), "DevComm.Close": d.Close(), "RegisteredBuffer.Close": rb.Close(),
	} {
		if err != nil {
			t.Errorf("%s on nil: %v", name, err)
		}
	}
	if _, err := w.Handle(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Window.Handle on nil: %v", err)
	}
	if _, err := d.Bytes(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("DevComm.Bytes on nil: %v", err)
	}
	if _, err := rb.Handle(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("RegisteredBuffer.Handle on nil: %v", err)
	}
	if w.Size() != 0 || d.Size() != 0 || rb.Size() != 0 || w.String() != "nccl.Window(nil)" {
		t.Errorf("sizes of nil resources: %d %d %d", w.Size(), d.Size(), rb.Size())
	}
}

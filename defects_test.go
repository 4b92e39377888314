package nccl_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Regression tests of the defects a review proved against the fakes
// (issue 11, part 1). Each failed before its fix.

// A non-blocking SplitContext whose parent is destroyed while the split is
// pending either returns the child NCCL made or an error, and then no
// communicator is left alive.
func TestSplitParentDestroyedNoLeak(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=20"}}, func(t *testing.T) {
		cfg := &nccl.Config{Blocking: nccl.Ptr(false)}
		ctx := context.Background()
		for i := 0; i < 60; i++ {
			parent := fakeComm(t, 2, 0, cfg)
			if err := parent.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			var (
				wg    sync.WaitGroup
				child *nccl.Communicator
				err   error
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				child, err = parent.SplitContext(ctx, 0, 0, nil)
			}()
			time.Sleep(time.Duration(i%5) * 50 * time.Microsecond)
			parent.Destroy()
			wg.Wait()
			switch {
			case err == nil && (child == nil || !child.IsValid()):
				t.Fatalf("iteration %d: SplitContext returned no error and no usable child (%v)", i, child)
			case err != nil && child != nil:
				t.Fatalf("iteration %d: SplitContext returned both a child and %v", i, err)
			case err == nil:
				if err := child.Destroy(); err != nil {
					t.Fatalf("iteration %d: child.Destroy: %v", i, err)
				}
			}
			if n := faketest.LiveComms(t); n != 0 {
				t.Fatalf("iteration %d: %d communicators alive after the parent's Destroy and SplitContext (%v), want 0", i, n, err)
			}
		}
	})
}

// Calls that queue no work (PreMulSum, MemStat) on a non-blocking
// communicator while another goroutine's group ends on it: the binding
// waits for the group's operation instead of passing NCCL's "use before
// the previous operation returned" refusal on.
func TestReadinessRacesGroupEnd(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_COLL_POLLS=3"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		defer c.Destroy()
		if err := c.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		mem, err := cuda.AllocFrom(0, []float32{1})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()
		buf := nccl.BufferOf(mem)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := nccl.Group(func() error { return c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}) })
				if err != nil && !errors.Is(err, nccl.ErrInvalidUsage) {
					t.Errorf("group: %v", err)
					return
				}
			}
		}()
		deadline := time.Now().Add(time.Second)
		calls := 0
		for time.Now().Before(deadline) {
			op, err := nccl.PreMulSum(c, float32(2))
			if err == nil {
				err = op.Close()
			}
			if err != nil && !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Fatalf("PreMulSum after %d calls: %v", calls, err)
			}
			if _, err := c.MemStat(nccl.MemStatGPUMemTotal); err != nil {
				t.Fatalf("MemStat after %d calls: %v", calls, err)
			}
			calls++
		}
		close(stop)
		wg.Wait()
		t.Logf("%d calls raced group ends", calls)
	})
}

// A Buffer made from a Slice before the Slice was freed is refused.
func TestBufferOfFreedLater(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		defer c.Destroy()
		mem, err := cuda.Alloc[float32](0, 4)
		if err != nil {
			t.Fatal(err)
		}
		buf := nccl.BufferOf(mem)
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce before Free: %v", err)
		}
		if err := mem.Free(); err != nil {
			t.Fatal(err)
		}
		err = c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{})
		if !errors.Is(err, nccl.ErrClosed) || !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Fatalf("AllReduce of a Buffer whose Slice was freed after BufferOf: %v, want ErrClosed and ErrInvalidArgument", err)
		}
		if n := faketest.Calls(t, "ncclAllReduce"); n != 1 {
			t.Errorf("ncclAllReduce called %d times, want once (the freed buffer must not reach NCCL)", n)
		}
	})
}

// Raw device addresses are checked against the driver before NCCL sees
// them: not device memory, on another device, or running past the end of
// their allocation.
func TestRawBufferChecked(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		defer c.Destroy()
		mem, err := cuda.Alloc[float32](0, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()
		other, err := cuda.Alloc[float32](1, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Free()
		good := nccl.RawBuffer(mem.Ptr(), 4, nccl.Float32, 0)
		if err := c.AllReduce(good, good, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce of a good raw buffer: %v", err)
		}
		sub := nccl.RawBuffer(mem.Ptr()+4, 3, nccl.Float32, 0)
		if err := c.AllReduce(sub, sub, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce of the tail of an allocation: %v", err)
		}
		for _, tc := range []struct {
			name string
			buf  nccl.Buffer
			want string
		}{
			{"bogus", nccl.RawBuffer(0x1234, 4, nccl.Float32, 0), "not device memory"},
			{"past the end", nccl.RawBuffer(mem.Ptr()+4, 4, nccl.Float32, 0), "past the end of its allocation"},
			{"other device", nccl.RawBuffer(other.Ptr(), 4, nccl.Float32, 0), "memory of cuda:1"},
			{"literal", nccl.Buffer{Ptr: 0x5678, Count: 1, Type: nccl.Float32}, "not device memory"},
		} {
			err := c.AllReduce(tc.buf, tc.buf, nccl.Sum, cuda.Stream{})
			wantArgErr(t, err, "AllReduce", "send", tc.want)
			if err := tc.buf.Err(); err == nil {
				t.Errorf("%s: Buffer.Err() = nil", tc.name)
			}
		}
		if err := good.Err(); err != nil {
			t.Errorf("Err of a good raw buffer: %v", err)
		}
		// A Buffer of a Slice grown past its allocation by hand.
		grown := nccl.BufferOf(mem)
		grown.Count = 8
		wantArgErr(t, c.AllReduce(grown, grown, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "past the end of its allocation")
		if n := faketest.Calls(t, "ncclAllReduce"); n != 2 {
			t.Errorf("ncclAllReduce called %d times, want 2 (only the good buffers)", n)
		}
	})
}

// Destroy while a blocking Initialize is inside NCCL does not return nil
// with the communicator left alive: it reports the init in progress, and
// the init destroys what NCCL returns.
func TestDestroyDuringBlockingInit(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_INIT_DELAY_MS=200"}}, func(t *testing.T) {
		c := new(nccl.Communicator)
		id := newFakeID(t)
		done := make(chan error, 1)
		go func() { done <- c.Initialize(1, 0, id, nil) }()
		time.Sleep(50 * time.Millisecond)
		err := c.Destroy()
		if !errors.Is(err, nccl.ErrInProgress) {
			t.Fatalf("Destroy during a blocking Initialize: %v, want ErrInProgress", err)
		}
		if err := <-done; !errors.Is(err, nccl.ErrClosed) {
			t.Fatalf("Initialize after a Destroy during it: %v, want ErrClosed", err)
		}
		if c.IsValid() {
			t.Fatal("communicator valid after Destroy during its init")
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Fatalf("%d communicators alive, want 0", n)
		}
	})
}

// Concurrent Destroy calls: one destroys, the others report ErrClosed (or
// nil), never a spurious "already finalized".
func TestConcurrentDestroy(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for i := 0; i < 600; i++ {
			c := fakeComm(t, 1, 0, nil)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for g := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[g] = c.Destroy()
				}()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, nccl.ErrClosed):
				default:
					t.Fatalf("iteration %d: concurrent Destroy: %v", i, err)
				}
			}
			if ok != 1 {
				t.Fatalf("iteration %d: %d Destroy calls returned nil, want exactly 1: %v", i, ok, errs)
			}
		}
	})
}

// Finalize after Destroy or Abort says the communicator is closed, and
// Grow on a closed communicator does not silently join as a new rank.
func TestClosedCommunicatorRefuses(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for _, end := range []string{"Destroy", "Abort"} {
			c := fakeComm(t, 1, 0, nil)
			if end == "Destroy" {
				c.Destroy()
			} else {
				c.Abort()
			}
			if err := c.Finalize(); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Finalize after %s: %v, want ErrClosed", end, err)
			}
			id := newFakeID(t)
			g, err := c.Grow(2, &id, 1, nil)
			if !errors.Is(err, nccl.ErrClosed) || g != nil {
				t.Errorf("Grow after %s: %v, %v; want ErrClosed and no communicator", end, g, err)
			}
		}
		if n := faketest.LiveComms(t); n != 0 {
			t.Fatalf("%d communicators alive, want 0", n)
		}
	})
}

// Review findings, each failing before its fix.

// Goroutines checking one bad raw buffer at once: no data race (-race), and
// every one refuses it.
func TestRawBufferVerifyConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s := collSlice(t, 0, f32s(16)...)
		for i := 0; i < 50; i++ {
			b := nccl.RawBuffer(s.Ptr(), 1024, nccl.Float32, 0) // runs past the allocation
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if err := b.Err(); err == nil {
						t.Error("bad buffer accepted")
					}
				}()
			}
			close(start)
			wg.Wait()
		}
	})
}

// An AbortCause that Abort refused records no cause, and a communicator
// initialized again does not carry the last one's.
func TestAbortCauseOnlyWhenAborted(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		cause := errors.New("watchdog: operation timed out")
		c := fakeComm(t, 1, 0, nil)
		if err := nccl.GroupStart(); err != nil {
			t.Fatal(err)
		}
		err := c.AbortCause(cause)
		if err2 := nccl.GroupEnd(); err2 != nil {
			t.Fatal(err2)
		}
		if !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Fatalf("AbortCause inside a group: %v, want ErrInvalidUsage", err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NRanks(); errors.Is(err, cause) {
			t.Errorf("a refused AbortCause's reason stuck: %v", err)
		}

		var d nccl.Communicator
		if err := d.Initialize(1, 0, newFakeID(t), nil); err != nil {
			t.Fatal(err)
		}
		if err := d.AbortCause(cause); err != nil {
			t.Fatal(err)
		}
		if err := d.Initialize(1, 0, newFakeID(t), nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Destroy(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.NRanks(); errors.Is(err, cause) {
			t.Errorf("the last communicator's abort cause stuck: %v", err)
		}
	})
}

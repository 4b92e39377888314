package watchdog_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

// On the GPU: rank 0 watches a two-rank communicator whose all-reduce
// rank 1 never posts (it hangs), and meanwhile, on a watched one-rank
// communicator, captures two all-reduces in each capture mode and replays
// each graph 100 times with exact results, and captures a memset in
// CaptureGlobal mode on a stream no communicator uses, while the poller
// queries the hung operation's event all along: every capture survives,
// and the hang is still reported, naming the all-reduce.
func TestGPUWatchedCapture(t *testing.T) {
	const hangTimeout = 8 * time.Second
	dir := os.Getenv(envFaultDir)
	if dir == "" {
		dir = t.TempDir()
	}
	runFaultRanks(t, 2, -1, 90*time.Second, dir, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		pair, err := nccl.Init(nranks, rank, id, &nccl.Config{CommName: "pair", Device: nccl.Ptr(0)})
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		doneFile := filepath.Join(dir, "capture-done")
		if rank == 1 {
			// Never posts the all-reduce; leaves when rank 0 is done.
			for deadline := time.Now().Add(75 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if _, err := os.Stat(doneFile); err == nil {
					break
				}
			}
			pair.Abort()
			return
		}
		defer os.WriteFile(doneFile, nil, 0o644)
		wPair, err := watchdog.Watch(pair, &watchdog.Options{Timeout: hangTimeout, PollInterval: 5 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer wPair.Stop()
		hs, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer hs.Destroy()
		hmem, err := cuda.Alloc[float32](0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		defer hmem.Free()
		hangStart := time.Now()
		if err := pair.AllReduce(nccl.BufferOf(hmem), nccl.BufferOf(hmem), nccl.Sum, hs); err != nil {
			t.Fatalf("the hanging all-reduce: %v", err)
		}

		comms, err := nccl.InitAll([]int{0})
		if err != nil {
			t.Fatal(err)
		}
		one := comms[0]
		defer one.Destroy()
		w, err := watchdog.Watch(one, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const n = 1 << 12
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i%977) + 0.5
		}
		a, err := cuda.AllocFrom(0, src)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Free()
		b, err := cuda.Alloc[float32](0, n)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		c, err := cuda.Alloc[float32](0, n)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Free()
		for _, mode := range captureModes {
			s, err := cuda.Device(0).NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := one.AllReduce(nccl.BufferOf(a), nccl.BufferOf(b), nccl.Sum, s); err != nil { // eager first
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			before := w.Stats().Captured
			g, err := s.Capture(mode, func() error {
				if err := one.AllReduce(nccl.BufferOf(a), nccl.BufferOf(b), nccl.Sum, s); err != nil {
					return err
				}
				if err := one.AllReduce(nccl.BufferOf(b), nccl.BufferOf(c), nccl.Sum, s); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond) // both pollers run meanwhile
				return nil
			})
			if err != nil {
				t.Errorf("%v: capture of two watched all-reduces: %v (stats %+v)", mode, err, w.Stats())
				s.Destroy()
				continue
			}
			exec, err := g.Instantiate()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.MemsetAsync(0, s); err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if err := exec.Launch(s); err != nil {
					t.Fatalf("%v: replay %d: %v", mode, i, err)
				}
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			if err := c.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, src) {
				t.Errorf("%v: after 100 replays the result differs from the input", mode)
			}
			if st := w.Stats(); st.Captured-before != 2 || w.Err() != nil {
				t.Errorf("%v: stats %+v, Err %v; want 2 more captured, no error", mode, st, w.Err())
			}
			t.Logf("%v: captured 2 watched all-reduces, replayed 100 times, exact", mode)
			exec.Destroy()
			g.Destroy()
			s.Destroy()
		}

		// A global capture elsewhere: a memset on a stream of its own.
		other, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		polls := wPair.Stats().Polls
		g, err := other.Capture(cuda.CaptureGlobal, func() error {
			if err := c.MemsetAsync(0, other); err != nil {
				return err
			}
			for p := wPair.Stats().Polls; wPair.Stats().Polls < p+10; {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		if err != nil {
			t.Errorf("a global capture elsewhere broke while the poller ran: %v", err)
		} else {
			g.Destroy()
			t.Logf("a global capture of a memset survived %d polls of the hung operation's event", wPair.Stats().Polls-polls)
		}
		if time.Since(hangStart) > hangTimeout {
			t.Errorf("the captures took longer than the hang timeout: the test proves less than it should")
		}

		var te *watchdog.TimeoutError
		select {
		case <-wPair.Done():
		case <-time.After(hangTimeout + 10*time.Second):
			t.Fatalf("the hung all-reduce was not reported (stats %+v)", wPair.Stats())
		}
		if err := wPair.Err(); !errors.As(err, &te) || te.Op.Op != trace.AllReduce || te.Op.Seq != 1 {
			t.Errorf("Err = %v; want a timeout of AllReduce #1", err)
		} else {
			t.Logf("reported: %v", err)
		}
	})
}

// On the GPU: the first use of a RawBuffer (its one driver query,
// cuPointerGetAttribute) and of a Buffer written as a literal (queried on
// every use) while another thread captures in CaptureGlobal mode does not
// invalidate that capture, as the fake CUDA driver models it.
func TestGPURawBufferDuringGlobalCapture(t *testing.T) {
	gputest.Require(t)
	mem, err := cuda.Alloc[float32](0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	s, err := cuda.Device(0).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	for _, literal := range []bool{false, true} {
		began, checked := make(chan error), make(chan struct{})
		ended := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			err := s.BeginCapture(cuda.CaptureGlobal)
			if err == nil {
				err = mem.MemsetAsync(0, s)
			}
			began <- err
			if err != nil {
				return
			}
			<-checked
			g, err := s.EndCapture()
			g.Destroy()
			ended <- err
		}()
		if err := <-began; err != nil {
			t.Fatal(err)
		}
		var buf nccl.Buffer
		if literal {
			buf = nccl.Buffer{Ptr: mem.Ptr(), Count: 1024, Type: nccl.Float32, Device: 0}
		} else {
			buf = nccl.RawBuffer(mem.Ptr(), 1024, nccl.Float32, 0)
		}
		berr := buf.Err()
		close(checked)
		err := <-ended
		t.Logf("ANSWER literal=%v: Buffer.Err during a global capture elsewhere: %v; the capture then ended with: %v", literal, berr, err)
		if berr != nil {
			t.Errorf("literal=%v: Buffer.Err: %v", literal, berr)
		}
		if err != nil {
			t.Errorf("literal=%v: the buffer's driver query invalidated a global capture on another thread: %v (teach the fake: cuPointerGetAttribute is unsafe during a global capture)", literal, err)
		}
	}
}

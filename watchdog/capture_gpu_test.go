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
//
// Once the all-reduce hangs on the device, any call that synchronizes the
// device (cuMemFree, a communicator's init, work on the legacy stream, a
// device synchronize) waits behind the hung kernel for good: so everything
// of that kind happens before the hanging all-reduce is queued (init,
// allocations, streams, watches, each stream's first all-reduce), only
// captures, instantiations, launches and copies on rank 0's own
// non-blocking streams happen during the hang, and nothing is freed or
// destroyed until the watchdog has aborted the pair (or, on a failure, the
// test aborts it first).
func TestGPUWatchedCapture(t *testing.T) {
	const hangTimeout = 8 * time.Second
	dir := os.Getenv(envFaultDir)
	if dir == "" {
		dir = t.TempDir()
	}
	runFaultRanks(t, 2, -1, 40*time.Second, dir, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		pair, err := nccl.Init(nranks, rank, id, &nccl.Config{CommName: "pair", Device: nccl.Ptr(0)})
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		// Both ranks: one all-reduce together first. NCCL connects a pair
		// at its first collective, inside the call: the hanging one below
		// would otherwise block rank 0's enqueue itself (seen on the H200:
		// rank 0 stuck in ncclAllReduce until the test's deadline).
		{
			ws, err := cuda.Device(0).NewStream()
			if err != nil {
				t.Fatal(err)
			}
			wm, err := cuda.Alloc[float32](0, 1024)
			if err != nil {
				t.Fatal(err)
			}
			if err := pair.AllReduce(nccl.BufferOf(wm), nccl.BufferOf(wm), nccl.Sum, ws); err != nil {
				t.Fatalf("rank %d: the pair's first all-reduce: %v", rank, err)
			}
			if err := ws.Synchronize(); err != nil {
				t.Fatalf("rank %d: the pair's first all-reduce: %v", rank, err)
			}
			wm.Free()
			ws.Destroy()
		}
		doneFile := filepath.Join(dir, "capture-done")
		if rank == 1 {
			// Never posts the all-reduce; leaves when rank 0 is done.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if _, err := os.Stat(doneFile); err == nil {
					break
				}
			}
			pair.Abort()
			return
		}
		defer os.WriteFile(doneFile, nil, 0o644)
		t.Logf("rank 0: pair initialized; setting up before the hang")

		// Before the hang: everything that may synchronize the device.
		comms, err := nccl.InitAll([]int{0})
		if err != nil {
			t.Fatal(err)
		}
		one := comms[0]
		defer one.Destroy()
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
		hmem, err := cuda.Alloc[float32](0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		defer hmem.Free()
		newStream := func() cuda.Stream { // non-blocking: never waits for the legacy stream
			s, err := cuda.Device(0).NewStream()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Destroy() })
			return s
		}
		hs, other := newStream(), newStream()
		streams := make([]cuda.Stream, len(captureModes))
		for i := range streams {
			streams[i] = newStream()
			if err := one.AllReduce(nccl.BufferOf(a), nccl.BufferOf(b), nccl.Sum, streams[i]); err != nil { // eager first
				t.Fatal(err)
			}
			if err := streams[i].Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		w, err := watchdog.Watch(one, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		wPair, err := watchdog.Watch(pair, &watchdog.Options{Timeout: hangTimeout, PollInterval: 5 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer wPair.Stop()
		// Graphs are destroyed after the hang is over (their destruction
		// may release NCCL's resources for them).
		var graphs []*cuda.Graph
		var execs []*cuda.GraphExec
		defer func() {
			for _, e := range execs {
				e.Destroy()
			}
			for _, g := range graphs {
				g.Destroy()
			}
		}()
		// Deferred last, so run first: the pair is aborted (the kernel
		// leaves) before anything above is freed, even on a failure.
		resolved := false
		defer func() {
			if !resolved {
				t.Logf("rank 0: aborting the pair before freeing anything")
				pair.Abort()
			}
		}()
		got := make([]float32, n)

		hangStart := time.Now()
		if err := pair.AllReduce(nccl.BufferOf(hmem), nccl.BufferOf(hmem), nccl.Sum, hs); err != nil {
			t.Fatalf("the hanging all-reduce: %v", err)
		}
		t.Logf("rank 0: the all-reduce rank 1 never posts is queued; capturing")

		// During the hang: captures, launches and copies on own streams.
		for i, mode := range captureModes {
			s := streams[i]
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
				continue
			}
			graphs = append(graphs, g)
			exec, err := g.Instantiate()
			if err != nil {
				t.Errorf("%v: Instantiate: %v", mode, err)
				continue
			}
			execs = append(execs, exec)
			if err := c.MemsetAsync(0, s); err != nil {
				t.Errorf("%v: MemsetAsync: %v", mode, err)
				continue
			}
			for j := range 100 {
				if err = exec.Launch(s); err != nil {
					t.Errorf("%v: replay %d: %v", mode, j, err)
					break
				}
			}
			clear(got)
			if err == nil {
				err = c.CopyToHostAsync(got, s)
			}
			if err == nil {
				err = s.Synchronize()
			}
			if err != nil {
				t.Errorf("%v: %v", mode, err)
				continue
			}
			if !slices.Equal(got, src) {
				t.Errorf("%v: after 100 replays the result differs from the input", mode)
				continue
			}
			if st := w.Stats(); st.Captured-before != 2 || w.Err() != nil {
				t.Errorf("%v: stats %+v, Err %v; want 2 more captured, no error", mode, st, w.Err())
				continue
			}
			t.Logf("%v: captured 2 watched all-reduces, replayed 100 times, exact", mode)
		}

		// A global capture elsewhere: a memset on a stream of its own.
		polls := wPair.Stats().Polls
		g, err := other.Capture(cuda.CaptureGlobal, func() error {
			if err := c.MemsetAsync(0, other); err != nil {
				return err
			}
			for p := wPair.Stats().Polls; wPair.Stats().Polls < p+10 && time.Since(hangStart) < hangTimeout; {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		if err != nil {
			t.Errorf("a global capture elsewhere broke while the poller ran: %v", err)
		} else {
			graphs = append(graphs, g)
			t.Logf("a global capture of a memset survived %d polls of the hung operation's event", wPair.Stats().Polls-polls)
		}
		if time.Since(hangStart) > hangTimeout {
			t.Errorf("the captures took longer than the hang timeout: the test proves less than it should")
		}

		var te *watchdog.TimeoutError
		select {
		case <-wPair.Done():
		case <-time.After(hangTimeout + 10*time.Second):
			t.Errorf("the hung all-reduce was not reported (stats %+v)", wPair.Stats())
			return // the deferred abort ends the hang before the frees
		}
		if err := wPair.Err(); !errors.As(err, &te) || te.Op.Op != trace.AllReduce || te.Op.Seq != 2 { // #1 connected the pair
			t.Errorf("Err = %v; want a timeout of AllReduce #2", err)
		} else {
			t.Logf("reported after %v: %v", time.Since(hangStart).Round(time.Millisecond), err)
		}
		// The watchdog aborted the pair: its kernel leaves, and the stream
		// drains (with or without an error).
		synced := make(chan error, 1)
		go func() { synced <- hs.Synchronize() }()
		select {
		case err := <-synced:
			resolved = true
			t.Logf("rank 0: the hung stream drained after the abort (%v)", err)
		case <-time.After(10 * time.Second):
			t.Errorf("the hung stream did not drain within 10 s of the abort")
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

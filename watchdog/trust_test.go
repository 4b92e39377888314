package watchdog_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

var captureModes = []cuda.CaptureMode{cuda.CaptureGlobal, cuda.CaptureThreadLocal, cuda.CaptureRelaxed}

// Capturing two all-reduces on a watched communicator works in every
// capture mode under the driver's capture rules (FAKE_CUDA_CAPTURE_RULES):
// the watchdog records no event in the capture and queries none, while
// the poller runs through it; the graph replays, and the captured
// operations are counted, not watched and not reported.
func TestWatchedCapture(t *testing.T) {
	for _, mode := range captureModes {
		t.Run(mode.String(), func(t *testing.T) {
			faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_CAPTURE_RULES=1"}}, func(t *testing.T) {
				c := oneRank(t, &nccl.Config{CommName: "captured"})
				defer c.Destroy()
				buf := floats(t, 64)
				s, err := cuda.Device(0).NewStream()
				if err != nil {
					t.Fatal(err)
				}
				defer s.Destroy()
				w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond, NoDump: true})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				// One eager operation first, as NCCL needs before a global capture.
				if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
					t.Fatal(err)
				}
				g, err := s.Capture(mode, func() error {
					for range 2 {
						if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
							return err
						}
					}
					// Let the poller run while the capture lasts.
					for p := w.Stats().Polls; w.Stats().Polls < p+5; {
						time.Sleep(time.Millisecond)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("Capture of two watched all-reduces: %v (stats %+v)", err, w.Stats())
				}
				defer g.Destroy()
				exec, err := g.Instantiate()
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Destroy()
				for i := range 100 {
					if err := exec.Launch(s); err != nil {
						t.Fatalf("Launch %d: %v", i, err)
					}
				}
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				for p := w.Stats().Polls; w.Stats().Polls < p+3; {
					time.Sleep(time.Millisecond)
				}
				st := w.Stats()
				if w.Err() != nil || st.Captured != 2 || st.Dropped != 0 || st.Pending != 0 || st.Abandoned != 0 {
					t.Errorf("Err %v, stats %+v; want no error, 2 captured, none dropped, pending or abandoned", w.Err(), st)
				}
				// The captured operations were recorded watched (the
				// watchdog is a WatchingHook) and unwatched when it saw the
				// capture: a dump never reads them started and not
				// completed, which the analyzer would call stuck.
				d := trace.Default().Snapshot("test")
				var id uint32
				for _, dc := range d.Comms {
					if dc.Name == "captured" {
						id = dc.ID
					}
				}
				var states []string
				for _, e := range d.Entries {
					if e.Op == trace.AllReduce && e.Comm == id {
						st := "-"
						if e.Watched {
							st = e.State.String()
						}
						states = append(states, fmt.Sprintf("watched=%v %s", e.Watched, st))
					}
				}
				want := []string{"watched=true completed", "watched=false -", "watched=false -"}
				if !slices.Equal(states, want) {
					t.Errorf("dump entries %q, want %q", states, want)
				}
			})
		})
	}
}

// A CaptureGlobal capture another thread runs on a stream no communicator
// uses (a memset) survives the poller, which queries a watched operation's
// event all along (FAKE_CUDA_CAPTURE_RULES: a query from a thread in
// global mode would answer 900 and invalidate it); that operation hangs
// (FAKE_CUDA_WORK_HANG) and is still reported, and no pending operation is
// lost meanwhile.
func TestGlobalCaptureElsewhereSurvives(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_CAPTURE_RULES=1", "FAKE_CUDA_WORK_HANG=1"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "world"})
		defer c.Destroy()
		buf := floats(t, 16)
		const timeout = 100 * time.Millisecond
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: 2 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		other, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		mem, err := cuda.Alloc[float32](0, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()
		for range 2 { // the second hangs its stream
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		type result struct {
			stats watchdog.Stats
			err   error
		}
		done := make(chan result)
		go func() {
			g, err := other.Capture(cuda.CaptureGlobal, func() error {
				if err := mem.MemsetAsync(0, other); err != nil {
					return err
				}
				// The poller queries the hung operation's event every 2 ms.
				for p := w.Stats().Polls; w.Stats().Polls < p+10; {
					time.Sleep(time.Millisecond)
				}
				return nil
			})
			st := w.Stats()
			if g != nil {
				g.Destroy()
			}
			done <- result{st, err}
		}()
		r := <-done
		if r.err != nil {
			t.Errorf("the global capture elsewhere broke: %v", r.err)
		}
		if r.stats.Pending != 1 || r.stats.Dropped != 0 {
			t.Errorf("during the capture: stats %+v; want the hung operation pending, none dropped", r.stats)
		}
		err = waitDone(t, w, 5*time.Second)
		var te *watchdog.TimeoutError
		if !errors.As(err, &te) || te.Op.Op != trace.AllReduce || te.Op.Seq != 2 {
			t.Fatalf("Err = %v; want a timeout of AllReduce #2", err)
		}
	})
}

// A hang is detected within Timeout plus one poll interval of the poller
// first seeing it: counted in polls, in a tight loop of operations that
// share events, and the blamed span holds the operation that hangs.
func TestDetectionWithinTimeoutAndPoll(t *testing.T) {
	const hangAfter = 1000
	faketest.Run(t, faketest.Env{Extra: []string{fmt.Sprintf("FAKE_CUDA_WORK_HANG=%d", hangAfter)}}, func(t *testing.T) {
		c := oneRank(t, nil)
		buf := floats(t, 4)
		const timeout, poll = 100 * time.Millisecond, 10 * time.Millisecond
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: poll, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		before := w.Stats().Polls
		for i := range 2 * hangAfter {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce %d: %v", i, err)
			}
		}
		queued := w.Stats().Polls
		err = waitDone(t, w, 10*time.Second)
		after := w.Stats().Polls
		var te *watchdog.TimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("Err = %v, want a timeout", err)
		}
		// The poll after the operations were queued sees the hang (or
		// already did); the timeout is then due timeout/poll polls later.
		if limit := queued + 1 + uint64(timeout/poll) + 1; after > limit {
			t.Errorf("detected at poll %d (operations queued by poll %d, started at %d): want by poll %d", after, queued, before, limit)
		}
		if te.Waited < timeout {
			t.Errorf("waited %v < timeout %v", te.Waited, timeout)
		}
		if hung := uint64(hangAfter + 1); te.Op.Seq > hung || te.Op.Seq+uint64(te.Shared) < hung {
			t.Errorf("blamed AllReduce #%d and the %d after it; the hung one is #%d", te.Op.Seq, te.Shared, hung)
		}
		st := w.Stats()
		if st.Events > 16 {
			t.Errorf("%d events made for %d operations: events are not amortized", st.Events, 2*hangAfter)
		}
	})
}

// AbortCause with a cause that matches nccl.ErrInProgress (here another
// communicator's context error) is an abort: the watchdog stops quietly,
// reporting no timeout of an operation that does not exist.
func TestAbortCauseInProgressIsNoHang(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		var called atomic.Bool
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 40 * time.Millisecond, PollInterval: 2 * time.Millisecond, NoDump: true,
			OnFailure: func(error) { called.Store(true) }})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cause := fmt.Errorf("other communicator: %w", nccl.ErrInProgress)
		if err := c.AbortCause(cause); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the watchdog of an aborted communicator did not end")
		}
		time.Sleep(20 * time.Millisecond) // a failure's OnFailure would run now
		if err := w.Err(); err != nil || called.Load() {
			t.Errorf("Err = %v (OnFailure called: %v); want none after the owner's abort", err, called.Load())
		}
	})
}

// A busy, healthy non-blocking communicator (an operation in progress at
// every poll, FAKE_NCCL_COLL_POLLS) that NCCL keeps accepting operations
// on is not hung.
func TestBusyNonBlockingNotHung(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_COLL_POLLS=50"}}, func(t *testing.T) {
		no := false
		c := oneRank(t, &nccl.Config{Blocking: &no})
		defer c.Abort()
		buf := floats(t, 4)
		const timeout = 200 * time.Millisecond
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: 2 * time.Millisecond, NoDump: true, Action: watchdog.ActionNone})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// Each call returns once accepted, with its work in progress; the
		// next waits for it (50 polls of the asynchronous state) and is
		// accepted in turn: the watchdog's polls land while some work is
		// in progress, nearly always.
		deadline := time.Now().Add(3 * timeout)
		n := 0
		for time.Now().Before(deadline) && w.Err() == nil {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce %d: %v", n, err)
			}
			n++
		}
		if err := w.Err(); err != nil {
			t.Errorf("after %d operations accepted: %v; want no hang", n, err)
		}
	})
}

// The zero Watchdog watches nothing and is safe to use.
func TestZeroWatchdog(t *testing.T) {
	var w watchdog.Watchdog
	w.Stop()
	w.Stop()
	select {
	case <-w.Done():
	default:
		t.Error("Done of the zero Watchdog is not closed")
	}
	if w.Err() != nil || w.Stats() != (watchdog.Stats{}) {
		t.Errorf("Err %v, Stats %+v", w.Err(), w.Stats())
	}
	if err := w.Synchronize(t.Context(), cuda.Stream{}); err == nil {
		t.Error("Synchronize on the zero Watchdog: no error")
	}
}

// A watched communicator the program drops without Destroy is still
// reported as leaked (the watchdog holds it weakly), and its watch ends.
func TestDroppedWatchedCommunicatorLeaks(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		faketest.AllowLeakedComms("the test drops a watched communicator to see it reported")
		leaks := make(chan nccl.Leak, 4)
		nccl.SetLeakHandler(func(l nccl.Leak) { leaks <- l })
		defer nccl.SetLeakHandler(nil)
		w := func() *watchdog.Watchdog {
			c := oneRank(t, nil)
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 2 * time.Millisecond, NoDump: true})
			if err != nil {
				t.Fatal(err)
			}
			mem, err := cuda.Alloc[float32](0, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Free()
			buf := nccl.BufferOf(mem)
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
			return w
		}()
		defer w.Stop()
		var got bool
		for i := 0; i < 100 && !got; i++ {
			runtime.GC()
			select {
			case <-leaks:
				got = true
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !got {
			t.Fatal("no leak reported for a dropped watched communicator")
		}
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Error("the watch of a dropped communicator did not end")
		}
		if w.Err() != nil {
			t.Errorf("Err = %v", w.Err())
		}
	})
}

// Child-process tests: the watchdog ends the process.
const envExitChild = "NCCL4GO_WD_EXIT_CHILD"

// runExitChild runs test name in a child process with the fake libraries
// and env, and returns its exit status and output.
func runExitChild(t *testing.T, name string, env ...string) (int, string) {
	t.Helper()
	ncclPath, cudaPath := faketest.Libraries(t, faketest.Env{})
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), append(env, envExitChild+"=1", "NCCL_LIBRARY="+ncclPath, "NCCL4GO_CUDA_LIBRARY="+cudaPath)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("child: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// hangInChild, in the child process, watches a one-rank communicator with
// o and enqueues an AllReduce that the child's fake never lets finish; the
// watchdog is to end the process, so it fails if still running after 10s.
func hangInChild(t *testing.T, o watchdog.Options) {
	c := oneRank(t, nil)
	buf := floats(t, 4)
	if _, err := watchdog.Watch(c, &o); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	t.Fatal("still running")
}

// Options.Heartbeat: 0 means the default (shortened here to 150 ms: the
// monitor ends the stuck process), and a negative one turns the monitor
// off (the stuck process lives on until it ends itself); a positive one
// under MinHeartbeat is refused.
func TestHeartbeatDefaultAndOff(t *testing.T) {
	if os.Getenv(envExitChild) != "" {
		watchdog.SetDefaultHeartbeat(150 * time.Millisecond)
		hb, _ := strconv.Atoi(os.Getenv("TEST_HEARTBEAT"))
		c := oneRank(t, nil)
		buf := floats(t, 4)
		if _, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 2 * time.Millisecond, NoDump: true,
			ExitCode: 45, Heartbeat: time.Duration(hb)}); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		fmt.Println("still running after 1 s")
		os.Exit(7)
	}
	for _, tc := range []struct {
		hb   time.Duration
		code int
		want string
	}{
		{0, 45, "heartbeat monitor"},
		{-1, 7, "still running after 1 s"},
	} {
		code, out := runExitChild(t, "TestHeartbeatDefaultAndOff", "FAKE_CUDA_QUERY_HANG=1", fmt.Sprintf("TEST_HEARTBEAT=%d", tc.hb))
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("Heartbeat %v: child exit status %d (want %d), output lacks %q:\n%s", tc.hb, code, tc.code, tc.want, out)
		}
	}
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		_, err := watchdog.Watch(c, &watchdog.Options{Heartbeat: time.Millisecond})
		if !errors.Is(err, nccl.ErrInvalidArgument) || !strings.Contains(err.Error(), "at least 100ms") {
			t.Errorf("Heartbeat 1ms: %v; want ErrInvalidArgument naming the minimum", err)
		}
	})
}

// With Exit, an OnFailure that blocks does not hold the process: it ends
// after the grace, saying that OnFailure did not return (not, as before,
// that the abort did not).
func TestExitWhileOnFailureBlocks(t *testing.T) {
	if os.Getenv(envExitChild) != "" {
		watchdog.SetExitGrace(200 * time.Millisecond)
		hangInChild(t, watchdog.Options{Timeout: 30 * time.Millisecond, PollInterval: 2 * time.Millisecond, NoDump: true,
			Exit: true, ExitCode: 42, OnFailure: func(error) { select {} }})
		return
	}
	code, out := runExitChild(t, "TestExitWhileOnFailureBlocks", "FAKE_CUDA_WORK_HANG=0")
	if code != 42 || !strings.Contains(out, "OnFailure did not return within 200ms; exiting") || strings.Contains(out, "abort did not return") {
		t.Errorf("child exit status %d, output:\n%s", code, out)
	}
}

// The heartbeat monitor ends the process when the watchdog itself is
// stuck: the poller's event query never returns (FAKE_CUDA_QUERY_HANG).
func TestHeartbeatEndsStuckWatchdog(t *testing.T) {
	if os.Getenv(envExitChild) != "" {
		hangInChild(t, watchdog.Options{Timeout: time.Minute, PollInterval: 2 * time.Millisecond, DumpDir: t.TempDir(),
			ExitCode: 43, Heartbeat: 200 * time.Millisecond})
		return
	}
	code, out := runExitChild(t, "TestHeartbeatEndsStuckWatchdog", "FAKE_CUDA_QUERY_HANG=1")
	for _, want := range []string{"watchdog: heartbeat monitor: the poller has been inside one round of event queries for", "flight recorder dumped to", "ending the process (exit status 43)"} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q", want)
		}
	}
	if code != 43 {
		t.Errorf("child exit status %d, output:\n%s", code, out)
	}
}

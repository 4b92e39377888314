package watchdog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

// TestMain checks for leaks after the tests: goroutines still running (the
// poller, asynchronous-error polls), and communicators of the fake alive.
func TestMain(m *testing.M) { os.Exit(faketest.Main(m)) }

// oneRank makes a one-rank communicator on device 0 named name.
func oneRank(t testing.TB, cfg *nccl.Config) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	c, err := nccl.Init(1, 0, id, cfg)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return c
}

func floats(t testing.TB, n int) nccl.Buffer {
	t.Helper()
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	mem, err := cuda.AllocFrom(0, v)
	if err != nil {
		t.Fatalf("AllocFrom: %v", err)
	}
	t.Cleanup(func() { mem.Free() })
	return nccl.BufferOf(mem)
}

// waitDone waits for the watchdog to fail, at most d.
func waitDone(t *testing.T, w *watchdog.Watchdog, d time.Duration) error {
	t.Helper()
	select {
	case <-w.Done():
		return w.Err()
	case <-time.After(d):
		t.Fatalf("watchdog did not fire within %v (stats %+v)", d, w.Stats())
		return nil
	}
}

// A collective whose GPU work never completes (FAKE_CUDA_WORK_HANG: the
// fourth collective hangs its stream) times out: the error names the operation, its
// sequence number and the wait; the communicator is aborted, and its later
// calls wrap the error; the dump names the operation as started and not
// completed, the ones before as completed.
func TestTimeoutAborts(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_WORK_HANG=3"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "world"})
		buf := floats(t, 1024)
		dir := t.TempDir()
		const timeout = 300 * time.Millisecond
		var told error
		called := make(chan struct{})
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: 10 * time.Millisecond, DumpDir: dir,
			OnFailure: func(err error) { told = err; close(called) }})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		if !watchdog.Running() {
			t.Error("no poller after Watch")
		}
		start := time.Now()
		for i := range 5 {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce %d: %v", i, err)
			}
			if i == 2 {
				// The first three complete before the fourth is queued, so
				// that the event following the fourth follows no earlier one.
				for w.Stats().Pending > 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}
		err = waitDone(t, w, 5*time.Second)
		took := time.Since(start)
		<-called
		var te *watchdog.TimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("Err = %v, want a *TimeoutError", err)
		}
		if told != err {
			t.Errorf("OnFailure got %v, Err %v", told, err)
		}
		// The fourth collective (#4) hangs.
		if te.Op.Op != trace.AllReduce || te.Op.Seq != 4 || te.Op.Count != 1024 || te.Op.DataType != trace.Float32 {
			t.Errorf("timed out on %+v, want AllReduce #4 of 1024 float32", te.Op)
		}
		if te.Waited < timeout || took > timeout+time.Second {
			t.Errorf("waited %v (timeout %v), fired after %v", te.Waited, timeout, took)
		}
		if te.Comm.Name != "world" || te.Comm.Rank != 0 || te.Comm.Size != 1 || te.Pending != 2 {
			t.Errorf("comm %+v, pending %d; want world 0/1 with 2 pending", te.Comm, te.Pending)
		}
		msg := err.Error()
		for _, want := range []string{"AllReduce #4 (1024 float32)", "world rank 0/1", "did not complete in 3", "communicator aborted", "dumped to " + dir} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %q", msg, want)
			}
		}
		// Later calls name it.
		err = c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{})
		var te2 *watchdog.TimeoutError
		if !errors.Is(err, nccl.ErrClosed) || !errors.As(err, &te2) || te2.Op.Seq != 4 {
			t.Errorf("AllReduce after the timeout: %v; want ErrClosed wrapping the TimeoutError", err)
		}
		if err := w.Synchronize(context.Background(), cuda.Device(0).DefaultStream()); !errors.As(err, &te2) {
			t.Errorf("Synchronize after the timeout: %v", err)
		}
		// The dump.
		if filepath.Dir(te.Dump) != dir {
			t.Fatalf("dump %q not in %s (%v)", te.Dump, dir, te.DumpErr)
		}
		d, err := trace.ReadDumpFile(te.Dump)
		if err != nil {
			t.Fatalf("ReadDumpFile: %v", err)
		}
		if !strings.Contains(d.Reason, "AllReduce #4") {
			t.Errorf("dump reason %q", d.Reason)
		}
		states := map[uint64]trace.State{}
		for _, e := range d.Entries {
			if e.Op == trace.AllReduce {
				if !e.Watched {
					t.Errorf("entry #%d not watched", e.Seq)
				}
				states[e.Seq] = e.State
			}
		}
		want := map[uint64]trace.State{1: trace.Completed, 2: trace.Completed, 3: trace.Completed, 4: trace.Started, 5: trace.Enqueued}
		for seq, st := range want {
			if states[seq] != st {
				t.Errorf("dump: AllReduce #%d %v, want %v (all: %v)", seq, states[seq], st, states)
			}
		}
		for _, dc := range d.Comms {
			// Dumped before the abort: not closed yet.
			if dc.Name == "world" && (dc.Closed || dc.LastCompletedSeq != 3 || dc.LastStartedSeq != 4) {
				t.Errorf("dump comm %+v; want open, completed #3, started #4", dc)
			}
		}
		w.Stop()
		if watchdog.Running() {
			t.Error("poller still running after the only watchdog failed and stopped")
		}
	})
}

// An asynchronous error (the fake's ncclCommSuspend completes with
// ncclRemoteError and leaves the communicator in that state) fails the
// watchdog with an *AsyncError that matches nccl.ErrRemote.
func TestAsyncError(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_ASYNC_FAIL=ncclCommSuspend=6"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "tp"})
		buf := floats(t, 16)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 5 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Suspend(nccl.SuspendMem); !errors.Is(err, nccl.ErrRemote) {
			t.Fatalf("Suspend: %v; the fake should fail it with ncclRemoteError", err)
		}
		err = waitDone(t, w, 5*time.Second)
		var ae *watchdog.AsyncError
		if !errors.As(err, &ae) || !errors.Is(err, nccl.ErrRemote) {
			t.Fatalf("Err = %v, want an *AsyncError matching ErrRemote", err)
		}
		if ae.Comm.Name != "tp" || ae.Dump != "" || ae.DumpErr != nil || !strings.Contains(err.Error(), "tp rank 0/1 broke") {
			t.Errorf("error %+v: %v", ae, err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); !errors.As(err, &ae) {
			t.Errorf("AllReduce after the asynchronous error: %v", err)
		}
	})
}

// Stop ends the watch: no more events, the observer is gone, the poller
// ends with the last watchdog, Err stays nil; a communicator can be
// watched again; a second Watch of a watched communicator is refused.
func TestStopAndRewatch(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 4)
		for round := range 3 {
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Second, PollInterval: time.Millisecond})
			if err != nil {
				t.Fatalf("round %d: Watch: %v", round, err)
			}
			if _, err := watchdog.Watch(c, nil); err == nil || !strings.Contains(err.Error(), "already watched") {
				t.Errorf("second Watch: %v", err)
			}
			for range 100 {
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for w.Stats().Pending > 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if s := w.Stats(); s.Pending != 0 || s.Dropped != 0 || s.Events > 104 {
				t.Errorf("round %d: stats %+v; want nothing pending, at most 104 events", round, s)
			}
			w.Stop()
			w.Stop()
			if err := w.Err(); err != nil {
				t.Errorf("Err after Stop: %v", err)
			}
			select {
			case <-w.Done():
			default:
				t.Error("Done open after Stop")
			}
			if watchdog.Running() {
				t.Error("poller running after Stop")
			}
		}
	})
}

// A communicator destroyed while watched ends its watch quietly.
func TestDestroyedWhileWatched(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Second, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("watchdog of a destroyed communicator still running")
		}
		if err := w.Err(); err != nil {
			t.Errorf("Err = %v", err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for watchdog.Running() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if watchdog.Running() {
			t.Error("poller still running")
		}
	})
}

// ActionNone reports and leaves the communicator usable; ActionRevoke
// revokes it.
func TestActions(t *testing.T) {
	for _, tc := range []struct {
		action watchdog.Action
		after  func(err error) bool
		words  string
	}{
		{watchdog.ActionNone, func(err error) bool { return err == nil }, "did not complete"},
		{watchdog.ActionRevoke, func(err error) bool { return errors.Is(err, nccl.ErrClosed) }, "communicator revoked"},
	} {
		t.Run(tc.action.String(), func(t *testing.T) {
			faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_WORK_HANG=0"}}, func(t *testing.T) {
				c := oneRank(t, nil)
				defer c.Destroy()
				buf := floats(t, 4)
				w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond, NoDump: true, Action: tc.action})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				if err := c.AllGather(buf, buf, cuda.Stream{}); err != nil {
					t.Fatal(err)
				}
				err = waitDone(t, w, 5*time.Second)
				if !strings.Contains(err.Error(), "AllGather #1 (4 float32)") || !strings.Contains(err.Error(), tc.words) {
					t.Errorf("error %q", err)
				}
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); !tc.after(err) {
					t.Errorf("AllReduce after the %s: %v", tc.action, err)
				}
			})
		})
	}
}

// Operations queued inside a group get their events when the next
// operation outside it is queued.
func TestGroupDeferred(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Second, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		err = nccl.Group(func() error {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				return err
			}
			return c.Broadcast(buf, buf, 0, cuda.Stream{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if s := w.Stats(); s.Pending != 2 {
			t.Errorf("after the group: %+v, want 2 pending (deferred)", s)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for w.Stats().Pending > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		tc, _ := c.TraceComm()
		d := tc.Recorder().Snapshot("test")
		done := 0
		for _, e := range d.Entries {
			if e.Watched && e.State == trace.Completed {
				done++
			}
		}
		if s := w.Stats(); s.Pending != 0 || done != 3 {
			t.Errorf("stats %+v, %d completed in the recorder; want 0 pending, 3 completed", s, done)
		}
	})
}

// The watched path allocates nothing once the pool of events is warm.
func TestWatchedNoAllocations(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 1)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		allReduce := func() {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2000 { // warm: 2000 events, and slices of that size
			allReduce()
		}
		deadline := time.Now().Add(5 * time.Second)
		for w.Stats().Pending > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		// 1000 calls take far less than the 50 ms between polls, whose own
		// few allocations are spread over the runs.
		if n := testing.AllocsPerRun(1000, allReduce); n != 0 {
			t.Errorf("%v allocations per watched AllReduce (stats %+v)", n, w.Stats())
		}
	})
}

// Watch refuses what it cannot watch.
func TestWatchErrors(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		if _, err := watchdog.Watch(nil, nil); err == nil {
			t.Error("Watch(nil) accepted")
		}
		var null nccl.Communicator
		if _, err := watchdog.Watch(&null, nil); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("Watch(null communicator): %v", err)
		}
		c := oneRank(t, nil)
		defer c.Destroy()
		if _, err := watchdog.Watch(c, &watchdog.Options{Timeout: -1}); err == nil {
			t.Error("negative timeout accepted")
		}
		if _, err := watchdog.Watch(c, &watchdog.Options{Action: 7}); err == nil {
			t.Error("unknown action accepted")
		}
		if watchdog.Running() {
			t.Error("poller running after refused Watches")
		}
	})
}

// A group that is the last thing queued before a quiet spell is launched at
// its end: the watchdog follows it then, and does not time it out as "not
// launched" (it did before GroupEnded).
func TestGroupLastNoFalseTimeout(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 200 * time.Millisecond, PollInterval: 5 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := nccl.Group(func() error { return c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}) }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Done():
			t.Fatalf("a healthy, completed group timed out: %v", w.Err())
		case <-time.After(time.Second):
		}
		if st := w.Stats(); st.Pending != 0 {
			t.Errorf("%d operations still pending after the group completed", st.Pending)
		}
	})
}

// Watch while another goroutine queues operations: no data race (-race).
func TestWatchWhileQueuing(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := oneRank(t, nil)
		defer c.Destroy()
		buf := floats(t, 4)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range 100 {
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond, NoDump: true})
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
		}
		close(stop)
		<-done
	})
}

// Operations queued back to back on one stream join a run that one later
// event follows (what keeps a watched call cheap): every one of them is
// recorded watched and completed once that event completes, and none is
// left pending.
func TestRunCompletesEveryEntry(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=4096"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "runs"})
		defer c.Destroy()
		buf := floats(t, 4)
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		const n = 1000
		for i := range n {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce %d: %v", i, err)
			}
		}
		for deadline := time.Now().Add(5 * time.Second); w.Stats().Pending > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("still pending after 5 s: %+v", w.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		d := trace.Default().Snapshot("test")
		var id uint32
		for _, dc := range d.Comms {
			if dc.Name == "runs" {
				id = dc.ID
			}
		}
		done := 0
		for _, e := range d.Entries {
			if e.Comm != id || e.Op != trace.AllReduce {
				continue
			}
			if !e.Watched || e.State != trace.Completed {
				t.Errorf("entry #%d: watched %v, state %v; want watched and completed", e.Seq, e.Watched, e.State)
				continue
			}
			done++
		}
		if st := w.Stats(); done != n || st.Events >= n/10 || st.Dropped != 0 {
			t.Errorf("%d of %d AllReduces completed; stats %+v (want far fewer events than operations, none dropped)", done, n, st)
		}
	})
}

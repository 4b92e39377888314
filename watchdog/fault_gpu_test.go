package watchdog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

// Fault tests on a GPU: ranks are child processes of the test binary
// sharing GPU 0, each with its own NCCL_HOSTID (NCCL then connects them
// through sockets). Each test takes well under a minute.

// Environment of the children of runFaultRanks.
const (
	envFaultRank = "NCCL4GO_WD_RANK"
	envFaultN    = "NCCL4GO_WD_NRANKS"
	envFaultID   = "NCCL4GO_WD_ID"
	envFaultID2  = "NCCL4GO_WD_ID2" // a second id, for survivors that start a new communicator
	envFaultTest = "NCCL4GO_WD_TEST"
	envFaultDir  = "NCCL4GO_WD_DIR"
)

// runFaultRanks is gputest.RunRanks for ranks that may die: rank victim
// (-1: none) must end by SIGKILL, the others must pass. dir is given to
// every rank in NCCL4GO_WD_DIR. Each rank's output goes to the test log
// line by line as it comes (prefixed "rank N|"), so that a hang shows where
// each rank was; the ranks get SIGQUIT (a Go stack dump) then SIGKILL
// after timeout, or 5 s before the test binary's own deadline, whichever
// comes first.
func runFaultRanks(t *testing.T, nranks, victim int, timeout time.Duration, dir string, fn func(t *testing.T, rank, nranks int, id nccl.UniqueID)) {
	t.Helper()
	if r := os.Getenv(envFaultRank); r != "" {
		if os.Getenv(envFaultTest) != t.Name() {
			t.Skip("not this rank child's test")
		}
		rank, _ := strconv.Atoi(r)
		n, _ := strconv.Atoi(os.Getenv(envFaultN))
		id, err := nccl.ParseUniqueID(os.Getenv(envFaultID))
		if err != nil {
			t.Fatalf("rank %d: bad id: %v", rank, err)
		}
		fn(t, rank, n, id)
		return
	}
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	text, _ := id.MarshalText()
	id2, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	text2, _ := id2.MarshalText()
	if d, ok := t.Deadline(); ok && time.Until(d)-5*time.Second < timeout {
		timeout = max(time.Until(d)-5*time.Second, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	var wg sync.WaitGroup
	outs := make([]*liveLog, nranks)
	errs := make([]error, nranks)
	for r := range nranks {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.timeout="+(timeout+10*time.Second).String())
		cmd.Env = append(os.Environ(), gputest.SafeEnv...)
		cmd.Env = append(cmd.Env, envFaultRank+"="+strconv.Itoa(r), envFaultN+"="+strconv.Itoa(nranks),
			envFaultID+"="+string(text), envFaultID2+"="+string(text2), envFaultTest+"="+t.Name(), envFaultDir+"="+dir,
			"NCCL_HOSTID=nccl4go-wd-host-"+strconv.Itoa(r), "NCCL_SOCKET_IFNAME=lo", "NCCL_IB_DISABLE=1")
		outs[r] = &liveLog{t: t, prefix: "rank " + strconv.Itoa(r) + "| "}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) } // the Go runtime dumps every goroutine's stack
		cmd.WaitDelay = 5 * time.Second                                          // then SIGKILL
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting rank %d: %v", r, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Wait()
		}()
	}
	wg.Wait()
	for r := range nranks {
		out := outs[r].close()
		if r == victim {
			var ee *exec.ExitError
			if !errors.As(errs[r], &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("rank %d should have died of SIGKILL (%v); its output is above", r, errs[r])
			} else {
				t.Logf("rank %d killed, as planned", r)
			}
			continue
		}
		if errs[r] != nil || !strings.Contains(out, "--- PASS") && !strings.Contains(out, "--- SKIP") {
			t.Errorf("rank %d of %d failed (%v); its output is above", r, nranks, errs[r])
		}
	}
	if ctx.Err() != nil {
		t.Errorf("ranks did not finish within %v (sent SIGQUIT: their stacks are above)", timeout)
	}
}

// liveLog passes a child's output to the test log line by line as it
// comes, and keeps all of it.
type liveLog struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	all    bytes.Buffer
	line   []byte
	closed bool // the test may have ended: log no more
}

func (l *liveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	if l.closed {
		return len(p), nil
	}
	l.line = append(l.line, p...)
	for {
		i := bytes.IndexByte(l.line, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + string(l.line[:i]))
		l.line = l.line[i+1:]
	}
	return len(p), nil
}

// close logs the last unfinished line, stops logging, and returns all the
// output.
func (l *liveLog) close() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && len(l.line) > 0 {
		l.t.Log(l.prefix + string(l.line))
	}
	l.closed = true
	return l.all.String()
}

// A peer never arrives: the two ranks that do, initializing a three-rank
// communicator non-blocking with a 5 s deadline, return within 6 s.
func TestGPUPeerNeverArrives(t *testing.T) {
	gputest.RunRanks(t, 2, 60*time.Second, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		const d = 5 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		c, err := nccl.InitContext(ctx, nranks+1, rank, id, &nccl.Config{Blocking: nccl.Ptr(false), Device: nccl.Ptr(0)})
		took := time.Since(start)
		t.Logf("rank %d: InitContext returned after %v: %v", rank, took, err)
		if err == nil {
			c.Destroy()
			t.Fatal("init of 3 ranks with 2 present succeeded")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("InitContext: %v, want context.DeadlineExceeded", err)
		}
		if took > d+time.Second {
			t.Errorf("InitContext returned after %v, deadline %v", took, d)
		}
	})
}

// A peer is killed (SIGKILL) in the middle of a loop of all-reduces: the
// survivors' watchdog fires within its timeout + 2 s with an error naming
// the all-reduce and its sequence number; their dumps, analyzed, name the
// dead rank; the survivors shrink it out (ShrinkAbort) and all-reduce
// correctly.
func TestGPUKilledPeer(t *testing.T) {
	const nranks, victim, killAt = 3, 2, 10
	const timeout = 5 * time.Second
	dir := os.Getenv(envFaultDir)
	if dir == "" {
		dir = t.TempDir()
	}
	runFaultRanks(t, nranks, victim, 60*time.Second, dir, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		trace.Default().SetRank(rank)
		c, err := nccl.Init(nranks, rank, id, &nccl.Config{CommName: "world", Device: nccl.Ptr(0)})
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: 50 * time.Millisecond, DumpDir: dir, Action: watchdog.ActionNone})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		const n = 1 << 16
		mem, err := cuda.Alloc[float32](0, n)
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Free()
		host := make([]float32, n)
		tc, _ := c.TraceComm()
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		var loopErr error
		var hungAt time.Time
		var hungSeq uint64
		for i := 0; ; i++ {
			if rank == victim && i == killAt {
				t.Logf("rank %d: killing myself before all-reduce %d", rank, i)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			for j := range host {
				host[j] = float32(rank + 1)
			}
			if err := mem.CopyFromHost(host); err != nil {
				t.Fatal(err)
			}
			hungAt = time.Now()
			if err := c.AllReduce(nccl.BufferOf(mem), nccl.BufferOf(mem), nccl.Sum, s); err != nil {
				loopErr = err
				break
			}
			hungSeq = tc.Seq()
			if loopErr = w.Synchronize(ctx, s); loopErr != nil {
				break
			}
			if err := mem.CopyToHost(host); err != nil {
				t.Fatal(err)
			}
			if host[0] != 6 || host[n-1] != 6 {
				t.Fatalf("all-reduce %d: %v ... %v, want 6", i, host[0], host[n-1])
			}
		}
		fired := time.Since(hungAt)
		t.Logf("rank %d: loop ended %v after the last all-reduce was queued: %v", rank, fired, loopErr)
		if fired > timeout+2*time.Second {
			t.Errorf("the watchdog fired %v after the hang began; timeout %v", fired, timeout)
		}
		var te *watchdog.TimeoutError
		var ae *watchdog.AsyncError
		var op *watchdog.Operation
		switch {
		case errors.As(loopErr, &te):
			op = &te.Op
		case errors.As(loopErr, &ae):
			op = ae.Oldest
			if ae.Shared > 0 && ae.Newest != nil && op != nil && op.Seq <= hungSeq {
				// A range the watchdog cannot tell apart (one CUDA event,
				// or none yet): the message names it to its newest, the
				// operation in flight when the peer died.
				op = ae.Newest
			}
		default:
			t.Fatalf("loop ended with %v, want the watchdog's error", loopErr)
		}
		if op == nil || op.Op != trace.AllReduce || op.Seq != hungSeq {
			t.Errorf("the error names %v, want AllReduce #%d", op, hungSeq)
		}
		if !strings.Contains(loopErr.Error(), "AllReduce #"+strconv.FormatUint(hungSeq, 10)) {
			t.Errorf("message %q does not name AllReduce #%d", loopErr, hungSeq)
		}

		// Recovery. Shrink the dead rank out (Revoke first, NCCL 2.28.7+,
		// to stop what is in flight). NCCL's Shrink refuses a communicator
		// whose async error is set (ncclCommEnsureReady; seen on the H200
		// with 2.28.3 and, after Revoke, 2.30.7: "remote error" once a
		// socket peer died): then the survivors make a new communicator,
		// with a second id, as an elastic job would.
		start := time.Now()
		var nc *nccl.Communicator
		if r := gputest.Require(t); r >= 22807 {
			if err := c.Revoke(0); err != nil {
				t.Logf("rank %d: Revoke: %v", rank, err)
			}
			nc, err = c.Shrink([]int{victim}, nil, nccl.ShrinkAbort)
			t.Logf("rank %d: Shrink after Revoke: %v", rank, err)
		}
		if nc == nil {
			id2, err := nccl.ParseUniqueID(os.Getenv(envFaultID2))
			if err != nil {
				t.Fatalf("rank %d: bad second id: %v", rank, err)
			}
			c.Abort()
			newRank := rank
			if rank > victim {
				newRank--
			}
			if nc, err = nccl.Init(nranks-1, newRank, id2, &nccl.Config{Device: nccl.Ptr(0)}); err != nil {
				t.Fatalf("rank %d: a new communicator of the survivors: %v", rank, err)
			}
			t.Logf("rank %d: recovered by a new communicator of %d ranks in %v", rank, nranks-1, time.Since(start))
		} else {
			t.Logf("rank %d: shrunk in %v", rank, time.Since(start))
			c.Abort()
		}
		defer nc.Destroy()
		for j := range host {
			host[j] = float32(rank + 1)
		}
		if err := mem.CopyFromHost(host); err != nil {
			t.Fatal(err)
		}
		if err := nc.AllReduce(nccl.BufferOf(mem), nccl.BufferOf(mem), nccl.Sum, s); err != nil {
			t.Fatalf("AllReduce after Shrink: %v", err)
		}
		syncWithin(t, s, 20*time.Second)
		if err := mem.CopyToHost(host); err != nil {
			t.Fatal(err)
		}
		if host[0] != 3 || host[n-1] != 3 {
			t.Errorf("all-reduce of the survivors: %v ... %v, want 3", host[0], host[n-1])
		}
	})
	if os.Getenv(envFaultRank) != "" || t.Failed() {
		return
	}
	// The survivors' dumps name the dead rank.
	files, _ := filepath.Glob(filepath.Join(dir, "nccl4go-trace-*.json"))
	var dumps []*trace.Dump
	for _, f := range files {
		d, err := trace.ReadDumpFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		dumps = append(dumps, d)
	}
	if len(dumps) != nranks-1 {
		t.Fatalf("%d dumps in %s, want %d (one per survivor)", len(dumps), dir, nranks-1)
	}
	rep := trace.Analyze(dumps)
	t.Logf("analysis:\n%s", rep)
	found := false
	for _, cr := range rep.Comms {
		if cr.Name == "world" && cr.Size == nranks {
			found = true
			if !slices.Equal(cr.MissingDumps, []trace.RankRange{{First: victim, Last: victim}}) {
				t.Errorf("analysis of world: missing dumps %v, want [%d]", cr.MissingDumps, victim)
			}
			if !strings.Contains(strings.Join(cr.Findings, " "), "rank "+strconv.Itoa(victim)) {
				t.Errorf("findings do not name rank %d: %q", victim, cr.Findings)
			}
		}
	}
	if !found {
		t.Errorf("no report on communicator world")
	}
}

// A context cancelled during init, split and a loop of collectives: each
// wait returns within seconds of the cancellation, and aborting frees the
// stream of a collective whose peer left.
func TestGPUCancel(t *testing.T) {
	nb := func() *nccl.Config { return &nccl.Config{Blocking: nccl.Ptr(false), Device: nccl.Ptr(0)} }
	t.Run("init", func(t *testing.T) {
		gputest.Require(t)
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		c, err := nccl.InitContext(ctx, 2, 0, id, nb())
		took := time.Since(start)
		if err == nil {
			c.Destroy()
			t.Fatal("init of 2 ranks with 1 present succeeded")
		}
		// Cancelled after 1 s, aborted within a few more: NCCL's abort
		// joins its bootstrap thread, which took 1.75 s on an H200 with
		// eight GPU test processes beside it (the peer never comes: without
		// the cancellation the call would wait for good).
		if !errors.Is(err, context.Canceled) || took > 6*time.Second {
			t.Errorf("InitContext after %v: %v; want context.Canceled within 6 s", took, err)
		}
	})
	t.Run("split", func(t *testing.T) {
		gputest.RunRanks(t, 2, 60*time.Second, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
			ictx, icancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer icancel()
			c, err := nccl.InitContext(ictx, nranks, rank, id, nb())
			if err != nil {
				t.Fatalf("InitContext: %v", err)
			}
			defer c.Abort()
			if rank == 1 { // never splits
				time.Sleep(4 * time.Second)
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			start := time.Now()
			child, err := c.SplitContext(ctx, 0, rank, nb())
			took := time.Since(start)
			if err == nil && child.IsValid() {
				child.Destroy()
				t.Fatal("split without the peer succeeded")
			}
			// The cancel aborts the parent, and NCCL's abort joins the split's
			// job, which can take a second.
			t.Logf("SplitContext returned %v after its start (cancelled at 1 s): %v", took, err)
			if !errors.Is(err, context.Canceled) || took > 4*time.Second {
				t.Errorf("SplitContext after %v: %v; want context.Canceled within 4 s", took, err)
			}
		})
	})
	t.Run("loop", func(t *testing.T) {
		gputest.RunRanks(t, 2, 60*time.Second, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
			c, err := nccl.Init(nranks, rank, id, &nccl.Config{Device: nccl.Ptr(0)})
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, NoDump: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			s, err := cuda.Device(0).NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			mem, err := cuda.Alloc[float32](0, 1<<16)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Free()
			const leaveAt = 5
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var loopErr error
			var hungAt time.Time
			for i := 0; loopErr == nil; i++ {
				if rank == 1 && i == leaveAt { // leaves the loop, then the job
					time.Sleep(3 * time.Second)
					c.Abort()
					return
				}
				if rank == 0 && i == leaveAt {
					hungAt = time.Now()
					time.AfterFunc(time.Second, cancel)
				}
				if loopErr = c.AllReduce(nccl.BufferOf(mem), nccl.BufferOf(mem), nccl.Sum, s); loopErr == nil {
					loopErr = w.Synchronize(ctx, s)
				}
			}
			if took := time.Since(hungAt); !errors.Is(loopErr, context.Canceled) || took > 2*time.Second {
				t.Errorf("loop ended after %v with %v; want context.Canceled within 2 s", took, loopErr)
			}
			start := time.Now()
			if err := c.Abort(); err != nil {
				t.Errorf("Abort: %v", err)
			}
			syncWithin(t, s, 10*time.Second)
			t.Logf("abort, then the stream's completion, took %v", time.Since(start))
		})
	})
}

// 1000 init/destroy cycles (each watched: Watch, an all-reduce, Stop) and
// 1000 register/deregister cycles leave GPU memory (MemInfo, within 64 MiB
// for what NCCL and the driver cache), goroutines, file descriptors and
// the recorder's communicators as they were. NCCL4GO_WD_CYCLES changes the
// count; the cycles stop early (and say so) after 45 s.
func TestGPUCycles(t *testing.T) {
	gputest.Require(t)
	cycles := 1000
	if v, err := strconv.Atoi(os.Getenv("NCCL4GO_WD_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	const memSlack = 64 << 20
	dev := cuda.Device(0)
	mem, err := cuda.Alloc[float32](dev, 1<<18)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	buf := nccl.BufferOf(mem)
	type snap struct {
		free       uint64
		goroutines int
		fds        int
		comms      int
	}
	take := func() snap {
		runtime.GC()
		var s snap
		if f, _, err := dev.MemInfo(); err == nil {
			s.free = f
		}
		s.goroutines = runtime.NumGoroutine()
		ents, _ := os.ReadDir("/proc/self/fd")
		s.fds = len(ents)
		for _, dc := range trace.Default().Snapshot("").Comms {
			if !dc.Closed {
				s.comms++
			}
		}
		return s
	}
	// compare checks after against before; mid, taken halfway, tells a
	// leak (memory lost in both halves, growing with the cycles) from
	// another process's allocation (GPU memory is the device's: eight test
	// processes beside this one once took 486 MiB in one half).
	compare := func(what string, before, mid, after snap) {
		t.Helper()
		for i := 0; i < 200 && after.goroutines > before.goroutines; i++ { // goroutines that are ending
			time.Sleep(5 * time.Millisecond)
			after.goroutines = runtime.NumGoroutine()
		}
		t.Logf("%s: free GPU memory %d -> %d MiB, goroutines %d -> %d, fds %d -> %d, live comms in the recorder %d -> %d",
			what, before.free>>20, after.free>>20, before.goroutines, after.goroutines, before.fds, after.fds, before.comms, after.comms)
		if after.free+memSlack < before.free && mid.free+memSlack/2 < before.free && after.free+memSlack/2 < mid.free {
			t.Errorf("%s: %d MiB of GPU memory not given back (%d MiB in the first half, %d in the second)", what,
				(before.free-after.free)>>20, (before.free-mid.free)>>20, (mid.free-after.free)>>20)
		} else if after.free+memSlack < before.free {
			t.Logf("%s: %d MiB less free GPU memory, all of it in one half: another process's (no leak grows in both)", what, (before.free-after.free)>>20)
		}
		if after.goroutines > before.goroutines {
			t.Errorf("%s: %d goroutines more", what, after.goroutines-before.goroutines)
		}
		if after.fds > before.fds {
			t.Errorf("%s: %d file descriptors more", what, after.fds-before.fds)
		}
		if after.comms > before.comms {
			t.Errorf("%s: %d communicators more still open in the recorder", what, after.comms-before.comms)
		}
	}
	initDestroy := func() {
		comms, err := nccl.InitAll([]int{0})
		if err != nil {
			t.Fatalf("InitAll: %v", err)
		}
		c := comms[0]
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce: %v", err)
		}
		if err := w.Synchronize(context.Background(), dev.DefaultStream()); err != nil {
			t.Fatalf("Synchronize: %v", err)
		}
		w.Stop()
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
	}
	budget := time.Now().Add(45 * time.Second)
	for range 5 { // warm: NCCL's and the driver's one-time allocations
		initDestroy()
	}
	before := take()
	mid := before
	start := time.Now()
	n := 0
	for ; n < cycles && time.Now().Before(budget); n++ {
		if n == cycles/2 || time.Until(budget) < 22*time.Second && mid == before {
			mid = take()
		}
		initDestroy()
	}
	t.Logf("%d init/destroy cycles in %v (%v each)", n, time.Since(start), time.Since(start)/time.Duration(max(n, 1)))
	if n < cycles {
		t.Logf("stopped after %d of %d cycles: the 45 s budget ran out", n, cycles)
	}
	compare("init/destroy", before, mid, take())
	if watchdog.Running() {
		t.Error("the watchdog's poller still runs")
	}

	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()
	for range 5 {
		rb, err := c.RegisterBuffer(buf)
		if err != nil {
			t.Fatalf("RegisterBuffer: %v", err)
		}
		rb.Close()
	}
	before = take()
	mid = before
	start = time.Now()
	n = 0
	for ; n < cycles && time.Now().Before(budget.Add(10*time.Second)); n++ {
		if n == cycles/2 {
			mid = take()
		}
		rb, err := c.RegisterBuffer(buf)
		if err != nil {
			t.Fatalf("RegisterBuffer %d: %v", n, err)
		}
		if err := rb.Close(); err != nil {
			t.Fatalf("Close %d: %v", n, err)
		}
	}
	t.Logf("%d register/deregister cycles in %v", n, time.Since(start))
	compare("register/deregister", before, mid, take())
}

// syncWithin waits for the stream's work, failing the test if it is not
// done within d (a kernel an abort did not free). Errors of the work
// itself (an aborted kernel) are logged.
func syncWithin(t *testing.T, s cuda.Stream, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Synchronize() }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("stream synchronize: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("the stream's work still runs after %v", d)
	}
}

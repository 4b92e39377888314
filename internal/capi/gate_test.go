//go:build linux && cgo

package capi

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// Handles testdata/noopnccl.c treats specially.
const (
	noopPendingComm = 0x7
	noopFailingComm = 0xbad
)

var noop struct {
	once sync.Once
	err  string
}

// loadNoop builds testdata/noopnccl.c with `go env CC` and loads it as this
// process's NCCL (once: a process loads one NCCL).
func loadNoop(tb testing.TB) {
	tb.Helper()
	noop.once.Do(func() {
		cc := "cc"
		if out, err := exec.Command("go", "env", "CC").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			cc = strings.TrimSpace(string(out))
		}
		dir, err := os.MkdirTemp("", "capi-noop-")
		if err != nil {
			noop.err = err.Error()
			return
		}
		lib := filepath.Join(dir, "libnccl.so.2")
		f := strings.Fields(cc)
		args := append(f[1:], "-shared", "-fPIC", "-O2", "-o", lib, filepath.Join("testdata", "noopnccl.c"))
		if msg, err := exec.Command(f[0], args...).CombinedOutput(); err != nil {
			noop.err = "building the no-op NCCL: " + err.Error() + "\n" + string(msg)
			return
		}
		if msg, ok := LoadNCCL(lib); !ok {
			noop.err = "loading the no-op NCCL: " + msg
		}
	})
	if noop.err != "" {
		tb.Fatal(noop.err)
	}
}

// onThread runs fn on a goroutine locked to its own thread and waits.
func onThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fn()
	}()
	<-done
}

func code(t *testing.T, what string, st Status, want int32) {
	t.Helper()
	if st.Code != want {
		t.Fatalf("%s: code %d (%q), want %d", what, st.Code, st.Detail, want)
	}
}

func gateIdle(t *testing.T) {
	t.Helper()
	if b, o := atomic.LoadInt32(gateBusy), atomic.LoadInt32(openGroups); b != 0 || o != 0 {
		t.Fatalf("gate counters: busy %d, open groups %d; want 0, 0", b, o)
	}
}

// The symbol table is filled once at load, and Present indexes it.
func TestPresentAfterLoad(t *testing.T) {
	loadNoop(t)
	for _, s := range []Sym{SymGetVersion, SymAllReduce, SymGroupStart, SymGroupEnd, SymCommGetAsyncError} {
		if !Present(s) {
			t.Errorf("%v: not present in the no-op NCCL", s)
		}
	}
	for _, s := range []Sym{SymBroadcast, SymCommInitRankConfig, SymCommShrink, -1, NumSyms} {
		if Present(s) {
			t.Errorf("%v: present, the no-op NCCL lacks it", s)
		}
	}
	code(t, "Broadcast", Broadcast(0, 0, 1, 0, 0, 1, 0), Missing)
	for i, s := range NCCLSymbols() {
		if s.Present != Present(Sym(i)) || s.Name != SymName[i] || s.Since != SymSince[i] {
			t.Errorf("NCCLSymbols()[%d] = %+v; table: %s since %d, present %v", i, s, SymName[i], SymSince[i], Present(Sym(i)))
		}
	}
}

// The gate's fast path (nothing to check) and its slow paths give the
// same answers as before: held, orphaned, pending, recorded.
func TestGatePaths(t *testing.T) {
	loadNoop(t)
	gateIdle(t)
	code(t, "AllReduce, idle", AllReduce(0, 0, 1, 0, 0, 0x100, 0), 0)
	st := AllReduce(0, 0, 1, 0, 0, noopFailingComm, 0)
	if st.Code != 4 || st.Detail != "noop: failing communicator" {
		t.Fatalf("failing AllReduce: %+v", st)
	}
	if GroupDepth() != 0 || GroupRecords() != 0 {
		t.Fatalf("idle: depth %d, records %d", GroupDepth(), GroupRecords())
	}

	// A group on one thread holds its communicator against the others.
	const x, y = 0x200, 0x300
	started, check, end := make(chan struct{}), make(chan struct{}), make(chan []uintptr)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		code(t, "GroupStart", GroupStart(), 0)
		GroupMark()
		if d := GroupDepth(); d != 1 || !GroupInnerManual() {
			t.Errorf("in the group: depth %d, manual %v", d, GroupInnerManual())
		}
		code(t, "AllReduce in the group", AllReduce(0, 0, 1, 0, 0, x, 0), 0)
		code(t, "AllReduce in the group, again", AllReduce(0, 0, 1, 0, 0, x, 0), 0)
		close(started)
		<-check
		code(t, "GroupEnd", GroupEnd(), 0)
		if d := GroupDepth(); d != 0 {
			t.Errorf("after the end: depth %d", d)
		}
		end <- GroupTake()
	}()
	<-started
	onThread(func() {
		if d := GroupDepth(); d != 0 {
			t.Errorf("another thread's depth: %d", d)
		}
		code(t, "AllReduce on the held communicator", AllReduce(0, 0, 1, 0, 0, x, 0), Held)
		code(t, "AllReduce on another communicator", AllReduce(0, 0, 1, 0, 0, y, 0), 0)
		code(t, "CommCount (queues no work) on the held communicator", statusOf(CommCount(x)), 0)
	})
	if n := GroupHeld(x); n != 1 {
		t.Errorf("GroupHeld = %d, want 1", n)
	}
	close(check)
	used := <-end
	if len(used) != 1 || used[0] != x {
		t.Fatalf("GroupTake = %#x, want [%#x]", used, x)
	}
	if n := GroupHeld(x); n != 1 {
		t.Errorf("after the take: GroupHeld = %d, want 1 until the release", n)
	}
	GroupRelease(used)
	if GroupHeld(x) != 0 || GroupRecords() != 0 {
		t.Errorf("after the release: held %d, records %d", GroupHeld(x), GroupRecords())
	}
	gateIdle(t)

	// Non-blocking communicators alive: the gate asks for their state.
	code(t, "AllReduce on the pending handle, none alive", AllReduce(0, 0, 1, 0, 0, noopPendingComm, 0), 0)
	NonBlockingAdd(1)
	code(t, "AllReduce on a pending communicator", AllReduce(0, 0, 1, 0, 0, noopPendingComm, 0), Pending)
	code(t, "CommCount on a pending communicator", statusOf(CommCount(noopPendingComm)), Pending)
	code(t, "AllReduce on a ready communicator", AllReduce(0, 0, 1, 0, 0, x, 0), 0)
	NonBlockingAdd(-1)
	gateIdle(t)
}

func statusOf(_ int, st Status) Status { return st }

// A thread that ends inside a group orphans the communicators its group
// held, and gives back its count of open groups.
func TestGateThreadExit(t *testing.T) {
	loadNoop(t)
	gateIdle(t)
	const z = 0x400
	for {
		res := make(chan bool)
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == syscall.Getpid() {
				// Go parks the main thread instead of ending it.
				runtime.UnlockOSThread()
				res <- false
				return
			}
			if st := GroupStart(); st.Code != 0 {
				t.Errorf("GroupStart: %+v", st)
			}
			if st := AllReduce(0, 0, 1, 0, 0, z, 0); st.Code != 0 {
				t.Errorf("AllReduce: %+v", st)
			}
			res <- true
			// Exit locked: Go ends the thread.
		}()
		if <-res {
			break
		}
	}
	for i := 0; !GroupOrphaned(z); i++ {
		if i == 1000 {
			t.Fatal("the communicator is not orphaned after its thread ended")
		}
		runtime.Gosched()
		syscall.Nanosleep(&syscall.Timespec{Nsec: 1e6}, nil)
	}
	if o := atomic.LoadInt32(openGroups); o != 0 {
		t.Errorf("open groups after the thread ended: %d", o)
	}
	onThread(func() {
		code(t, "AllReduce on an orphaned communicator", AllReduce(0, 0, 1, 0, 0, z, 0), Orphaned)
	})
	GroupForget(z)
	gateIdle(t)
	code(t, "AllReduce after forget", AllReduce(0, 0, 1, 0, 0, z, 0), 0)
}

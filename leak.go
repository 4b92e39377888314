package nccl

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
)

// Leak reporting: a communicator the garbage collector finds unreachable
// while still initialized was never destroyed. The binding only reports it
// (runtime.AddCleanup, stopped when the communicator is released): freeing
// it would be a collective call, which a cleanup must never make.

// Leak describes a communicator the garbage collector found unreachable
// while still initialized: it was never destroyed, so its NCCL resources
// (GPU memory, threads, connections) stay allocated.
type Leak struct {
	Handle uintptr // the ncclComm_t; 0 when dropped before NCCL made it (Op)
	Stack  string  // where it was created
	// Op is "Split" or "Shrink" for a child dropped while NCCL was still
	// creating it (a pending child): its parent aborts what NCCL makes for
	// it when the parent is destroyed or aborted. "" otherwise.
	Op string
}

var leakHandler atomic.Pointer[func(Leak)]

// SetLeakHandler sets what happens when a leaked communicator is found;
// nil restores the default, a message on standard error. The handler only
// reports: the binding never destroys a leaked communicator from the
// garbage collector, since that would be a collective call.
func SetLeakHandler(h func(Leak)) {
	if h == nil {
		leakHandler.Store(nil)
		return
	}
	leakHandler.Store(&h)
}

func reportLeak(l Leak) {
	if h := leakHandler.Load(); h != nil {
		(*h)(l)
		return
	}
	if l.Op != "" {
		fmt.Fprintf(os.Stderr, "nccl: a communicator being created by %s was dropped before it was ready (its parent aborts it when released); created at:\n%s\n", l.Op, l.Stack)
		return
	}
	fmt.Fprintf(os.Stderr, "nccl: communicator %#x was never destroyed; created at:\n%s\n", l.Handle, l.Stack)
}

// pendingLeak is what the cleanup of a dropped pending child needs.
type pendingLeak struct {
	cell  *childCell
	op    string
	stack string
}

// watchPendingLeak arranges, for a Split or Shrink child still pending,
// that if the program drops it the parent aborts what NCCL stores for it
// (at the parent's release) and the leak is reported. It is replaced by
// watchLeak once the child is ready, and stopped if it fails or is aborted.
func (c *Communicator) watchPendingLeak(op string, cc *childCell) {
	buf := make([]byte, 4096)
	buf = buf[:runtime.Stack(buf, false)]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLeakWatchLocked()
	c.cleanup = runtime.AddCleanup(c, func(l pendingLeak) {
		l.cell.dropped.Store(true)
		reportLeak(Leak{Op: l.op, Stack: l.stack})
	}, pendingLeak{cell: cc, op: op, stack: string(buf)})
	c.hasClean = true
}

// stopLeakWatchLocked stops the leak watch of c, if any (mu held).
func (c *Communicator) stopLeakWatchLocked() {
	if c.hasClean {
		c.cleanup.Stop()
		c.hasClean = false
	}
}

// watchLeak arranges for reportLeak if c becomes unreachable while live.
func (c *Communicator) watchLeak() {
	if c.hasClean {
		c.cleanup.Stop()
	}
	buf := make([]byte, 4096)
	buf = buf[:runtime.Stack(buf, false)]
	c.cleanup = runtime.AddCleanup(c, reportLeak, Leak{Handle: c.ptr, Stack: string(buf)})
	c.hasClean = true
}

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
	Ptr   uintptr // the ncclComm_t
	Stack string  // where it was created
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
	fmt.Fprintf(os.Stderr, "nccl: communicator %#x was never destroyed; created at:\n%s\n", l.Ptr, l.Stack)
}

// watchLeak arranges for reportLeak if c becomes unreachable while live.
func (c *Communicator) watchLeak() {
	if c.hasClean {
		c.cleanup.Stop()
	}
	buf := make([]byte, 4096)
	buf = buf[:runtime.Stack(buf, false)]
	c.cleanup = runtime.AddCleanup(c, reportLeak, Leak{Ptr: c.ptr, Stack: string(buf)})
	c.hasClean = true
}

package nccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/nccl4go/nccl/internal/capi"
)

// plain is the context the variants without a context pass: their calls
// on a non-blocking communicator return as soon as NCCL has started the
// work. A *Context variant instead completes the operation, waiting (within
// its context) even on a non-blocking communicator.
var plain = context.WithValue(context.Background(), plainKey{}, true)

type plainKey struct{}

// completes reports whether an operation must be finished before returning:
// always for a blocking communicator, and for any call given a context.
func completes(ctx context.Context, blocking bool) bool {
	return blocking || ctx.Value(plainKey{}) == nil
}

// call makes a gated NCCL call that returns only a status. While an earlier
// operation of the communicator is still running it waits and calls again;
// when NCCL reports the call in progress, a blocking communicator waits for
// it and a non-blocking one returns (its next call, or Wait, waits).
func (c *Communicator) call(ctx context.Context, op, fn string, f func(uintptr) capi.Status) error {
	for {
		ptr, err := c.lockLive(op)
		if err != nil {
			return err
		}
		st := f(ptr)
		blocking := c.blocking
		c.mu.Unlock()
		if retry, err := c.afterCall(ctx, op, fn, st, blocking); !retry {
			return err
		}
	}
}

// Wait waits until the communicator's operations in progress have finished
// (polling ncclCommGetAsyncError with backoff) and returns their error, if
// any. When ctx ends first, the communicator is aborted and the error
// matches both ctx.Err() and ErrInProgress. Needed only for non-blocking
// communicators; blocking ones wait in each call. NCCL 2.4.2.
func (c *Communicator) Wait(ctx context.Context) error { return c.wait(ctx, "Wait") }

// AsyncError is the communicator's asynchronous state
// (ncclCommGetAsyncError): nil when idle and healthy, an error wrapping
// ErrInProgress while an operation runs, or the error that broke it (for
// example ErrRemote when a peer failed). Not collective. NCCL 2.4.2.
func (c *Communicator) AsyncError() error {
	ptr, err := c.lockLive("get async error")
	if err != nil {
		return err
	}
	state, st := capi.CommGetAsyncError(ptr)
	c.mu.Unlock()
	if err := statusErr("AsyncError", "ncclCommGetAsyncError", st); err != nil {
		return err
	}
	if state == 0 {
		return nil
	}
	e := &Error{Op: "AsyncError", Code: Result(state)}
	if Result(state) != InProgress {
		e.Detail = capi.GetLastError()
	}
	return e
}

// LastError is ncclGetLastError: NCCL's last warning in this process. NCCL
// keeps one buffer for the whole process, so it may describe another
// communicator. Errors from this package already carry it. NCCL 2.13.4.
func (c *Communicator) LastError() (string, error) {
	if _, err := c.lockLive("get last error"); err != nil {
		return "", err
	}
	c.mu.Unlock()
	return capi.GetLastError(), nil
}

// wait polls the communicator's state until nothing is in progress.
func (c *Communicator) wait(ctx context.Context, op string) error {
	if err := c.awaitPending(ctx, op); err != nil {
		return err
	}
	var delay time.Duration
	for spins := 0; ; spins++ {
		ptr, err := c.lockLive(op)
		if err != nil {
			return err
		}
		state, st := capi.CommGetAsyncError(ptr)
		if state == 0 && st.Code == 0 && c.life.pendingRes > 0 {
			c.settleResourcesLocked() // windows, device communicators (lifecycle.go)
		}
		c.mu.Unlock()
		if err := statusErr(op, "ncclCommGetAsyncError", st); err != nil {
			return err
		}
		switch Result(state) {
		case Success:
			return nil
		case InProgress:
		default:
			return &Error{Op: op, Code: Result(state), Detail: capi.GetLastError()}
		}
		if spins == 0 && capi.GroupDepth() > 0 {
			return fmt.Errorf("nccl: %s: cannot wait for a communicator inside a group: its work starts when the group ends: %w", op, ErrInvalidUsage)
		}
		if ctx.Err() != nil {
			return c.cancel(ctx, op)
		}
		if spins < 64 {
			runtime.Gosched()
			continue
		}
		delay = min(max(2*delay, 10*time.Microsecond), 2*time.Millisecond)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.cancel(ctx, op)
		case <-t.C:
		}
	}
}

// cancel aborts the communicator because ctx ended while op was in progress.
func (c *Communicator) cancel(ctx context.Context, op string) error {
	abortErr := c.Abort()
	what := "aborted: "
	if abortErr != nil {
		what = "not aborted (see the next error): "
	}
	state := &Error{Op: op, Code: InProgress, Detail: what + context.Cause(ctx).Error()}
	return errors.Join(ctx.Err(), state, abortErr)
}

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

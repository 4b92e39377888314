package nccl

import (
	"context"
	"errors"
	"fmt"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/spin"
	"github.com/nccl4go/nccl/trace"
)

// How a call goes. Every method that calls NCCL on a communicator goes
// through this file:
//
//  1. take: lock the communicator (mu) and get its live NCCL pointer; the
//     levels of take say what the lifecycle (state.go) must allow besides
//     (takeLive: any call on an NCCL communicator; takeWork: also new
//     operations, so not finalized or revoked; takePrepared: also the
//     identity and the facts the hot path checks against are cached, read
//     in a slow path once per NCCL communicator).
//  2. attempt: run the call's own checks and its one C call with mu held
//     (released by defer). The shim's gate answers capi.Pending without
//     calling NCCL while the communicator's previous operation is still in
//     progress (non-blocking communicators), and capi.Held or
//     capi.Orphaned when another thread's group owns its queue.
//  3. retry: on capi.Pending, wait for that operation with mu released
//     (wait, below), then attempt again. retry is the package's only retry
//     loop: the queries that find NCCL still creating the communicator
//     (identity, properties), the closing of resources and Window.UserPtr
//     answer capi.Pending to it too. start is steps 1 to 3.
//  4. finish: turn the status into an error. ncclInProgress means NCCL
//     started the work in the background: the call waits for it when its
//     mode is completed or the communicator is blocking, outside a group.
//     call is steps 1 to 4; calls that create something (Split, Shrink,
//     Grow, windows and device communicators: createAsync in resource.go)
//     finish themselves after start.
//
// wait is the one wait: it polls the communicator's state with backoff,
// mu released between polls, and aborts the communicator when its context
// ends; for a Split or Shrink child still pending it first waits on the
// parent (awaitPending, pending.go).
//
// A call that has a ...Context variant runs in mode started in its plain
// variant (Split, Finalize, Revoke, ...) and in mode completed in its
// ...Context variant. A call without one whose answer is a value the
// caller gets at once (GetUniqueID, MemStat, RegisterBuffer, PreMulSum)
// runs in mode completed, and so does Destroy (DestroyContext with a
// background context: NCCL frees the communicator only once its work is
// over). The mode is an explicit argument, never a value hidden in a
// context.

// mode says when a call returns.
type mode uint8

const (
	// started: once NCCL has accepted the work. On a non-blocking
	// communicator the work may still be running: its next call (or Wait)
	// waits for it. The plain variants of the API.
	started mode = iota
	// completed: once the work is done, waiting within the call's context
	// even on a non-blocking communicator. The ...Context variants.
	completed
)

// take is what a call needs of the communicator before it runs.
type take uint8

const (
	takeLive     take = iota // initialized (a pending Split child once ready)
	takeWork                 // and takes new work: not finalized or revoked
	takePrepared             // and its identity and hot-path facts are cached
)

// lockLive locks c and returns its NCCL pointer, or a [StateError] (unlocked).
func (c *Communicator) lockLive(op string) (uintptr, error) {
	if c == nil {
		return 0, refusal(op, stateNull, evUse, nil)
	}
	c.mu.Lock()
	if c.ptr == 0 { // not live, finalized or revoked (state.go)
		if c.state == statePending {
			return c.lockPendingLocked(op) // pending.go
		}
		err := c.refusalLocked(op, evUse)
		c.mu.Unlock()
		return 0, err
	}
	return c.ptr, nil
}

// lock takes c as t says: it returns the pointer with mu held, or an error
// with mu released.
func (c *Communicator) lock(op string, t take) (uintptr, error) {
	for {
		ptr, err := c.lockLive(op)
		if err != nil || t == takeLive {
			return ptr, err
		}
		if !c.allowsLocked(evQueue) { // finalized or revoked
			err := c.refusalLocked(op, evQueue)
			c.mu.Unlock()
			return 0, err
		}
		if t == takeWork || (c.coll.ptr == ptr && c.identity) {
			return ptr, nil
		}
		c.mu.Unlock() // prepare takes mu itself, and may wait
		if err := c.prepare(op); err != nil {
			return 0, err
		}
	}
}

// collState holds what the hot path checks against beyond the identity,
// filled by prepare (slow path, once per NCCL communicator).
type collState struct {
	ptr     uintptr // the ncclComm_t these facts belong to; 0: not yet filled
	release Release // the loaded NCCL
	cc      int     // the device's compute capability as major*10+minor (fp8 reductions)
}

// prepare fills the identity and collState of the communicator.
func (c *Communicator) prepare(op string) error {
	_, _, dev, err := c.ident(op)
	if err != nil {
		return err
	}
	r, err := loaded()
	if err != nil {
		return err
	}
	major, minor, err := cuda.Device(dev).ComputeCapability()
	if err != nil {
		return fmt.Errorf("nccl: %s: reading the compute capability of cuda:%d: %w", op, dev, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 && c.coll.ptr != c.ptr {
		c.coll = collState{ptr: c.ptr, release: r, cc: major*10 + minor}
		if c.identity {
			c.registerTraceLocked() // record.go
		}
	}
	return nil
}

// attempt takes c as t says and runs f on its pointer with mu held. It
// also returns whether c is blocking, read under the same lock.
//
// It is the one place that records operations (record.go): every call
// passes the flight recorder's event ev of what it queues, or nil for a
// call that queues nothing (a query, a registration). f may complete ev
// (count, type, stream) before its C call. The operation is recorded, and
// the hooks told, once NCCL accepted it; a blocking communicator's Split,
// Shrink, Grow and Finalize, which wait inside NCCL for the other ranks
// and may hang there, are recorded just before the C call instead.
func (c *Communicator) attempt(op string, t take, ev *trace.Event, f func(ptr uintptr) (capi.Status, error)) (st capi.Status, blocking bool, err error) {
	ptr, err := c.lock(op, t)
	if err != nil {
		return st, false, err
	}
	defer c.mu.Unlock()
	if ev == nil {
		st, err = f(ptr)
		return st, c.blocking, err
	}
	if lifecycleOps[ev.Op] {
		return c.attemptLifecycleLocked(ptr, ev, f)
	}
	st, err = f(ptr)
	if err == nil && accepted(st) {
		c.recordLocked(ev)
	}
	return st, c.blocking, err
}

// attemptLifecycleLocked is attempt's part for a lifecycle operation (mu
// held): recorded before its C call when it runs blocking (see
// recordsBeforeLocked) and completed when the call returns; else recorded
// once NCCL accepted it and completed when NCCL's work is over.
func (c *Communicator) attemptLifecycleLocked(ptr uintptr, ev *trace.Event, f func(ptr uintptr) (capi.Status, error)) (capi.Status, bool, error) {
	if c.trace.rec == nil {
		// The first operation of the communicator (a Split right after
		// Init): register it with the recorder now, its identity known.
		if code, err := c.identityLocked(ev.Op.String()); err == nil && code != capi.Pending {
			c.registerTraceLocked() // record.go
		}
	}
	if c.recordsBeforeLocked(ev.Op, ptr) {
		ref := c.recordLocked(ev)
		st, err := f(ptr)
		c.completeLocked(ref)
		return st, c.blocking, err
	}
	st, err := f(ptr)
	if err == nil && accepted(st) {
		c.hostAcceptedLocked(c.recordLocked(ev), st)
	}
	return st, c.blocking, err
}

// recordsBeforeLocked reports whether the lifecycle operation op is
// recorded before its C call on ptr (mu held): a Split, Shrink, Grow or
// Finalize that the communicator runs blocking, outside a group, and that
// its state lets through (the call's own checks, and the shim's gate for
// another thread's group, refuse the rest before NCCL).
func (c *Communicator) recordsBeforeLocked(op trace.Op, ptr uintptr) bool {
	switch op {
	case trace.Split, trace.Shrink, trace.Grow:
		if !c.allowsLocked(evDerive) {
			return false
		}
	case trace.Finalize:
		if !c.allowsLocked(evFinalize) {
			return false
		}
	default:
		return false
	}
	return c.blocking && !c.nbCounted && capi.GroupDepth() == 0 &&
		capi.GroupHeld(ptr) == 0 && !capi.GroupOrphaned(ptr)
}

// retry runs try until the shim no longer answers capi.Pending, waiting
// (within ctx) for the communicator's operation in progress in between.
// try takes and releases the communicator's lock itself. It is the
// package's only retry loop: every call that can find the communicator
// busy (the shim's gate, or NCCL still creating it) goes through it.
func (c *Communicator) retry(ctx context.Context, op string, try func() (capi.Status, error)) (capi.Status, error) {
	for {
		st, err := try()
		if err != nil || st.Code != capi.Pending {
			return st, err
		}
		if err := c.wait(ctx, op); err != nil {
			return st, err
		}
	}
}

// start is steps 1 to 3 of a call: take c as t says, run f (its checks and
// its C call) with mu held, and retry while the previous operation is
// pending. It returns the status and whether c is blocking; a call that
// creates something finishes itself, the others go through call.
func (c *Communicator) start(ctx context.Context, op string, t take, ev *trace.Event, f func(ptr uintptr) (capi.Status, error)) (st capi.Status, blocking bool, err error) {
	st, err = c.retry(ctx, op, func() (st capi.Status, err error) {
		st, blocking, err = c.attempt(op, t, ev, f)
		return st, err
	})
	return st, blocking, err
}

// call is the whole path of a call whose C function returns only a status:
// start, then finish as m says. fn names the C function in errors; ev is
// what the flight recorder records (see attempt), nil for a call that
// queues nothing.
func (c *Communicator) call(ctx context.Context, m mode, op, fn string, t take, ev *trace.Event, f func(ptr uintptr) (capi.Status, error)) error {
	// start, spelled out: the hot path (collectives.go run) gets no frame
	// more.
	var blocking bool
	st, err := c.retry(ctx, op, func() (st capi.Status, err error) {
		st, blocking, err = c.attempt(op, t, ev, f)
		return st, err
	})
	if err != nil {
		return err
	}
	return c.finish(ctx, m, op, fn, st, blocking)
}

// finish turns the status of an accepted call into its error: ncclSuccess
// is nil; ncclInProgress waits for the work when m is completed or the
// communicator blocking, outside a group (inside one the work starts when
// the group ends); anything else is the NCCL error.
func (c *Communicator) finish(ctx context.Context, m mode, op, fn string, st capi.Status, blocking bool) error {
	switch {
	case st.Code == 0:
		return nil
	case Result(st.Code) == InProgress:
		if completes(m, blocking) && capi.GroupDepth() == 0 {
			return c.wait(ctx, op)
		}
		return nil
	}
	return statusErr(op, fn, st)
}

// completes reports whether a call in mode m on a communicator that is
// blocking or not must see its work done before returning.
func completes(m mode, blocking bool) bool { return m == completed || blocking }

// accepted reports whether NCCL accepted a call that returned st: it
// succeeded, or a non-blocking communicator's call goes on ([InProgress]).
func accepted(st capi.Status) bool { return st.Code == 0 || Result(st.Code) == InProgress }

// Wait waits until the communicator's operations in progress have finished
// (polling ncclCommGetAsyncError with backoff) and returns their error, if
// any. When ctx ends first, the communicator is aborted and the error
// matches both ctx.Err() and [ErrInProgress]. Needed only for non-blocking
// communicators; blocking ones wait in each call. Not collective.
// NCCL 2.4.2.
func (c *Communicator) Wait(ctx context.Context) error { return c.wait(ctx, "Wait") }

// AsyncError is the communicator's asynchronous state
// (ncclCommGetAsyncError): nil when idle and healthy, an error wrapping
// [ErrInProgress] while an operation runs, or the error that broke it (for
// example [ErrRemote] when a peer failed). Not collective. NCCL 2.4.2.
func (c *Communicator) AsyncError() error {
	state, st, err := c.pollState("AsyncError")
	if err != nil {
		return err
	}
	done, err := asyncOutcome("AsyncError", state, st)
	if !done {
		return &Error{Op: "AsyncError", Code: InProgress}
	}
	return err
}

// LastError is ncclGetLastError: NCCL's last warning in this process. NCCL
// keeps one buffer for the whole process, so it may describe another
// communicator. Errors from this package already carry it. Not collective.
// NCCL 2.13.4.
func (c *Communicator) LastError() (string, error) {
	if err := c.checkLive("LastError"); err != nil {
		return "", err
	}
	return capi.GetLastError(), nil
}

// checkLive returns lockLive's error, if any, leaving c unlocked.
func (c *Communicator) checkLive(op string) error {
	if _, err := c.lockLive(op); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return nil
}

// wait polls the communicator's state, with mu released between polls,
// until nothing is in progress: giving the OS thread away (sched_yield,
// so NCCL's threads run on a pinned core), then sleeping with exponential
// backoff up to 2 ms (internal/spin). When ctx ends first it aborts the
// communicator (cancel).
func (c *Communicator) wait(ctx context.Context, op string) error {
	if err := c.awaitPending(ctx, op); err != nil {
		return err
	}
	var bo spin.Backoff // sched_yield first, then sleeps up to 2 ms
	for spins := 0; ; spins++ {
		state, st, err := c.pollState(op)
		if err != nil {
			return err
		}
		if done, err := asyncOutcome(op, state, st); done {
			return err
		}
		if spins == 0 && capi.GroupDepth() > 0 {
			return fmt.Errorf("nccl: %s: cannot wait for a communicator inside a group: its work starts when the group ends: %w", op, ErrInvalidUsage)
		}
		if ctx.Err() != nil || bo.WaitContext(ctx) != nil {
			return c.cancel(ctx, op)
		}
	}
}

// asyncOutcome reads one poll of ncclCommGetAsyncError (state, and st, the
// call's own status): done once the communicator's work is over, with err
// the failure that broke it (nil when idle and healthy). The waits,
// AsyncError and the outcome of a pending child read their answer here.
func asyncOutcome(op string, state int32, st capi.Status) (done bool, err error) {
	if err := statusErr(op, "ncclCommGetAsyncError", st); err != nil {
		return true, err
	}
	switch Result(state) {
	case Success:
		return true, nil
	case InProgress:
		return false, nil
	}
	return true, &Error{Op: op, Code: Result(state), Detail: capi.GetLastError()}
}

// pollState asks NCCL for the communicator's state once
// (ncclCommGetAsyncError), with mu held for the call only; an idle
// communicator also settles its windows and device communicators. wait and
// AsyncError poll through it.
func (c *Communicator) pollState(op string) (int32, capi.Status, error) {
	ptr, err := c.lockLive(op)
	if err != nil {
		return 0, capi.Status{}, err
	}
	defer c.mu.Unlock()
	state, st := c.asyncErrorLocked(ptr) // record.go
	if state == 0 && st.Code == 0 && c.life.pendingRes > 0 {
		c.settleResourcesLocked() // pending.go
	}
	return state, st, nil
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

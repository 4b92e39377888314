package nccl

import (
	"context"
	"errors"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Teardown: Finalize, Destroy and Abort, and release, the one place that
// frees an NCCL communicator.

// Finalize flushes the communicator's outstanding operations and tears down
// its connections (ncclCommFinalize), leaving Destroy with only local work.
// Collective. A no-op on a null communicator. NCCL 2.14.3.
func (c *Communicator) Finalize() error { return c.finalize(context.Background(), started, false) }

// FinalizeContext is Finalize (ncclCommFinalize, collective, NCCL 2.14.3)
// that completes before returning: for a non-blocking communicator, when ctx
// ends first the communicator is aborted.
func (c *Communicator) FinalizeContext(ctx context.Context) error {
	return c.finalize(ctx, completed, false)
}

// finalize is ncclCommFinalize, finished as m says. With grouped, the
// caller (DestroyAll) has opened the group this finalize joins: only
// another thread's hold on c is refused.
func (c *Communicator) finalize(ctx context.Context, m mode, grouped bool) error {
	if err := c.awaitPending(ctx, "Finalize"); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	if c.Handle() == 0 {
		return c.move("Finalize", evFinalize) // null: nothing to do
	}
	if grouped {
		if err := heldElsewhere("Finalize", c.Handle()); err != nil {
			return err
		}
	} else if err := c.notInGroup("Finalize", c.Handle()); err != nil {
		return err
	}
	return c.call(ctx, m, "Finalize", "ncclCommFinalize", takeLive, &trace.Event{Op: trace.Finalize}, func(ptr uintptr) (capi.Status, error) {
		if !c.allowsLocked(evFinalize) {
			return capi.Status{}, c.refusalLocked("Finalize", evFinalize)
		}
		st := capi.CommFinalize(ptr)
		if accepted(st) {
			c.moveLocked("Finalize", evFinalize)
		}
		return st, nil
	})
}

// Destroy closes the communicator's resources, finalizes it (waiting for
// its peers) and frees it (ncclCommFinalize, ncclCommDestroy). Collective
// among the ranks of one node unless Finalize was called. A no-op on a null
// communicator; after Destroy or Abort it returns an error wrapping
// [ErrClosed], also when another goroutine's Abort or Destroy released it
// first (of concurrent calls exactly one reports success). Where a group
// holds the communicator (see [Group]) it returns an error wrapping
// [ErrInvalidUsage] and leaves the communicator allocated (its resources may
// already be closed, and it may be finalized): call Destroy again after
// that group. NCCL 2.3.5.
func (c *Communicator) Destroy() error { return c.DestroyContext(context.Background()) }

// DestroyContext is Destroy (ncclCommFinalize then ncclCommDestroy,
// collective within a node, NCCL 2.14.3) bounded by ctx: for a non-blocking
// communicator, if the peers do not finalize before ctx ends, it is aborted
// instead.
func (c *Communicator) DestroyContext(ctx context.Context) error {
	if c == nil {
		return nil
	}
	if err := c.awaitPending(ctx, "Destroy"); err != nil {
		return err
	}
	// One Destroy at a time: a concurrent one waits for it, then finds the
	// communicator closed (or, if the first was refused, destroys it).
	for {
		null, busy, err := c.claimDestroy()
		if null {
			return err
		}
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return fmt.Errorf("nccl: Destroy: waiting for another goroutine's Destroy: %w", ctx.Err())
		}
	}
	defer c.endDestroy()
	return c.destroyClaimed(ctx)
}

// destroyClaimed is Destroy's work once claimDestroy made the calling
// goroutine the one destroying c.
func (c *Communicator) destroyClaimed(ctx context.Context) error {
	if err := c.notInGroup("Destroy", c.Handle()); err != nil {
		return err
	}
	// Let an operation in flight end first, so that resources close cleanly.
	if err := c.wait(ctx, "Destroy"); err != nil && c.Handle() == 0 {
		return err // ctx ended: aborted
	}
	var errs []error
	if err := c.closeResources(); err != nil {
		errs = append(errs, err)
	}
	var err error
	if !c.skipsFinalize() {
		err = c.finalize(ctx, completed, false)
		var refused *groupRefusal
		if errors.As(err, &refused) {
			// Refused before NCCL (another goroutine's group took the
			// communicator meanwhile): nothing was finalized or freed.
			return errors.Join(append(errs, err)...)
		}
	}
	if err == nil {
		err = c.wait(ctx, "Destroy") // a non-blocking communicator's finalize
	}
	if err != nil {
		if c.Handle() == 0 { // aborted because ctx ended
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, err)
	}
	if err := c.release("Destroy", evDestroy, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// claimDestroy makes the calling goroutine the one destroying c, or
// returns busy, the closing channel of the Destroy under way. For a
// communicator without an NCCL pointer it reports null, with Destroy's
// answer (releaseNullLocked).
func (c *Communicator) claimDestroy() (null bool, busy chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == 0 {
		return true, nil, c.releaseNullLocked("Destroy", evDestroy)
	}
	if c.closing != nil {
		return false, c.closing, nil
	}
	c.closing = make(chan struct{})
	return false, nil, nil
}

// endDestroy ends the Destroy claimDestroy began, letting those waiting
// for it go on.
func (c *Communicator) endDestroy() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.closing)
	c.closing = nil
}

// skipsFinalize reports whether Destroy must not finalize c: it was
// finalized or revoked already, or it is orphaned (a thread ended inside a
// group holding its work), which can be neither finalized nor destroyed:
// release aborts it.
func (c *Communicator) skipsFinalize() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.allowsLocked(evFinalize) || (c.ptr != 0 && capi.GroupOrphaned(c.ptr))
}

// AbortCause is Abort (ncclCommAbort, NCCL 2.4.2) that records why: every
// later call on the communicator returns a *[StateError] that wraps cause
// (errors.Is and errors.As reach it), so that a goroutine that did not see
// the abort learns its reason. A watchdog that gave up on an operation
// passes its timeout error. The cause is recorded only by the call that
// aborts the communicator (of concurrent AbortCause calls, the one that
// returns nil; the others return an error wrapping [ErrClosed]), and the
// first cause recorded stays.
func (c *Communicator) AbortCause(cause error) error { return c.abort("AbortCause", cause) }

// Abort closes the communicator's resources and frees it at once,
// cancelling its operations in flight (ncclCommAbort). Every active rank
// should abort too. It never waits for another goroutine's wait, only for a
// call that is inside NCCL (see [Communicator]). A no-op on a null
// communicator; after Destroy or Abort it returns an error wrapping
// [ErrClosed], also when another goroutine's Destroy or Abort released it
// during this call: of concurrent Destroy and Abort calls exactly one
// reports success. During a blocking [Init] (which NCCL gives no handle to) it
// returns an error wrapping [ErrInProgress], and the Init aborts the
// communicator as soon as NCCL returns it. Where a group holds the
// communicator (see [Group]) it returns an error wrapping [ErrInvalidUsage].
// Not collective in this process's view; NCCL asks every active rank to
// abort. NCCL 2.4.2.
func (c *Communicator) Abort() error { return c.abort("Abort", nil) }

// abort is Abort (op: "Abort" or "AbortCause") recording cause (nil: none) if this call is the one that
// aborts the communicator: the cause travels as an argument to release, so
// that a concurrent AbortCause cannot lend it its own.
func (c *Communicator) abort(op string, cause error) error {
	if c == nil || c.abandonPending(op, cause) {
		return nil
	}
	if null, err := c.releaseNull(op, evAbort); null {
		return err
	}
	if err := c.notInGroup(op, c.Handle()); err != nil {
		return err
	}
	err := c.closeResources()
	return errors.Join(err, c.release(op, evAbort, cause))
}

// releaseNull is releaseNullLocked when c has no NCCL pointer: null
// reports whether it had none.
func (c *Communicator) releaseNull(op string, e lifeEvent) (null bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 {
		return false, nil
	}
	return true, c.releaseNullLocked(op, e)
}

// releaseNullLocked is what Destroy and Abort (op, event e) do to a
// communicator without an NCCL pointer (mu held), as the lifecycle table
// says: nothing for the null communicator, [ErrClosed] once destroyed or
// aborted, and [ErrInProgress] during a blocking init, which NCCL gives no
// handle to: the init then aborts what NCCL returns.
func (c *Communicator) releaseNullLocked(op string, e lifeEvent) error {
	if c.state == stateCreating {
		c.abortReq = op
	}
	return c.moveLocked(op, e)
}

// notInGroup refuses to finalize or free c while a group is open on this
// thread (NCCL would defer the work to the group's end, after the binding
// freed what it writes) or while another thread's group holds operations
// of c (its end would use the freed communicator).
func (c *Communicator) notInGroup(op string, ptr uintptr) error {
	if capi.GroupDepth() > 0 {
		return &groupRefusal{fmt.Sprintf("nccl: %s: inside a group: NCCL would defer it to the group's end; call it after the group", op)}
	}
	return heldElsewhere(op, ptr)
}

// heldElsewhere refuses to finalize or free the NCCL communicator ptr while
// another thread's group holds operations of it.
func heldElsewhere(op string, ptr uintptr) error {
	if ptr != 0 && capi.GroupHeld(ptr) > 0 {
		return &groupRefusal{fmt.Sprintf("nccl: %s: the communicator has operations in a group another goroutine has not ended: end that group first", op)}
	}
	return nil
}

// release frees the NCCL communicator, with ncclCommDestroy for final
// evDestroy and ncclCommAbort for evAbort, and makes c null; final becomes
// evAbort where NCCL cannot destroy it. cause is recorded as the abort's
// reason when it ends aborted. Of concurrent releases exactly one succeeds:
// the others find c released and return an error wrapping [ErrClosed].
func (c *Communicator) release(op string, final lifeEvent, cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == 0 {
		return c.releasedLocked(op)
	}
	ptr := c.ptr
	// Checked again under mu, which every call that would add a group's
	// hold on c takes: no group can take c between this check and the free.
	if err := c.notInGroup(op, ptr); err != nil {
		return err
	}
	// Resources made after Destroy closed them (another goroutine) go now,
	// while the communicator they need is still there.
	var resErr error
	for i := len(c.resources) - 1; i >= 0; i-- {
		resErr = errors.Join(resErr, c.resources[i].closeLocked())
	}
	c.resources = nil
	broken := c.lifeBeforeReleaseLocked(op, ptr)
	// Before the free: once freed, another communicator may get the same
	// address (and its own records).
	if final == evDestroy && capi.GroupOrphaned(ptr) {
		// Work NCCL can never run is queued on it: abort, do not destroy.
		final = evAbort
	}
	// The flight recorder's last entry of the communicator: a local
	// operation, recorded before the call (a Destroy can wait in NCCL).
	if len(c.trace.host) > 0 { // lifecycle work that ended unseen: say so first
		c.asyncErrorLocked(ptr)
	}
	ev, f, fn := trace.Event{Op: trace.Abort}, capi.CommAbort, "ncclCommAbort"
	if final == evDestroy {
		ev.Op, f, fn = trace.Destroy, capi.CommDestroy, "ncclCommDestroy"
	}
	ref := c.recordLocked(&ev)
	registry.Delete(ptr)
	capi.GroupForget(ptr)
	st := f(ptr)
	if st.Code == capi.Pending {
		// Destroy of a communicator whose last operation is still running
		// (the shim's gate answered without calling NCCL): NCCL needs it
		// ready first. Abort instead of waiting here, under mu (the shim
		// lets ncclCommAbort through always).
		fn, final = "ncclCommAbort", evAbort
		st = capi.CommAbort(ptr)
	}
	var abortErr error
	if st.Code != 0 && final == evDestroy {
		// NCCL refuses to destroy a broken communicator (its async error
		// is set) and leaves it allocated: abort it, which frees it.
		final = evAbort
		abortErr = statusErr(op, "ncclCommAbort", capi.CommAbort(ptr))
	}
	c.completeLocked(ref)
	c.trace.host = nil
	c.lifeAfterReleaseLocked(final == evAbort, broken)
	c.closeTraceLocked()
	if final == evAbort && c.abortCause == nil {
		c.abortCause = cause // AbortCause's reason
	}
	c.moveLocked(op, final) // live, finalized or revoked: always legal
	c.ptr, c.resources = 0, nil
	if c.nbCounted {
		capi.NonBlockingAdd(-1)
		c.nbCounted = false
	}
	if c.hasClean {
		c.cleanup.Stop()
		c.hasClean = false
	}
	return errors.Join(resErr, statusErr(op, fn, st), abortErr)
}

// releasedLocked is the error of a Destroy or Abort (op) that found c
// released by another goroutine's (mu held).
func (c *Communicator) releasedLocked(op string) error {
	if c.state == stateNull {
		return fmt.Errorf("nccl: %s: communicator released by another goroutine meanwhile: %w", op, ErrClosed)
	}
	return fmt.Errorf("nccl: %s: communicator already %s (by another goroutine meanwhile): %w", op, c.state, ErrClosed)
}

// DestroyAll is [Communicator.Destroy] for several communicators driven
// from one goroutine, such as the ranks [InitAll] returns: it finalizes
// every live communicator first, the blocking ones inside one group
// (ncclGroupStart, ncclCommFinalize of each, ncclGroupEnd: the group
// semantics NCCL asks of one thread that manages several ranks; inside a
// group ncclCommFinalize only queues its job, and the group's end runs the
// jobs together, src/init.cc and src/group.cc), the non-blocking ones one
// after the other without waiting, and then destroys each
// (ncclCommDestroy). A loop of Destroy from one goroutine can deadlock
// where NCCL's finalize waits for the communicator's other ranks: the first
// Destroy waits for ranks that only a later one finalizes (seen on NCCL
// 2.31.0a16 with two ranks of one process on one GPU; 2.30.7's finalize did
// not wait). Nil, null, already destroyed or aborted entries, and entries
// repeated, are skipped without error. Concurrent DestroyAll (or Destroy)
// calls over the same communicators behave as concurrent Destroys: each
// communicator is destroyed once, and the calls that find it destroyed by
// another report an error wrapping [ErrClosed]. Errors are joined, each naming the
// communicator's index in comms. Collective like Destroy; call it outside
// any group (inside one it returns an error wrapping [ErrInvalidUsage] and
// destroys nothing). NCCL 2.14.3 (ncclCommFinalize).
func DestroyAll(comms ...*Communicator) error {
	return DestroyAllContext(context.Background(), comms...)
}

// DestroyAllContext is [DestroyAll] bounded by ctx as
// [Communicator.DestroyContext] is: a non-blocking communicator whose peers
// do not finalize before ctx ends is aborted instead. The group that
// finalizes the blocking communicators waits inside NCCL, where no context
// reaches. NCCL 2.14.3.
func DestroyAllContext(ctx context.Context, comms ...*Communicator) error {
	const op = "DestroyAll"
	if capi.GroupDepth() > 0 {
		return &groupRefusal{"nccl: DestroyAll: inside a group: NCCL would defer the finalizes to the group's end; call it after the group"}
	}
	errs := make([]error, len(comms))
	skip := make([]bool, len(comms))
	// claimed: this call is the one destroying comms[i] (claimDestroy), so
	// that a concurrent Destroy or DestroyAll waits for it and then finds
	// it closed, as concurrent Destroys do.
	claimed := make([]bool, len(comms))
	seen := make(map[*Communicator]bool, len(comms))
	var group []int // the blocking communicators to finalize in one group
	for i, c := range comms {
		if c == nil || seen[c] || c.releasedBefore() {
			skip[i] = true
			continue
		}
		seen[c] = true
		if err := c.awaitPending(ctx, op); err != nil {
			errs[i] = err
			continue
		}
		null, busy, err := c.claimDestroy()
		if null {
			errs[i], skip[i] = err, true
			continue
		}
		if busy != nil {
			continue // another goroutine's Destroy: waited for below
		}
		claimed[i] = true
		ptr := c.Handle()
		if ptr == 0 || c.skipsFinalize() || c.notInGroup(op, ptr) != nil {
			continue // Destroy alone does (or refuses) the rest
		}
		// As Destroy: let an operation in flight end, close the resources.
		if err := c.wait(ctx, op); err != nil && c.Handle() == 0 {
			errs[i] = err // ctx ended: aborted
			continue
		}
		if err := c.closeResources(); err != nil {
			errs[i] = err
		}
		if c.Blocking() {
			group = append(group, i)
		} else if err := c.finalize(ctx, started, false); err != nil {
			errs[i] = errors.Join(errs[i], err) // Destroy waits for it
		}
	}
	var groupErr error
	if len(group) > 0 {
		groupErr = Group(func() error {
			for _, i := range group {
				if err := comms[i].finalize(ctx, started, true); err != nil {
					errs[i] = errors.Join(errs[i], err)
				}
			}
			return nil
		})
	}
	// The communicators this call claimed first, then the others (whose
	// Destroy waits for another goroutine's).
	for i, c := range comms {
		if claimed[i] {
			err := c.destroyClaimed(ctx)
			c.endDestroy()
			if err != nil {
				errs[i] = errors.Join(errs[i], err)
			}
		}
	}
	for i, c := range comms {
		if skip[i] || claimed[i] {
			continue
		}
		if err := c.DestroyContext(ctx); err != nil {
			errs[i] = errors.Join(errs[i], err)
		}
	}
	all := []error{}
	if groupErr != nil {
		all = append(all, fmt.Errorf("nccl: %s: finalizing %d blocking communicator(s) in one group: %w", op, len(group), groupErr))
	}
	for i, err := range errs {
		if err != nil {
			all = append(all, fmt.Errorf("nccl: %s: communicator %d: %w", op, i, err))
		}
	}
	return errors.Join(all...)
}

// releasedBefore reports whether c was destroyed or aborted already.
func (c *Communicator) releasedBefore() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ptr == 0 && (c.state == stateDestroyed || c.state == stateAborted)
}

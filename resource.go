package nccl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nccl4go/nccl/internal/capi"
)

// What the resources a communicator tracks share. Registered buffers and
// custom reduction operators (localRes) exist once their call returns, and
// one local NCCL call ends them. Windows and device communicators (asyncRes)
// may be finished by NCCL after their call returned: at the end of the
// group that issued it, or in the background on a non-blocking
// communicator.

// resource is something a communicator tracks and closes before it goes.
type resource interface {
	// closeLocked releases the resource; the communicator's mu is held and
	// its ptr is still valid.
	closeLocked() error
}

// closeResources closes every tracked resource, newest first.
func (c *Communicator) closeResources() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.resources) - 1; i >= 0; i-- {
		if err := c.resources[i].closeLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	c.resources = nil
	return errors.Join(errs...)
}

// trackLocked adds a resource to be closed by Destroy and Abort (mu held).
func (c *Communicator) trackLocked(r resource) { c.resources = append(c.resources, r) }

// untrackLocked forgets a resource closed on its own (mu held).
func (c *Communicator) untrackLocked(r resource) {
	if i := slices.Index(c.resources, r); i >= 0 {
		c.resources = slices.Delete(c.resources, i, i+1)
	}
}

// closedErr is the error of a closed resource.
func closedErr(op, what string) error {
	return fmt.Errorf("nccl: %s: %s closed (by Close, or by the communicator's Destroy or Abort): %w", op, what, ErrClosed)
}

// ---------------------------------------------------------------------------
// Resources NCCL makes within the call.

// localRes is the part of a registered buffer or custom operator that its
// closing needs.
type localRes struct {
	c      *Communicator
	ptr    uintptr // the ncclComm_t it belongs to
	closed bool    // guarded by c.mu
}

// localResource is *[RegisteredBuffer] or *[CustomOp].
type localResource interface {
	resource
	local() *localRes
	// destroyLocked ends the resource in NCCL (c.mu held, c.ptr == ptr).
	destroyLocked() capi.Status
	// forgetLocked drops what the communicator keeps of the resource
	// besides its resource list (c.mu held).
	forgetLocked()
}

// closeLocal is the Close of a local resource: op names it in errors, fn is
// the C function that ends it. A resource closed already, or whose
// communicator was released (which closed it), needs nothing.
func closeLocal(r localResource, op, fn string) error {
	st, err := r.local().c.retry(context.Background(), op, func() (capi.Status, error) {
		return tryCloseLocal(r), nil
	})
	if err != nil {
		return err
	}
	return statusErr(op, fn, st)
}

// tryCloseLocal is one attempt of closeLocal, under c.mu: it returns
// capi.Pending, leaving r open, while the communicator's previous operation
// is still in progress.
func tryCloseLocal(r localResource) capi.Status {
	l := r.local()
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.closed || c.ptr != l.ptr {
		l.closed = true
		return capi.Status{}
	}
	st := r.destroyLocked()
	if st.Code == capi.Pending {
		return st
	}
	l.closed = true
	c.untrackLocked(r)
	r.forgetLocked()
	return st
}

// closeLocalLocked is closeLocal for Destroy and Abort (c.mu held).
func closeLocalLocked(r localResource, op, fn string) error {
	l := r.local()
	c := l.c
	if l.closed {
		return nil
	}
	l.closed = true
	r.forgetLocked()
	if c.ptr == 0 || c.ptr != l.ptr {
		return nil
	}
	st := r.destroyLocked()
	if st.Code == capi.Pending {
		return nil // busy: NCCL frees what is left with the communicator
	}
	return statusErr(op, fn, st)
}

// ---------------------------------------------------------------------------
// Resources NCCL may finish later.

// resState is the state of an asyncRes.
type resState uint8

const (
	resPending resState = iota // created in a group, or in the background: not known yet
	resReady                   // usable
	resNone                    // NCCL created nothing (a window it does not support)
	resFailed                  // the creation failed when it ran
	resClosed                  // closed, by Close or by the communicator's Destroy or Abort
)

func (s resState) String() string {
	switch s {
	case resPending:
		return "pending"
	case resReady:
		return "ready"
	case resNone:
		return "none"
	case resFailed:
		return "failed"
	}
	return "closed"
}

// pendingErr is the error of a resource whose creation has not finished.
func pendingErr(op, what string) error {
	return &Error{Op: op, Code: InProgress,
		Detail: what + " is not complete yet: Wait on the communicator (or end the group that issued it) first"}
}

// asyncKind names a kind of asyncRes in errors.
type asyncKind struct {
	op       string // "RegisterWindow": the method that creates it
	create   string // the C function that creates it
	what     string // "window"
	creation string // "the window's registration"
	inGroup  string // "the window is registered in a group"
	closeOp  string // "Window.Close"
	destroy  string // the C function that ends it
}

// asyncRes is the part of a window or device communicator that tracks its
// creation and closing.
type asyncRes struct {
	c    *Communicator
	ptr  uintptr // the ncclComm_t it belongs to
	kind *asyncKind
	comp completion // of the call that created it
	// guarded by c.mu
	state resState
	err   error // why it failed, or why NCCL made none
}

// asyncResource is *[Window] or *[DevComm].
type asyncResource interface {
	resource
	async() *asyncRes
	// settleLocked learns whether NCCL's creation is over (c.mu held).
	settleLocked()
	// destroyLocked ends a ready resource in NCCL (c.mu held, c.ptr live).
	destroyLocked() capi.Status
	// freeLocked releases the resource's memory (c.mu held); later defers
	// the C memory NCCL may still write until the communicator is released.
	freeLocked(later bool)
}

// setStateLocked moves a to state s (c.mu held).
func (a *asyncRes) setStateLocked(s resState) {
	if a.state == resPending && s != resPending {
		a.c.life.pendingRes--
	}
	a.state = s
}

// startLocked tracks r, which a call of c has just created, and learns
// whether NCCL is done with it already (mu held). It returns whether c is
// blocking.
func (c *Communicator) startLocked(r asyncResource) bool {
	c.trackLocked(r)
	c.life.pendingRes++
	r.settleLocked()
	return c.blocking
}

// createAsync is every call that creates a window or device communicator
// (kind): take c as t says and run create, its checks and its C call, with
// mu held, retrying while the previous operation is pending (start);
// create returns the new resource, or ok false when NCCL queued nothing,
// with the status saying why. The resource is then tracked (startLocked)
// and finished as m says (finishCreate).
func createAsync[R asyncResource](ctx context.Context, m mode, c *Communicator, kind *asyncKind, t take,
	create func(ptr uintptr) (r R, st capi.Status, ok bool, err error)) (R, error) {
	var (
		r        R
		made     bool
		blocking bool
	)
	st, _, err := c.start(ctx, kind.op, t, nil, func(ptr uintptr) (capi.Status, error) {
		res, st, ok, err := create(ptr)
		if err != nil || !ok {
			return st, err
		}
		*res.async() = asyncRes{c: c, ptr: ptr, kind: kind, comp: c.completionLocked(st)}
		r, made = res, true
		blocking = c.startLocked(res)
		return st, nil
	})
	if err != nil {
		return r, err
	}
	if !made {
		return r, statusErr(kind.op, kind.create, st)
	}
	return finishCreate(ctx, m, kind.op, blocking, r)
}

// finishCreate waits for r's creation outside a group when m or a blocking
// communicator says so, and turns a missing or failed resource into an
// error.
func finishCreate[R asyncResource](ctx context.Context, m mode, op string, blocking bool, r R) (R, error) {
	var none R
	a := r.async()
	c := a.c
	var waitErr error
	if completes(m, blocking) && !a.comp.inGroup {
		waitErr = c.wait(ctx, op)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.settleLocked()
	switch a.state {
	case resReady, resPending:
		if waitErr != nil {
			// The communicator broke (r stays tracked: Abort closes it) or
			// was aborted because ctx ended.
			return none, waitErr
		}
		return r, nil // pending: non-blocking, or in a group: known later
	case resClosed:
		// Closed by the communicator's Destroy or Abort (another
		// goroutine's, or this call's own abort when ctx ended) before
		// the call could return it: never (nil, nil).
		if waitErr != nil {
			return none, waitErr
		}
		return none, closedErr(op, a.kind.what)
	}
	err := a.err
	finishCloseLocked(r)
	return none, err
}

// readyLocked returns nil when r can be used (c.mu held).
func readyLocked(r asyncResource, op string) error {
	a := r.async()
	r.settleLocked()
	switch a.state {
	case resReady:
		return nil
	case resPending:
		return pendingErr(op, a.kind.creation)
	case resNone, resFailed:
		return fmt.Errorf("nccl: %s: %w", op, a.err)
	}
	return closedErr(op, a.kind.what)
}

// lockReady locks r's communicator and checks r is usable; it returns with
// mu held only on success (for the caller to release, by defer where it can).
func lockReady(r asyncResource, op string) error {
	c := r.async().c
	c.mu.Lock()
	if err := readyLocked(r, op); err != nil {
		c.mu.Unlock()
		return err
	}
	return nil
}

// closeAsync is the Close of a window or device communicator. One still
// being created is waited for first, outside its group.
func closeAsync(r asyncResource) error {
	a := r.async()
	st, err := a.c.retry(context.Background(), a.kind.closeOp, func() (capi.Status, error) {
		return tryCloseAsync(r)
	})
	if err != nil {
		return err
	}
	return statusErr(a.kind.closeOp, a.kind.destroy, st)
}

// tryCloseAsync is one attempt of closeAsync, under c.mu: capi.Pending
// while r's creation, or the communicator's previous operation, is still in
// progress (retry waits for it, then tries again); otherwise the status of
// the destroy, if r was ready.
func tryCloseAsync(r asyncResource) (capi.Status, error) {
	a := r.async()
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.state == resClosed {
		return capi.Status{}, nil
	}
	r.settleLocked()
	var st capi.Status
	switch a.state {
	case resPending:
		if c.groupOpenLocked(a.comp) {
			return st, fmt.Errorf("nccl: %s: %s that has not ended: close it after the group: %w", a.kind.closeOp, a.kind.inGroup, ErrInvalidUsage)
		}
		return capi.Status{Code: capi.Pending}, nil
	case resReady:
		st = r.destroyLocked()
		if st.Code == capi.Pending {
			return st, nil
		}
	}
	finishCloseLocked(r)
	return st, nil
}

// finishCloseLocked marks r closed and frees its memory, which NCCL no
// longer writes (c.mu held).
func finishCloseLocked(r asyncResource) {
	a := r.async()
	a.setStateLocked(resClosed)
	r.freeLocked(false)
	a.c.untrackLocked(r)
}

// closeAsyncLocked is closeAsync for Destroy and Abort (c.mu held).
func closeAsyncLocked(r asyncResource) error {
	a := r.async()
	if a.state == resClosed {
		return nil
	}
	c := a.c
	r.settleLocked()
	state := a.state
	a.setStateLocked(resClosed)
	var st capi.Status
	if state == resReady && c.ptr == a.ptr {
		st = r.destroyLocked()
	}
	// A resource still pending may yet be written by NCCL: free its C
	// memory once the communicator is gone.
	r.freeLocked(state == resPending)
	if st.Code == capi.Pending {
		return nil // busy: NCCL frees what is left with the communicator
	}
	return statusErr(a.kind.closeOp, a.kind.destroy, st)
}

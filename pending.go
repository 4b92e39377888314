package nccl

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/nccl4go/nccl/internal/capi"
)

// Pending outputs: what NCCL writes after a call has returned, and how the
// binding learns it is final. A Split or Shrink child, whose pointer NCCL
// stores at the end of a job on the parent (its lifecycle state is pending
// until then, state.go), and windows and device communicators finished at a
// group's end or in the background (resource.go) all wait on a completion.
// How each becomes known is described at the top of lifecycle.go.
//
// The cell NCCL writes for a child belongs to the parent until the parent
// is released (NCCL has joined its jobs then): lifeAfterReleaseLocked
// records the final values for children not resolved yet; a child aborted
// while pending has its cell marked abandoned, and the parent aborts what
// NCCL stores there.

// lifeState is what a [Communicator] keeps for the outputs NCCL writes after
// a call has returned (guarded by the communicator's mu).
type lifeState struct {
	// pend is set while this communicator is being created by Split or
	// Shrink and its pointer is not known yet.
	pend *pendingChild
	// cells are the Split and Shrink outputs of this parent's jobs.
	cells []*childCell
	// own is the cell Grow gave NCCL for this communicator (NCCL's job
	// writes it again at its end).
	own capi.Cell
	// deferred frees C memory NCCL may still write (a window or device
	// communicator closed while its creation was in flight), once NCCL has
	// released the communicator.
	deferred []func()
	// groupEnds counts the outermost groups that used this communicator
	// and ended (see completion).
	groupEnds uint64
	// pendingRes counts the tracked windows and device communicators whose
	// creation is not known to be over: a wait that sees the communicator
	// idle settles them.
	pendingRes int
}

// settleResourcesLocked settles the pending windows and device
// communicators once the communicator is idle (mu held).
func (c *Communicator) settleResourcesLocked() {
	for _, r := range c.resources {
		if s, ok := r.(interface{ settleLocked() }); ok {
			s.settleLocked()
		}
	}
}

// childCell is the C cell where a Split or Shrink job of the parent stores
// the child. The parent owns it; its fields are guarded by the parent's mu.
type childCell struct {
	cell      capi.Cell
	final     bool    // the parent was released: value is what NCCL stored
	value     uintptr // valid when final
	err       error   // the job failed (parent aborted or broken), when final
	claimed   bool    // a child took the outcome (or there is nothing to take)
	abandoned bool    // the child was aborted before it was ready: abort what NCCL stores
	// dropped: the program dropped the child while it was pending (its
	// leak cleanup ran, without any lock): the parent aborts what NCCL
	// stores when it is released.
	dropped atomic.Bool
}

// pendingChild is a Split or Shrink child whose pointer is not known yet.
type pendingChild struct {
	parent   *Communicator
	cell     *childCell
	op       string
	dev      int
	blocking bool
	comp     completion // of the parent's job
}

// completion tells when an output NCCL writes in a communicator's
// background job (or at the end of a group) is final: the call that queued
// it returned, the group it was issued in (if any) has ended, and the
// communicator's async state has left ncclInProgress.
type completion struct {
	inGroup bool
	seq     uint64 // the communicator's groupEnds when the call was made
	done    bool   // the call completed synchronously
}

// completionLocked describes a call just made on c (mu held) that returned st.
func (c *Communicator) completionLocked(st capi.Status) completion {
	in := capi.GroupDepth() > 0
	return completion{inGroup: in, seq: c.life.groupEnds, done: !in && st.Code == 0}
}

// groupOpen is groupOpenLocked under c's mu.
func (c *Communicator) groupOpen(cp completion) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groupOpenLocked(cp)
}

// groupOpenLocked reports whether the group of a call made inside one has
// not ended yet (mu held). Only that group can have ended on c since: while
// it held c, no other thread's group could queue work on c (the shim's
// CAPI_HELD).
func (c *Communicator) groupOpenLocked(cp completion) bool {
	return cp.inGroup && c.life.groupEnds == cp.seq
}

// jobDoneLocked reports whether the job behind cp is over (mu held); err is
// the communicator's failure, if it broke.
func (c *Communicator) jobDoneLocked(op string, cp completion) (bool, error) {
	if cp.done {
		return true, nil
	}
	if c.groupOpenLocked(cp) {
		return false, nil
	}
	if c.ptr == 0 {
		return true, nil
	}
	state, st := c.asyncErrorLocked(c.ptr) // record.go
	return asyncOutcome(op, state, st)
}

// groupEnded records that an outermost group that used the NCCL
// communicator p has ended (called by [GroupEnd] for every communicator the
// group used, whatever ncclGroupEnd returned).
func groupEnded(p uintptr) {
	c := lookup(p)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == p {
		c.life.groupEnds++
		c.groupEndedLocked() // record.go
	}
}

// ---------------------------------------------------------------------------
// Pending children.

// resolveLocked tries to learn the outcome of a pending Split or Shrink
// child (c.mu held; it locks the parent's mu, in that order). done reports
// whether the outcome is known; err is the creation's failure, after which
// c is aborted.
func (c *Communicator) resolveLocked() (done bool, err error) {
	p := c.life.pend
	if p == nil {
		return true, nil
	}
	value, done, err := p.outcome()
	if !done {
		return false, nil
	}
	c.life.pend = nil
	if err == nil && value == 0 {
		err = &Error{Op: p.op, Code: InternalError, Detail: "NCCL reported success but stored no communicator"}
	}
	if err == nil {
		// A blocking parent reports a failed job only through the group's
		// end; the child NCCL stored carries the failure itself.
		if state, st := capi.CommGetAsyncError(value); st.Code == 0 {
			_, err = asyncOutcome(p.op, state, st) // a failure, or nil (done or in progress)
		}
	}
	if err != nil {
		if value != 0 {
			capi.CommAbort(value)
		}
		c.moveLocked(p.op, evFailed)
		c.stopLeakWatchLocked()
		return true, err
	}
	// Watches it for leaks as a live one.
	return true, c.adoptLocked(p.op, value, p.dev, p.blocking)
}

// outcome asks the parent whether its job creating p's child is over
// (done), and if so claims what it stored (value) or its failure (err). It
// locks the parent's mu, after the child's (resolveLocked).
func (p *pendingChild) outcome() (value uintptr, done bool, err error) {
	par, cc := p.parent, p.cell
	par.mu.Lock()
	defer par.mu.Unlock()
	switch {
	case cc.final:
		value, err = cc.value, cc.err
	case par.groupOpenLocked(p.comp):
		return 0, false, nil
	default:
		state, st := par.asyncErrorLocked(par.ptr) // record.go
		if done, err = asyncOutcome(p.op, state, st); !done {
			return 0, false, nil
		}
		value = cc.cell.Load()
		switch {
		case err == nil:
			// The poll that saw success joined NCCL's job: the cell is final.
			par.dropCellLocked(cc)
		case value == 0:
			// The parent broke while its job may still run, and store a
			// child later: the parent aborts it when released.
			cc.abandoned = true
		}
	}
	cc.claimed = true
	return value, true, err
}

// dropCell is dropCellLocked under c's mu.
func (c *Communicator) dropCell(cc *childCell) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropCellLocked(cc)
}

// dropCellLocked frees a child cell whose job NCCL has joined (mu held).
func (c *Communicator) dropCellLocked(cc *childCell) {
	if i := slices.Index(c.life.cells, cc); i >= 0 {
		c.life.cells = slices.Delete(c.life.cells, i, i+1)
		cc.cell.Free()
		cc.cell = capi.Cell{}
	}
}

// lockPendingLocked is lockLive for a pending child (c.mu held): it returns
// the pointer with mu still held once the child is ready, else an error
// with mu released.
func (c *Communicator) lockPendingLocked(op string) (uintptr, error) {
	p := c.life.pend
	done, err := c.resolveLocked()
	if done && err == nil {
		return c.ptr, nil
	}
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return 0, &Error{Op: op, Code: InProgress,
		Detail: fmt.Sprintf("the communicator is still being created by %s: Wait for it (or end the group that created it) first", p.op)}
}

// awaitPending waits until a pending child is ready or has failed; it
// returns at once for any other communicator. When ctx ends first, the
// parent (whose job is creating the child) is aborted, and so is the child.
func (c *Communicator) awaitPending(ctx context.Context, op string) error {
	if c == nil {
		return nil
	}
	for {
		p, done, err := c.resolve()
		if done {
			return err
		}
		par := p.parent
		if par.groupOpen(p.comp) {
			return fmt.Errorf("nccl: %s: the communicator is created by %s in a group that has not ended: it exists once the group ends: %w", op, p.op, ErrInvalidUsage)
		}
		if err := par.wait(ctx, op); err != nil {
			// The parent broke, was aborted because ctx ended, or is gone
			// (destroyed, after NCCL finished its job): settle the child's
			// fate. A child NCCL made is the caller's (the split succeeded);
			// a failed one is aborted, and the wait's error says why.
			if c.Handle() != 0 { // resolves a child still pending
				return nil
			}
			return err
		}
	}
}

// resolve is resolveLocked under c's mu; p is c's pending state (nil,
// and done, when c is not a pending child).
func (c *Communicator) resolve() (p *pendingChild, done bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p = c.life.pend
	if p == nil {
		return nil, true, nil
	}
	done, err = c.resolveLocked()
	return p, done, err
}

// abandonPending is Abort for a pending child. It reports whether c was one
// (then nothing is left to abort): a child whose parent's job is still
// running is marked abandoned, and the parent aborts what NCCL stores for it
// when the parent is released (NCCL cannot cancel a split alone).
func (c *Communicator) abandonPending(op string, cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.life.pend
	if p == nil {
		return false
	}
	done, err := c.resolveLocked()
	if done {
		return err != nil // failed: already aborted; ready: abort it normally
	}
	p.abandon()
	c.life.pend = nil
	c.moveLocked(op, evAbort)
	c.abortCause = cause
	c.stopLeakWatchLocked()
	return true
}

// abandon marks p's cell abandoned (and claimed): the parent aborts what
// its job stores there. It locks the parent's mu, after the child's.
func (p *pendingChild) abandon() {
	p.parent.mu.Lock()
	defer p.parent.mu.Unlock()
	p.cell.abandoned = true
	p.cell.claimed = true
}

// lifeBeforeReleaseLocked runs before NCCL releases c (mu held): if a
// Split or Shrink child was not claimed, it reports whether the
// communicator ended broken, which their jobs then failed with.
func (c *Communicator) lifeBeforeReleaseLocked(op string, ptr uintptr) error {
	need := false
	for _, cc := range c.life.cells {
		if !cc.claimed || cc.abandoned {
			need = true
		}
	}
	if !need {
		return nil
	}
	state, st := capi.CommGetAsyncError(ptr)
	if st.Code == 0 && state != 0 && Result(state) != InProgress {
		return &Error{Op: op, Code: Result(state), Detail: "the parent communicator failed before the new communicator was ready"}
	}
	return nil
}

// lifeAfterReleaseLocked runs after NCCL released c (mu held): NCCL has
// joined every job of the communicator, so the cells hold their final
// values. It records them for children not resolved yet, aborts abandoned
// children and frees the C memory.
func (c *Communicator) lifeAfterReleaseLocked(aborted bool, broken error) {
	for _, cc := range c.life.cells {
		cc.value, cc.final = cc.cell.Load(), true
		switch {
		case aborted:
			cc.err = fmt.Errorf("nccl: the parent communicator was aborted before the new communicator was ready: %w", ErrClosed)
		case broken != nil:
			cc.err = broken
		}
		if (cc.abandoned || (cc.dropped.Load() && !cc.claimed)) && cc.value != 0 {
			capi.CommAbort(cc.value)
		}
		cc.cell.Free()
		cc.cell = capi.Cell{}
	}
	c.life.cells = nil
	c.life.pendingRes = 0
	c.life.own.Free()
	c.life.own = capi.Cell{}
	for _, f := range c.life.deferred {
		f()
	}
	c.life.deferred = nil
}

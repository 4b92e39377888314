package nccl

import (
	"context"
	"errors"
	"runtime"

	"github.com/nccl4go/nccl/internal/capi"
)

// Group runs fn between ncclGroupStart and ncclGroupEnd, so that NCCL
// fuses the operations fn issues (on one or several communicators) and
// launches them together: needed to drive several ranks from one goroutine
// and for concurrent send/recv. NCCL keeps group state per OS thread, so
// Group locks the goroutine to its thread for the whole group. The group is
// always ended, even if fn fails or panics; the errors are joined. Groups
// nest. When the group ends, Group waits for the blocking communicators it
// used. NCCL 2.3.5.
func Group(fn func() error) error { return GroupContext(context.Background(), fn) }

// GroupContext is Group whose final wait is bounded by ctx (see Wait).
func GroupContext(ctx context.Context, fn func() error) (err error) {
	if err := GroupStart(); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, GroupEndContext(ctx))
	}()
	return fn()
}

// GroupStart opens a group (ncclGroupStart) and locks the calling goroutine
// to its OS thread until the matching GroupEnd, which must be called by the
// same goroutine. Prefer Group. NCCL 2.3.5.
func GroupStart() error {
	if _, err := loaded(); err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := statusErr("GroupStart", "ncclGroupStart", capi.GroupStart()); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

// GroupEnd closes the group opened by GroupStart on this goroutine
// (ncclGroupEnd), launching its operations, and unlocks the thread. After
// the outermost group it waits for the blocking communicators the group
// used. NCCL 2.3.5.
func GroupEnd() error { return GroupEndContext(context.Background()) }

// GroupEndContext is GroupEnd whose wait is bounded by ctx.
func GroupEndContext(ctx context.Context) error {
	if _, err := loaded(); err != nil {
		return err
	}
	st := capi.GroupEnd()
	var used []uintptr
	if capi.GroupDepth() == 0 {
		used = capi.GroupTake()
	}
	runtime.UnlockOSThread()
	if st.Code != 0 && Result(st.Code) != InProgress {
		return statusErr("GroupEnd", "ncclGroupEnd", st)
	}
	var errs []error
	for _, p := range used {
		c := lookup(p)
		if c == nil {
			continue
		}
		c.mu.Lock()
		blocking := c.blocking && c.ptr == p
		c.mu.Unlock()
		if blocking {
			errs = append(errs, c.wait(ctx, "GroupEnd"))
		}
	}
	return errors.Join(errs...)
}

package nccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Group runs fn between ncclGroupStart and ncclGroupEnd, so that NCCL
// fuses the operations fn issues (on one or several communicators) and
// launches them together: needed to drive several ranks from one goroutine
// and for concurrent send/recv. The group is always ended, even if fn fails
// or panics; the errors are joined. When the outermost group ends, Group
// waits for the blocking communicators it used. Not collective itself; the
// operations inside keep their own rules. NCCL 2.3.5.
//
// The rules of groups, for Group, [GroupStart] and [GroupEnd] alike (the
// package's one statement of them):
//
//   - NCCL keeps group state per OS thread, so a group locks its goroutine
//     to its thread until it ends: fn must issue the group's operations
//     itself, not from other goroutines. Groups nest: only the outermost
//     end launches.
//   - Operations issued inside a group stay NCCL's until the group ends,
//     and NCCL's queue of a communicator belongs to one group at a time:
//     while one goroutine's open group holds operations of a communicator,
//     other goroutines' operations on it are refused, and so are its
//     [Communicator.Finalize], [Communicator.Destroy] and
//     [Communicator.Abort], here and inside any group, until that group's
//     end returns (all with [ErrInvalidUsage]). To be able to abort
//     operations that may hang, make the communicator non-blocking, whose
//     group end returns at once.
//   - Outputs NCCL writes at the group's end (a [Communicator.Split] child,
//     a [Window], a [DevComm]) are pending until then.
//   - When a goroutine exits inside a group ([GroupStart] without
//     [GroupEnd]) and Go ends its thread, its communicators refuse new work
//     (NCCL can never run what that group queued) and can be aborted; Go
//     parks the main thread instead of ending it, so there the holds stay.
func Group(fn func() error) error { return group(context.Background(), started, fn) }

// GroupContext is [Group] that, after the outermost group ends, waits for
// every communicator the group used, non-blocking ones too, within ctx
// (see Wait): when ctx ends first, the communicators still running are
// aborted. NCCL 2.3.5.
func GroupContext(ctx context.Context, fn func() error) error {
	return group(ctx, completed, fn)
}

// group is [Group], finished as m says.
func group(ctx context.Context, m mode, fn func() error) (err error) {
	if fn == nil {
		return argErr("Group", "fn", "nil function")
	}
	if err := groupStart(); err != nil {
		return err
	}
	depth := capi.GroupDepth()
	defer func() {
		err = errors.Join(err, endLeftOpen("Group", depth), groupEnd(ctx, m))
	}()
	return fn()
}

// endLeftOpen ends the levels a [GroupStart] inside fn left open above depth
// (the caller's own level), so that the caller's end closes its own level,
// and says so.
func endLeftOpen(op string, depth int) error {
	var err error
	for capi.GroupDepth() > depth {
		endGroup(capi.GroupEnd)
		runtime.UnlockOSThread()
		err = fmt.Errorf("nccl: %s: fn left a GroupStart without its GroupEnd (ended now): %w", op, ErrInvalidUsage)
	}
	return err
}

// GroupStart opens a group (ncclGroupStart). NCCL's groups belong to the
// calling OS thread, so GroupStart locks the calling goroutine to its
// thread (runtime.LockOSThread) until the matching [GroupEnd], which the same
// goroutine must call; every operation of the group must be issued by that
// goroutine. Prefer [Group], which cannot forget the end. Not collective.
// NCCL 2.3.5.
func GroupStart() error {
	if err := groupStart(); err != nil {
		return err
	}
	capi.GroupMark() // GroupEnd may close this level, and no other
	return nil
}

// groupStart is [GroupStart] for [Group], whose level [GroupEnd] may not close.
func groupStart() error {
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

// GroupEnd closes the group [GroupStart] opened on this goroutine
// (ncclGroupEnd), launching its operations if it is the outermost group,
// and undoes GroupStart's thread lock. After the outermost group it waits
// for the blocking communicators the group used. Not collective itself; the
// operations of the group keep their own rules. NCCL 2.3.5.
func GroupEnd() error { return groupEndManual(context.Background(), started) }

// GroupEndContext is [GroupEnd] (ncclGroupEnd) whose wait is bounded by ctx
// (see Wait). It closes only a level that [GroupStart] opened: inside [Group]'s
// or [GroupSimulate]'s function it returns an error wrapping [ErrInvalidUsage]
// and leaves their group open. Not collective itself. NCCL 2.3.5.
func GroupEndContext(ctx context.Context) error { return groupEndManual(ctx, completed) }

// groupEndManual is [GroupEnd], finished as m says.
func groupEndManual(ctx context.Context, m mode) error {
	if _, err := loaded(); err != nil {
		return err
	}
	if capi.GroupDepth() == 0 {
		// No GroupStart of ours on this thread: leave the caller's own
		// thread lock alone.
		return fmt.Errorf("nccl: GroupEnd: not in a group (no GroupStart on this goroutine's thread): %w", ErrInvalidUsage)
	}
	if !capi.GroupInnerManual() {
		return fmt.Errorf("nccl: GroupEnd: the innermost group was opened by Group or GroupSimulate, which end it themselves: %w", ErrInvalidUsage)
	}
	return groupEnd(ctx, m)
}

// groupEnd ends the calling thread's innermost group and, after the
// outermost, waits for the communicators it used as m says.
func groupEnd(ctx context.Context, m mode) error {
	st, used := endGroup(capi.GroupEnd)
	runtime.UnlockOSThread()
	if st.Code != 0 && Result(st.Code) != InProgress {
		return statusErr("GroupEnd", "ncclGroupEnd", st)
	}
	return waitUsed(ctx, m, "GroupEnd", used)
}

// endGroup ends one group level on this thread with end (ncclGroupEnd or
// ncclGroupSimulateEnd). When it is the outermost level it returns the NCCL
// communicators the group used, and records that their group ended:
// outputs of the group's calls may now be written (lifecycle.go).
//
// The non-blocking communicators the group used stay locked across the end:
// the end puts their work in progress, and a call of another goroutine
// that checked the communicator idle under its lock (the shim's readiness
// check) must not reach NCCL in between, which would refuse it. Locks are
// taken in the order of the NCCL pointers; no other code locks two
// communicators a group holds.
func endGroup(end func() capi.Status) (capi.Status, []uintptr) {
	if capi.GroupDepth() != 1 {
		return end(), nil
	}
	used := capi.GroupTake()
	slices.Sort(used)
	// The locks outlive this loop (released after the end, below): no defer.
	locked := make([]*Communicator, len(used))
	for i, p := range used {
		if c := lookup(p); c != nil {
			c.mu.Lock()
			if c.ptr == p && c.nbCounted {
				locked[i] = c
			} else {
				c.mu.Unlock()
			}
		}
	}
	st := end()
	for i, p := range used {
		if c := locked[i]; c != nil {
			c.life.groupEnds++
			c.groupEndedLocked() // record.go
			c.mu.Unlock()
		} else {
			groupEnded(p)
		}
	}
	// Only now may other threads queue work on them: a call of theirs
	// made before groupEnded would look ended with this group.
	capi.GroupRelease(used)
	return st, used
}

// waitUsed waits for the communicators among used (the NCCL communicators
// a group used) after the group ended: the blocking ones, or all of them in
// mode completed.
func waitUsed(ctx context.Context, m mode, op string, used []uintptr) error {
	var errs []error
	for _, p := range used {
		c := lookup(p)
		if c == nil {
			continue
		}
		if c.waitsAfterGroup(m, p) {
			errs = append(errs, c.wait(ctx, op))
		}
	}
	return joinDistinct(errs...)
}

// waitsAfterGroup reports whether waitUsed waits for c, which the group
// used as the NCCL communicator p: c still owns p, and c is blocking or m
// is completed.
func (c *Communicator) waitsAfterGroup(m mode, p uintptr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return completes(m, c.blocking) && c.ptr == p
}

// GroupSimulate runs fn in a group and ends it with ncclGroupSimulateEnd,
// which plans the group's operations without running them and returns
// NCCL's estimate of how long the last collective it planned would take.
// NCCL computes the estimate in microseconds (src/graph/tuning.cc,
// ncclTopoGetAlgoTime: latency in µs plus bytes/(1000*bandwidth in GB/s));
// GroupSimulate returns it as a Duration, 0 when NCCL made none (an empty
// group, a single-rank communicator). It must be the outermost group. Not
// collective itself; the operations of the group keep their own rules.
// NCCL 2.22.3.
//
// NCCL simulates only groups of blocking communicators: it launches a
// group of non-blocking ones for real and leaves the estimate unset
// (src/group.cc, ncclGroupEndInternal, 2.22.3 through 2.30.7), and it runs
// a one-rank communicator's collectives at once. So that a simulation never
// runs anything, collectives and point-to-point calls on non-blocking or
// one-rank communicators issued inside it are refused with an error
// wrapping [ErrUnsupported] (and not issued); if NCCL launched the group
// anyway (NCCL_COMM_BLOCKING=0 in the environment), the error says so.
func GroupSimulate(fn func() error) (est time.Duration, err error) {
	const op = "GroupSimulate"
	if fn == nil {
		return 0, argErr(op, "fn", "nil function")
	}
	r, err := loaded()
	if err != nil {
		return 0, err
	}
	if !capi.Present(capi.SymGroupSimulateEnd) {
		return 0, unsupported(capi.SymGroupSimulateEnd)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if capi.GroupDepth() > 0 {
		return 0, fmt.Errorf("nccl: %s: inside another group: simulate only an outermost group (the outer group's end would launch the operations): %w", op, ErrInvalidUsage)
	}
	if err := statusErr(op, "ncclGroupStart", capi.GroupStart()); err != nil {
		return 0, err
	}
	depth := capi.GroupDepth()
	tid := threadID()
	simEnter(tid)
	defer func() {
		refused := simLeave(tid)
		leftOpen := endLeftOpen(op, depth)
		var t float32
		st, used := endGroup(func() (st capi.Status) {
			t, st = capi.GroupSimulateEnd(uint32(versions.SimInfoVersion(int(r))))
			return st
		})
		var endErr error
		switch {
		case st.Code == 0:
			if t > 0 {
				est = time.Duration(float64(t) * float64(time.Microsecond))
			}
		case Result(st.Code) == InProgress:
			est = 0
			endErr = fmt.Errorf("nccl: %s: NCCL launched the group instead of simulating it (its communicators are non-blocking inside NCCL; is NCCL_COMM_BLOCKING=0 set?): %w", op, ErrUnsupported)
		default:
			endErr = statusErr(op, "ncclGroupSimulateEnd", st)
		}
		if refused > 0 && err == nil {
			err = errSimulated(fmt.Sprintf("%d operation(s) of the group", refused))
		}
		err = errors.Join(err, leftOpen, endErr, waitUsed(context.Background(), completed, op, used))
		if err != nil {
			est = 0
		}
	}()
	return 0, fn()
}

// The simulation guard: the OS threads inside [GroupSimulate], and how many
// operations each refused. The hot path reads only the counter.
var (
	simulating atomic.Int32
	simThreads struct {
		sync.Mutex
		refused map[int]int // thread id -> operations refused
	}
)

func simEnter(tid int) {
	simThreads.Lock()
	defer simThreads.Unlock()
	if simThreads.refused == nil {
		simThreads.refused = make(map[int]int)
	}
	simThreads.refused[tid] = 0
	simulating.Add(1) // after the registration: the hot path reads it first
}

func simLeave(tid int) int {
	simulating.Add(-1)
	simThreads.Lock()
	defer simThreads.Unlock()
	n := simThreads.refused[tid]
	delete(simThreads.refused, tid)
	return n
}

// onSimulatingThread reports whether the calling thread is inside
// [GroupSimulate]; with count it also counts the refusal that follows (the
// flight recorder's check counts nothing).
func onSimulatingThread(count bool) bool {
	tid := threadID()
	simThreads.Lock()
	defer simThreads.Unlock()
	n, ok := simThreads.refused[tid]
	if ok && count {
		simThreads.refused[tid] = n + 1
	}
	return ok
}

func errSimulated(what string) error {
	return fmt.Errorf("nccl: %s: not issued inside GroupSimulate: NCCL simulates only blocking communicators of several ranks, and would run this one's work: %w", what, ErrUnsupported)
}

// registry maps live NCCL communicators to their Go values, for the
// communicators a group used (the shim names them by pointer).
var registry sync.Map // uintptr -> weak.Pointer[Communicator]

func register(c *Communicator) { registry.Store(c.ptr, weak.Make(c)) }

func lookup(ptr uintptr) *Communicator {
	if v, ok := registry.Load(ptr); ok {
		return v.(weak.Pointer[Communicator]).Value()
	}
	return nil
}

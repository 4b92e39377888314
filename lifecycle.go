package nccl

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Lifecycle beyond init: Split, Shrink, Grow, Revoke, Suspend and Resume,
// memory statistics.
//
// How a new communicator made from another one becomes known (NCCL
// src/init.cc, 2.18 through 2.30.7; for a non-blocking parent, or inside a
// group; a blocking parent outside a group runs the job within the call):
//
//   - Split and Shrink (ncclCommInitChildComm) set *newcomm to NULL and
//     queue a job on the PARENT: the parent's ncclCommGetAsyncError reports
//     ncclInProgress until the job is over, and the job stores the child
//     into *newcomm only at its very end (ncclCommInitRankFunc's exit path,
//     also for a rank that passed NoColor, which stores NULL). Inside a
//     group the job starts only when the group ends. So the binding gives
//     NCCL a C cell that the parent owns (freed when the parent is released,
//     after NCCL has joined every job of it), and the child Communicator is
//     "pending" until the parent's state leaves ncclInProgress after the
//     call (and after the group's end). A parent state of ncclSuccess then
//     means the job succeeded: the cell holds the child. An error state
//     means it failed: whatever the cell holds is aborted.
//   - Grow (ncclCommGrow) stores the new communicator into *newcomm during
//     the call and queues the job on the NEW communicator, whose own async
//     state reports the progress, as for init; the job stores *newcomm again
//     at its end. The new Communicator owns that cell until it is released.

// NoColor is the color of a rank that takes part in Split without joining
// any new communicator (NCCL_SPLIT_NOCOLOR): Split gives it a null
// communicator. NCCL 2.18.1.
const NoColor = -1

// ExistingRank is the rank a member of the communicator being grown passes
// to Grow: it keeps its rank (-1 in ncclCommGrow). NCCL 2.29.2.
const ExistingRank = -1

// ShrinkFlag selects how Shrink treats operations in flight
// (NCCL_SHRINK_*).
type ShrinkFlag int

// Shrink flags. NCCL 2.27.3.
const (
	// ShrinkDefault needs a quiesced communicator; the child shares the
	// parent's resources when [Config.ShrinkShare] is set (NCCL_SHRINK_DEFAULT).
	ShrinkDefault ShrinkFlag = 0
	// ShrinkAbort cancels the parent's operations on the device first and
	// shares nothing (NCCL_SHRINK_ABORT): for shrinking after a failure.
	ShrinkAbort ShrinkFlag = 1
)

// String is the C name.
func (f ShrinkFlag) String() string {
	switch f {
	case ShrinkDefault:
		return "NCCL_SHRINK_DEFAULT"
	case ShrinkAbort:
		return "NCCL_SHRINK_ABORT"
	}
	return fmt.Sprintf("ShrinkFlag(%d)", int(f))
}

// SuspendFlag says what Suspend releases (NCCL_SUSPEND_*).
type SuspendFlag int

// Suspend flags. NCCL 2.29.7.
const (
	// SuspendMem releases the communicator's dynamic GPU memory until
	// Resume (NCCL_SUSPEND_MEM).
	SuspendMem SuspendFlag = 1
)

// MemStat names a memory statistic of a communicator (ncclCommMemStat_t).
type MemStat int

// Memory statistics. NCCL 2.29.7.
const (
	MemStatGPUMemSuspend   MemStat = 0 // ncclStatGpuMemSuspend: bytes Suspend can release
	MemStatGPUMemSuspended MemStat = 1 // ncclStatGpuMemSuspended: 1 while suspended, else 0
	MemStatGPUMemPersist   MemStat = 2 // ncclStatGpuMemPersist: bytes kept while suspended
	MemStatGPUMemTotal     MemStat = 3 // ncclStatGpuMemTotal: all bytes
)

var memStatNames = [...]string{"ncclStatGpuMemSuspend", "ncclStatGpuMemSuspended", "ncclStatGpuMemPersist", "ncclStatGpuMemTotal"}

// String is the C name.
func (s MemStat) String() string {
	if s >= 0 && int(s) < len(memStatNames) {
		return memStatNames[s]
	}
	return fmt.Sprintf("MemStat(%d)", int(s))
}

// ---------------------------------------------------------------------------
// Split and Shrink.

// Split creates new communicators from this one, one per color
// (ncclCommSplit): the ranks passing the same color form one communicator,
// ranked by key (ties keep the parent's order). A rank passing [NoColor]
// joins none and gets a null [Communicator] (not nil, !IsValid) and a nil
// error. cfg nil inherits the parent's config (and blocking mode);
// cfg.Device, if set, must be the parent's device. Collective over every
// rank of the parent, NoColor ones included; the parent must have no
// operation in flight (the binding waits for one first).
//
// On a blocking parent Split returns once the child is ready. On a
// non-blocking parent, or inside a group, it returns a child that is still
// being created (its pointer is known only when NCCL's job on the parent
// ends): after the group ends, Wait on the child (or on the parent) before
// using it; calls on it meanwhile fail with an error wrapping
// [ErrInProgress]. Abort on such a child does not wait: what NCCL makes for
// it is aborted when the parent is destroyed or aborted. NCCL 2.18.1.
func (c *Communicator) Split(color, key int, cfg *Config) (*Communicator, error) {
	return c.split(context.Background(), started, color, key, cfg)
}

// SplitContext is Split (ncclCommSplit) completed within ctx: it waits for
// the child even on a non-blocking parent (outside a group). If ctx ends
// before such a split is done, the parent is aborted (NCCL cannot cancel a
// split alone) and so is the child, and the error matches both ctx.Err()
// and [ErrInProgress]; a blocking parent splits inside NCCL, where ctx cannot
// reach. Collective. NCCL 2.18.1.
func (c *Communicator) SplitContext(ctx context.Context, color, key int, cfg *Config) (*Communicator, error) {
	return c.split(ctx, completed, color, key, cfg)
}

// split is ncclCommSplit, finished as m says.
func (c *Communicator) split(ctx context.Context, m mode, color, key int, cfg *Config) (*Communicator, error) {
	const op = "Split"
	if color < 0 && color != NoColor {
		return nil, argErr(op, "color", "%d: must be >= 0, or NoColor", color)
	}
	if color > math.MaxInt32 {
		return nil, argErr(op, "color", "%d: must fit in a C int", color)
	}
	if key < math.MinInt32 || key > math.MaxInt32 {
		return nil, argErr(op, "key", "%d: must fit in a C int", key)
	}
	return c.makeChild(ctx, m, childSplit, cfg, color,
		func(ptr uintptr, cell capi.Cell, cc *capi.Config) capi.Status {
			return capi.CommSplit(ptr, color, key, cell, cc)
		})
}

// Shrink creates a communicator of the parent's ranks minus exclude
// (ncclCommShrink), keeping their order. exclude must be non-empty, hold
// distinct ranks of the parent, leave at least one rank, and not contain
// this rank: excluded ranks do not call Shrink. The slice is not modified
// (NCCL sorts its copy). flags is [ShrinkDefault] or [ShrinkAbort]. cfg as in
// Split. Collective over the remaining ranks. Blocking and non-blocking
// behaviour as in Split. NCCL 2.27.3.
func (c *Communicator) Shrink(exclude []int, cfg *Config, flags ShrinkFlag) (*Communicator, error) {
	return c.shrink(context.Background(), started, exclude, cfg, flags)
}

// ShrinkContext is Shrink (ncclCommShrink) completed within ctx (see
// SplitContext). Collective over the remaining ranks. NCCL 2.27.3.
func (c *Communicator) ShrinkContext(ctx context.Context, exclude []int, cfg *Config, flags ShrinkFlag) (*Communicator, error) {
	return c.shrink(ctx, completed, exclude, cfg, flags)
}

// shrink is ncclCommShrink, finished as m says.
func (c *Communicator) shrink(ctx context.Context, m mode, exclude []int, cfg *Config, flags ShrinkFlag) (*Communicator, error) {
	const op = "Shrink"
	if flags != ShrinkDefault && flags != ShrinkAbort {
		return nil, argErr(op, "flags", "%d: must be ShrinkDefault or ShrinkAbort", int(flags))
	}
	if len(exclude) == 0 {
		return nil, argErr(op, "exclude", "empty: name at least one rank to exclude")
	}
	if _, err := loadedCtx(ctx); err != nil {
		return nil, err
	}
	n, rank, _, err := c.ident(op)
	if err != nil {
		return nil, err
	}
	list := make([]int32, len(exclude)) // NCCL sorts it in place: never the caller's
	seen := make(map[int]bool, len(exclude))
	for i, r := range exclude {
		switch {
		case r < 0 || r >= n:
			return nil, argErr(op, "exclude", "rank %d: not in [0, %d)", r, n)
		case seen[r]:
			return nil, argErr(op, "exclude", "rank %d listed twice", r)
		}
		seen[r] = true
		list[i] = int32(r)
	}
	if len(exclude) >= n {
		return nil, argErr(op, "exclude", "excludes all %d ranks: at least one must remain", n)
	}
	if seen[rank] {
		return nil, argErr(op, "exclude", "rank %d is this rank: excluded ranks must not call Shrink", rank)
	}
	return c.makeChild(ctx, m, childShrink, cfg, 0,
		func(ptr uintptr, cell capi.Cell, cc *capi.Config) capi.Status {
			return capi.CommShrink(ptr, slices.Clone(list), cell, cc, int(flags))
		})
}

// childConfig encodes the config of a child made on the parent's device:
// nil inherits the parent's config (NCCL copies it) and blocking mode.
func (c *Communicator) childConfig(op string, cfg *Config, r Release) (*capi.Config, bool, error) {
	dev, blocking := c.devBlocking()
	if cfg == nil {
		return nil, blocking, nil
	}
	if cfg.Device != nil && *cfg.Device != dev {
		return nil, false, argErr(op, "Config.Device", "cuda:%d: the new communicator is on the parent's device, cuda:%d", *cfg.Device, dev)
	}
	return cfg.encode(op, r)
}

// childKind is the call that makes a child communicator. Its value is the
// byte the flight recorder's child hash mixes in (hashChild, record.go):
// fixed, so that every rank and release derives the same hash.
type childKind byte

const (
	childSplit  childKind = 'p' // Split: ncclCommSplit
	childShrink childKind = 'h' // Shrink: ncclCommShrink
	childGrow   childKind = 'g' // Grow: ncclCommGrow
)

// names are the method, the C function and the flight recorder's operation.
func (k childKind) names() (op, fn string, ev trace.Op) {
	switch k {
	case childSplit:
		return "Split", "ncclCommSplit", trace.Split
	case childShrink:
		return "Shrink", "ncclCommShrink", trace.Shrink
	}
	return "Grow", "ncclCommGrow", trace.Grow
}

// makeChild runs a Split or Shrink call (kind) and returns the child,
// finished as m says.
func (c *Communicator) makeChild(ctx context.Context, m mode, kind childKind, cfg *Config, color int,
	call func(ptr uintptr, cell capi.Cell, cc *capi.Config) capi.Status) (*Communicator, error) {
	op, fn, evOp := kind.names()
	if c == nil {
		return nil, refusal(op, stateNull, evUse, nil)
	}
	r, err := loadedCtx(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.checkLive(op); err != nil {
		return nil, err
	}
	ccfg, childBlocking, err := c.childConfig(op, cfg, r)
	if err != nil {
		return nil, err
	}
	ev := trace.Event{Op: evOp}
	noColor := color == NoColor
	cc := &childCell{cell: capi.NewCell(), claimed: noColor}
	var (
		comp     completion
		dev      int
		blocking bool
		hash     uint64 // the child's, for the flight recorder (record.go)
	)
	st, _, err := c.start(ctx, op, takeLive, &ev, func(ptr uintptr) (capi.Status, error) {
		if !c.allowsLocked(evDerive) { // a revoked parent may still split
			return capi.Status{}, c.refusalLocked(op, evDerive)
		}
		st := call(ptr, cc.cell, ccfg)
		if accepted(st) {
			// From here NCCL may write the cell until the parent's job
			// is over: the parent owns it.
			c.life.cells = append(c.life.cells, cc)
			comp = c.completionLocked(st)
			comp.done = false // the child is known only from the parent's state
			hash = hashChild(c.trace.hash, byte(kind), c.trace.children, color)
			c.trace.children++
		}
		dev, blocking = c.dev, c.blocking
		return st, nil
	})
	if err != nil {
		cc.cell.Free()
		return nil, err
	}
	if st.Code != 0 && Result(st.Code) != InProgress {
		// A blocking parent ran the job inside the call: NCCL stores the
		// child even when the job failed, and leaves it to be aborted. (A
		// failure before the job was queued left NULL.)
		if p := cc.cell.Load(); p != 0 {
			capi.CommAbort(p)
		}
		cc.cell.Free()
		return nil, statusErr(op, fn, st)
	}
	child := &Communicator{dev: dev, blocking: childBlocking}
	child.trace.hash, child.trace.name = hash, cfg.commName()
	if noColor {
		// Nothing to wait for but the parent's own part of the collective.
		if completes(m, blocking) && !comp.inGroup {
			if err := c.wait(ctx, op); err != nil {
				return nil, err
			}
			c.dropCell(cc) // the wait saw the job succeed and joined it
		}
		return child, nil
	}
	child.moveLocked(op, evSplit) // a new child: null, so legal
	child.life.pend = &pendingChild{parent: c, cell: cc, op: op, dev: dev, blocking: childBlocking, comp: comp}
	child.watchPendingLeak(op, cc) // leak.go
	if !completes(m, blocking) || comp.inGroup {
		return child, nil
	}
	if err := child.awaitPending(ctx, op); err != nil {
		return nil, err
	}
	return child, nil
}

// ---------------------------------------------------------------------------
// Grow.

// GetUniqueID creates the id that ranks joining this communicator pass to
// Grow (ncclCommGetUniqueId). Call it on one existing rank, the
// coordinator, which passes the id to its own Grow and sends it to the
// joining ranks; NCCL hands it to the existing ranks 0 and N-1 itself. An
// id is good for one Grow, and NCCL makes no new one while the last is
// unused. It fails while NCCL_COMM_ID is set. Not collective. NCCL 2.29.2.
func (c *Communicator) GetUniqueID() (UniqueID, error) {
	const op = "GetUniqueID"
	var id UniqueID
	err := c.call(context.Background(), completed, op, "ncclCommGetUniqueId", takeLive, nil, func(ptr uintptr) (capi.Status, error) {
		return capi.CommGetUniqueID(ptr, (*[128]byte)(&id)), nil
	})
	return id, err
}

// Grow creates a communicator of nranks ranks from this one plus joining
// ranks (ncclCommGrow). Collective over the existing and the joining ranks:
//
//   - an existing rank calls it on its live communicator with rank
//     [ExistingRank] (it keeps its rank) and id nil, except the coordinator,
//     which passes the id it got from GetUniqueID; cfg nil inherits this
//     communicator's config, and cfg.Device, if set, must be its device;
//   - a joining rank calls it on a null [Communicator] (the zero value, or a
//     nil *Communicator) with its new rank (at least the old size, below
//     nranks) and the coordinator's id; cfg.Device picks its device
//     (default 0).
//
// nranks must exceed the old size. Destroy the old communicator once the
// new one is ready. Blocking and non-blocking behaviour as in [Init].
// NCCL 2.29.2.
func (c *Communicator) Grow(nranks int, id *UniqueID, rank int, cfg *Config) (*Communicator, error) {
	return c.grow(context.Background(), started, nranks, id, rank, cfg)
}

// GrowContext is Grow (ncclCommGrow) completed within ctx: if ctx ends
// before a non-blocking new communicator is ready, it is aborted and the
// error matches both ctx.Err() and [ErrInProgress] (a blocking one grows
// inside NCCL, where ctx cannot reach). Collective. NCCL 2.29.2.
func (c *Communicator) GrowContext(ctx context.Context, nranks int, id *UniqueID, rank int, cfg *Config) (*Communicator, error) {
	return c.grow(ctx, completed, nranks, id, rank, cfg)
}

// grow is ncclCommGrow, finished as m says.
func (c *Communicator) grow(ctx context.Context, m mode, nranks int, id *UniqueID, rank int, cfg *Config) (*Communicator, error) {
	const op = "Grow"
	r, err := loadedCtx(ctx)
	if err != nil {
		return nil, err
	}
	if nranks < 1 || nranks > math.MaxInt32 {
		return nil, argErr(op, "nranks", "%d: not in [1, 2^31)", nranks)
	}
	existing := c != nil && c.Handle() != 0
	if c != nil && !existing {
		// Only a null communicator joins: a closed one is no new rank.
		if err := c.move(op, evJoin); err != nil {
			return nil, err
		}
	}
	if id != nil && id.IsZero() {
		return nil, argErr(op, "id", "all zeros: use the id the coordinator got from GetUniqueID")
	}
	var (
		ccfg     *capi.Config
		blocking bool
		dev      int
	)
	if existing {
		n, _, d, err := c.ident(op)
		if err != nil {
			return nil, err
		}
		if rank != ExistingRank {
			return nil, argErr(op, "rank", "%d: a rank of the communicator being grown keeps its rank: pass ExistingRank", rank)
		}
		if nranks <= n {
			return nil, argErr(op, "nranks", "%d: must exceed the current size %d", nranks, n)
		}
		if ccfg, blocking, err = c.childConfig(op, cfg, r); err != nil {
			return nil, err
		}
		dev = d
	} else {
		if rank < 0 || rank >= nranks {
			return nil, argErr(op, "rank", "%d: a joining rank needs its new rank in [0, %d) (a null communicator joins; existing ranks grow their live communicator)", rank, nranks)
		}
		if id == nil {
			return nil, argErr(op, "id", "nil: a joining rank needs the coordinator's id from GetUniqueID")
		}
		if ccfg, blocking, err = cfg.encode(op, r); err != nil {
			return nil, err
		}
		dev = cfg.device(0)
	}
	cctx, err := deviceContext(op, "Config.Device", dev)
	if err != nil {
		return nil, err
	}
	var raw *[128]byte
	if id != nil {
		raw = new([128]byte)
		*raw = *id
	}
	cell := capi.NewCell()
	grow := func(ptr uintptr) (capi.Status, error) {
		return capi.CommGrow(cctx, ptr, nranks, raw, rank, cell, ccfg), nil
	}
	var st capi.Status
	if existing {
		st, _, err = c.start(ctx, op, takeLive, &trace.Event{Op: trace.Grow}, func(ptr uintptr) (capi.Status, error) {
			if !c.allowsLocked(evDerive) {
				return capi.Status{}, c.refusalLocked(op, evDerive)
			}
			return grow(ptr)
		})
	} else {
		st, err = grow(0) // a joining rank: no communicator to lock
	}
	if err != nil {
		cell.Free()
		return nil, err
	}
	ptr := cell.Load()
	if st.Code != 0 && Result(st.Code) != InProgress {
		if ptr != 0 {
			// Not expected (NCCL clears *newcomm on failure); never free a
			// cell a job might still write.
			capi.CommAbort(ptr)
		} else {
			cell.Free()
		}
		return nil, statusErr(op, "ncclCommGrow", st)
	}
	if ptr == 0 {
		cell.Free()
		return nil, &Error{Op: op, Code: InternalError, Detail: "NCCL returned no communicator"}
	}
	// The flight recorder's hash: the existing ranks derive it from the
	// communicator they grow, the joining ones from the id (record.go).
	var hash uint64
	if existing {
		hash = c.nextChildHash(childGrow, nranks)
	} else {
		hash = hashChild(hashID([]UniqueID{*id}), byte(childGrow), 0, nranks)
	}
	child := new(Communicator)
	if err := child.adoptGrown(ptr, dev, blocking, cell, hash, cfg.commName()); err != nil {
		return nil, err
	}
	if err := child.settle(ctx, m, op); err != nil {
		return nil, err
	}
	return child, nil
}

// nextChildHash is the flight recorder's hash of c's next child made by
// kind with arg (record.go), counted.
func (c *Communicator) nextChildHash(kind childKind, arg int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := hashChild(c.trace.hash, byte(kind), c.trace.children, arg)
	c.trace.children++
	return h
}

// adoptGrown makes c, new, the owner of the NCCL communicator Grow stored
// in cell, which c owns from now on, with its flight recorder's identity.
func (c *Communicator) adoptGrown(ptr uintptr, dev int, blocking bool, cell capi.Cell, hash uint64, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.adoptLocked("Grow", ptr, dev, blocking); err != nil {
		return err
	}
	c.life.own = cell
	c.trace.hash, c.trace.name = hash, name
	return nil
}

// ---------------------------------------------------------------------------
// Revoke, Suspend, Resume, memory statistics.

// Revoke stops the communicator's operations in flight without destroying
// it (ncclCommRevoke), so that Split, Shrink (with [ShrinkAbort] or not) or
// Destroy can follow after a failure. flags must be 0 (NCCL_REVOKE_DEFAULT).
// Finalize is not allowed after Revoke (Destroy skips it). Not collective.
// NCCL 2.28.7.
func (c *Communicator) Revoke(flags int) error { return c.revoke(context.Background(), started, flags) }

// RevokeContext is Revoke (ncclCommRevoke) completed within ctx: it waits
// until the communicator is quiescent, even a non-blocking one. Not
// collective. NCCL 2.28.7.
func (c *Communicator) RevokeContext(ctx context.Context, flags int) error {
	return c.revoke(ctx, completed, flags)
}

// revoke is ncclCommRevoke, finished as m says.
func (c *Communicator) revoke(ctx context.Context, m mode, flags int) error {
	const op = "Revoke"
	if flags != 0 {
		return argErr(op, "flags", "%d: must be 0 (NCCL_REVOKE_DEFAULT)", flags)
	}
	return c.call(ctx, m, op, "ncclCommRevoke", takeLive, &trace.Event{Op: trace.Revoke}, func(ptr uintptr) (capi.Status, error) {
		st := capi.CommRevoke(ptr, flags)
		if accepted(st) {
			c.moveLocked(op, evRevoke)
		}
		return st, nil
	})
}

// Suspend releases the communicator's memory as flags says
// (ncclCommSuspend): [SuspendMem] frees its dynamic GPU memory until Resume.
// flags 0 does nothing. The communicator must have no operation in flight
// and must not be used until Resume. NCCL refuses ([ErrInvalidUsage]) when
// its memory manager is disabled or shared with Split children
// ([Config.SplitShare]). Collective (NCCL runs a barrier). NCCL 2.29.7.
func (c *Communicator) Suspend(flags SuspendFlag) error {
	return c.suspend(context.Background(), started, flags)
}

// SuspendContext is Suspend (ncclCommSuspend) completed within ctx.
// Collective. NCCL 2.29.7.
func (c *Communicator) SuspendContext(ctx context.Context, flags SuspendFlag) error {
	return c.suspend(ctx, completed, flags)
}

// suspend is ncclCommSuspend, finished as m says.
func (c *Communicator) suspend(ctx context.Context, m mode, flags SuspendFlag) error {
	const op = "Suspend"
	if flags&^SuspendMem != 0 {
		return argErr(op, "flags", "%#x: only SuspendMem is defined", int(flags))
	}
	return c.call(ctx, m, op, "ncclCommSuspend", takeLive, nil, func(ptr uintptr) (capi.Status, error) {
		return capi.CommSuspend(ptr, int(flags)), nil
	})
}

// Resume brings back what Suspend released (ncclCommResume). Collective.
// NCCL 2.29.7.
func (c *Communicator) Resume() error { return c.resume(context.Background(), started) }

// ResumeContext is Resume (ncclCommResume) completed within ctx.
// Collective. NCCL 2.29.7.
func (c *Communicator) ResumeContext(ctx context.Context) error { return c.resume(ctx, completed) }

// resume is ncclCommResume, finished as m says.
func (c *Communicator) resume(ctx context.Context, m mode) error {
	return c.call(ctx, m, "Resume", "ncclCommResume", takeLive, nil, func(ptr uintptr) (capi.Status, error) {
		return capi.CommResume(ptr), nil
	})
}

// MemStat returns one memory statistic of the communicator
// (ncclCommMemStats): bytes, or 0/1 for [MemStatGPUMemSuspended]. Not
// collective. NCCL 2.29.7.
func (c *Communicator) MemStat(stat MemStat) (uint64, error) {
	const op = "MemStat"
	if stat < MemStatGPUMemSuspend || stat > MemStatGPUMemTotal {
		return 0, argErr(op, "stat", "%d: not a MemStat", int(stat))
	}
	var v uint64
	err := c.call(context.Background(), completed, op, "ncclCommMemStats", takeLive, nil, func(ptr uintptr) (st capi.Status, _ error) {
		v, st = capi.CommMemStats(ptr, int(stat))
		return st, nil
	})
	return v, err
}

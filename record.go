package nccl

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Flight recording. Every communicator records the operations it queues
// into trace.Default() (package trace: the ring, its dumps, the analyzer):
// a few integers copied into a ring, no lock and no allocation, under the
// communicator's lock right after NCCL accepted the call, so that the
// order of the entries is the order NCCL queued them. NCCL4GO_TRACE_BUFFER=0
// turns it off. Hooks (AddHook) see the same operations: the watchdog
// package attaches one.

// recType and recOp are the recorder's words for a data type and a
// reduction operator: the same codes, kept in a byte
// (TestTraceVocabulary checks every value of both). recOp keeps an
// operator beyond a byte's range as custom(255): truncated, custom
// operator 256 would read as [Sum], a built-in one the analyzer compares.
func recType(t DataType) trace.DataType { return trace.DataType(t) }

func recOp(o RedOp) trace.RedOp { return trace.RedOp(min(uint32(o), 255)) }

// traceState is what a communicator keeps for the recorder (guarded by mu,
// except hooks).
type traceState struct {
	// hash is the same on every rank of the communicator, so that the
	// analyzer lines the ranks' dumps up. One exception: Grow's existing
	// ranks derive it from the communicator they grow, its joining ranks
	// from the id (the only thing they share with it), so a grown
	// communicator shows as two in the analyzer.
	hash     uint64
	name     string      // Config.CommName, or "" (the recorder then names it by its hash)
	rec      *trace.Comm // registered by prepare; nil before, and after release
	children uint64      // Split, Shrink and Grow calls made on it: their children's hashes
	// hooks is the list AddHook builds: replaced, never changed in place
	// (copy on write), so that a remove needs no communicator lock (a
	// call may hold it inside NCCL for long) and the hot path reads it
	// with one atomic load. hookMu serializes the writers.
	hooks  atomic.Pointer[[]*hookEntry]
	hookMu sync.Mutex
	// host are the lifecycle operations in progress (hostAcceptedLocked).
	host []hostOp
}

// hashID is the trace hash of a communicator made from unique ids.
func hashID(ids []UniqueID) uint64 {
	h := fnv.New64a()
	for i := range ids {
		h.Write(ids[i][:])
	}
	return h.Sum64()
}

// hashChild is the trace hash of a child of the communicator of hash
// parent: the kind of call, how many such calls the parent made before, and
// the color, which every rank of the child passes the same.
func hashChild(parent uint64, kind byte, nth uint64, color int) uint64 {
	h := fnv.New64a()
	var b [25]byte
	binary.LittleEndian.PutUint64(b[0:], parent)
	b[8] = kind
	binary.LittleEndian.PutUint64(b[9:], nth)
	binary.LittleEndian.PutUint64(b[17:], uint64(color))
	h.Write(b[:])
	return h.Sum64()
}

// registerTraceLocked registers the communicator with the recorder once its
// identity is known (mu held).
func (c *Communicator) registerTraceLocked() {
	if c.trace.rec != nil {
		return
	}
	name := c.trace.name
	if name == "" {
		name = fmt.Sprintf("comm-%016x", c.trace.hash)
	}
	c.trace.rec = trace.Default().RegisterComm(trace.CommInfo{
		Name: name, Hash: c.trace.hash, Rank: c.rank, Size: c.nranks, Device: c.dev,
	})
}

// closeTraceLocked marks the communicator's history closed (mu held).
func (c *Communicator) closeTraceLocked() {
	if c.trace.rec != nil {
		c.trace.rec.Close()
		c.trace.rec = nil
	}
}

// recordLocked records an operation NCCL accepted (or, for a blocking
// lifecycle call, is about to run) and tells the hooks (mu held). It is
// called from one place, attempt (call.go), for every call that passes an
// event, and from release for Abort and Destroy. It allocates nothing.
// The binding never sets ev.Watched itself: a hook that follows the entry
// marks it ([QueuedOp.Watch]), or has it recorded watched ([WatchingHook]);
// lifecycle operations the binding follows itself: watched and started
// here, completed when NCCL's work ends (completeLocked, settleHostLocked).
func (c *Communicator) recordLocked(ev *trace.Event) trace.Ref {
	rec := c.trace.rec
	if rec == nil {
		return trace.Ref{}
	}
	if simulating.Load() != 0 && capi.GroupDepth() > 0 && onSimulatingThread(false) {
		return trace.Ref{} // GroupSimulate runs nothing: no entry, no sequence number
	}
	// Field by field, not a copy of *ev: the caller has just written *ev
	// in narrow stores, which a wide copy would read back only after they
	// drained (a store-forwarding stall of ~10 ns on the hot path).
	e := trace.Event{Op: ev.Op, DataType: ev.DataType, RedOp: ev.RedOp, Peer: ev.Peer,
		Count: ev.Count, Stream: ev.Stream, Group: capi.GroupID()}
	hs := c.trace.hooks.Load()
	lifecycle := lifecycleOps[e.Op]
	if hs != nil && !lifecycle {
		for _, h := range *hs {
			if h.watches {
				// Recorded watched: no second update of the entry (an
				// atomic read-modify-write on the hot path) to mark it.
				e.Watched = true
				break
			}
		}
	}
	ref := rec.Record(e)
	if lifecycle {
		rec.Watch(ref)
		rec.Start(ref)
	}
	if hs != nil {
		op := QueuedOp{Comm: c, Trace: rec, Ref: ref, Event: e, OnStream: !lifecycle}
		for _, e := range *hs {
			e.h.Queued(op)
		}
	}
	return ref
}

// hostOp is a lifecycle operation NCCL accepted whose work goes on after
// its call returned (a non-blocking communicator's, or one in a group).
type hostOp struct {
	ref  trace.Ref
	comp completion
}

// completeLocked marks the lifecycle operation ref completed (mu held).
func (c *Communicator) completeLocked(ref trace.Ref) {
	if rec := c.trace.rec; rec != nil {
		rec.Complete(ref)
	}
}

// hostAcceptedLocked follows the lifecycle operation ref, which NCCL
// accepted with st (mu held): completed now when the call did the work,
// else once the communicator's state says NCCL's work is over.
func (c *Communicator) hostAcceptedLocked(ref trace.Ref, st capi.Status) {
	comp := c.completionLocked(st)
	if comp.done {
		c.completeLocked(ref)
		return
	}
	c.trace.host = append(c.trace.host, hostOp{ref: ref, comp: comp})
}

// asyncErrorLocked is ncclCommGetAsyncError on ptr, the communicator's
// (mu held), which completes the lifecycle operations the state shows
// over (settleHostLocked).
func (c *Communicator) asyncErrorLocked(ptr uintptr) (int32, capi.Status) {
	state, st := capi.CommGetAsyncError(ptr)
	if st.Code == 0 {
		c.settleHostLocked(state)
	}
	return state, st
}

// settleHostLocked completes the lifecycle operations in progress once the
// communicator's asynchronous state (ncclCommGetAsyncError) is no longer
// ncclInProgress, outside the group that queued them (mu held). It is
// called from asyncErrorLocked.
func (c *Communicator) settleHostLocked(state int32) {
	if len(c.trace.host) == 0 || Result(state) == InProgress {
		return
	}
	keep := c.trace.host[:0]
	for _, h := range c.trace.host {
		if c.groupOpenLocked(h.comp) {
			keep = append(keep, h)
			continue
		}
		c.completeLocked(h.ref)
	}
	clear(c.trace.host[len(keep):])
	c.trace.host = keep
}

// lifecycleOps are the operations that run inside NCCL's call or its
// background job, on no stream; the others (collectives, point-to-point
// and one-sided calls) are queued on a CUDA stream.
var lifecycleOps = [256]bool{
	trace.Init: true, trace.Split: true, trace.Shrink: true, trace.Grow: true,
	trace.Finalize: true, trace.Revoke: true, trace.Abort: true, trace.Destroy: true,
}

// groupEndedLocked tells the hooks that an outermost group that used the
// communicator has ended (mu held).
func (c *Communicator) groupEndedLocked() {
	if hs := c.trace.hooks.Load(); hs != nil {
		for _, e := range *hs {
			e.h.GroupEnded()
		}
	}
}

// Hook is told of a communicator's operations (AddHook). The watchdog
// package attaches one to each communicator it watches; a program may add
// its own (metrics, tracing): any number, each added and removed on its
// own.
//
// Both methods run under the communicator's lock, on the goroutine that
// made the call, before the call returns: they must be quick and must not
// call the communicator's methods.
type Hook interface {
	// Queued is told of every operation the communicator records, right
	// after NCCL accepted it: collectives, point-to-point and one-sided
	// calls (op.OnStream; the hook may record a CUDA event on
	// op.Event.Stream, which then follows the operation), and lifecycle
	// calls (Split, Shrink, Grow, Finalize, Revoke, Abort, Destroy), which
	// run in NCCL's call or, on a non-blocking communicator, in its
	// background job, on no stream. A blocking communicator's Split,
	// Shrink, Grow and Finalize, and every Abort and Destroy, are told
	// just before NCCL runs them, since they may wait inside NCCL.
	// Operations issued inside [GroupSimulate] run nothing and are not told.
	Queued(op QueuedOp)
	// GroupEnded is told when the outermost group that queued operations
	// on the communicator has ended (ncclGroupEnd returned): those
	// operations are launched then, on a blocking communicator, or handed
	// to NCCL's thread on a non-blocking one.
	GroupEnded()
}

// hookEntry is one AddHook call: removing it removes that call's hook
// only, even when the same hook was added twice.
type hookEntry struct {
	h       Hook
	watches bool // h is a WatchingHook
}

// WatchingHook is a [Hook] that follows every operation queued on a stream
// it is told of: the communicator records those operations already
// watched (op.Event.Watched is true), as if the hook had called
// [QueuedOp.Watch] for each, which saves that call's cost on the hot path.
// A WatchingHook that does not follow one after all (the watchdog does not
// follow an operation captured into a CUDA graph) calls
// op.Trace.Unwatch(op.Ref). Lifecycle operations are followed by the
// binding, whatever the hooks.
type WatchingHook interface {
	Hook
	// WatchesQueued marks the hook as one that follows every operation
	// queued on a stream; the communicator never calls it.
	WatchesQueued()
}

// QueuedOp is one queued operation as a [Hook] sees it.
type QueuedOp struct {
	Comm  *Communicator // the communicator (its lock is held: do not call it)
	Trace *trace.Comm   // its flight-recorder history
	Ref   trace.Ref     // the operation's entry there (its Seq names it across ranks)
	// Event is what was queued: operation, type, count, peer, stream,
	// group. Event.Watched is false (see Watch), unless a [WatchingHook]
	// is attached and the operation is on a stream.
	Event trace.Event
	// OnStream says the operation was queued on the CUDA stream
	// Event.Stream; false for lifecycle operations, which run on no stream
	// (Event.Stream is then 0 and means nothing). The binding follows
	// those itself: their entries are watched and started when recorded,
	// and completed when NCCL's work is over (the call returned, or the
	// communicator's asynchronous state left ncclInProgress), so a hook
	// can tell one that hangs by [trace.Comm.State].
	OnStream bool
}

// Watch marks the operation's flight-recorder entry as watched: the caller
// promises to call op.Trace.Start and op.Trace.Complete (or CompleteIn) for
// op.Ref when the operation starts and ends, so that a dump reports its
// state (started, completed; one started and never completed reads
// "stuck"). A hook that does not follow the operation leaves it unwatched,
// and the dump says only that it was queued; one that stops following it
// before it completed calls op.Trace.Unwatch(op.Ref). Not an NCCL call.
func (op QueuedOp) Watch() { op.Trace.Watch(op.Ref) }

// AddHook adds h to the hooks of the communicator and returns the function
// that removes it: any number of hooks, each removed on its own (the same
// hook added twice is told twice and removed once per remove). remove is
// idempotent and needs no lock of the communicator, so it never waits for
// a call in flight; a call that began before remove returned may still
// tell h once, concurrently; remove holds no reference that keeps the
// communicator reachable. The operations keep their sequence numbers
// when the flight recorder is off (NCCL4GO_TRACE_BUFFER=0). Not an NCCL
// call.
func (c *Communicator) AddHook(h Hook) (remove func(), err error) {
	if h == nil {
		return nil, argErr("AddHook", "h", "nil Hook")
	}
	if _, err := c.lock("AddHook", takePrepared); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.registerTraceLocked()
	_, watches := h.(WatchingHook)
	e := &hookEntry{h: h, watches: watches}
	c.trace.hookMu.Lock()
	defer c.trace.hookMu.Unlock()
	var list []*hookEntry
	if old := c.trace.hooks.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, e)
	c.trace.hooks.Store(&list)
	// remove holds c weakly: a hook's owner (the watchdog) keeping its
	// remove must not keep a communicator the program dropped reachable
	// (its leak would go unreported).
	wc := weak.Make(c)
	var once sync.Once
	return func() {
		once.Do(func() {
			if c := wc.Value(); c != nil {
				c.removeHook(e)
			}
		})
	}, nil
}

// removeHook removes the hook entry e, if still there.
func (c *Communicator) removeHook(e *hookEntry) {
	c.trace.hookMu.Lock()
	defer c.trace.hookMu.Unlock()
	old := c.trace.hooks.Load()
	if old == nil {
		return
	}
	i := slices.Index(*old, e)
	if i < 0 {
		return
	}
	if len(*old) == 1 {
		c.trace.hooks.Store(nil)
		return
	}
	list := slices.Delete(slices.Clone(*old), i, i+1)
	c.trace.hooks.Store(&list)
}

// TraceComm is the communicator's flight-recorder history ([trace.Comm]: its
// name, hash, rank and sequence numbers), registered with trace.Default()
// when the communicator is first used. Not an NCCL call.
func (c *Communicator) TraceComm() (*trace.Comm, error) {
	if _, err := c.lock("TraceComm", takePrepared); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.registerTraceLocked()
	return c.trace.rec, nil
}

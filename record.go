package nccl

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync/atomic"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Flight recording. Every communicator records the operations it queues
// into trace.Default() (package trace: the ring, its dumps, the analyzer):
// a few integers copied into a ring, no lock and no allocation, under the
// communicator's lock right after NCCL accepted the call, so that the
// order of the entries is the order NCCL queued them. NCCL4GO_TRACE_BUFFER=0
// turns it off. An Observer (SetObserver) sees the same operations: the
// watchdog package is one.

// traceOps maps each operation of the hot path to the recorder's.
var traceOps = [...]trace.Op{
	kAllReduce:     trace.AllReduce,
	kBroadcast:     trace.Broadcast,
	kReduce:        trace.Reduce,
	kAllGather:     trace.AllGather,
	kReduceScatter: trace.ReduceScatter,
	kAllToAll:      trace.AllToAll,
	kGather:        trace.Gather,
	kScatter:       trace.Scatter,
	kSend:          trace.Send,
	kRecv:          trace.Recv,
}

// traceState is what a communicator keeps for the recorder (guarded by mu).
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
	observer Observer
}

// groupGen counts outermost groups started in the process; an operation
// queued inside a group records the generation as its group id.
var groupGen atomic.Uint64

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

// recordLocked records an operation NCCL accepted and tells the observer
// (mu held). It allocates nothing.
func (c *Communicator) recordLocked(ev trace.Event) {
	rec := c.trace.rec
	if rec == nil {
		return
	}
	if capi.GroupDepth() > 0 {
		ev.Group = groupGen.Load()
	}
	o := c.trace.observer
	ev.Watched = o != nil
	ref := rec.Record(ev)
	if o != nil {
		o.Queued(QueuedOp{Comm: c, Trace: rec, Ref: ref, Event: ev})
	}
}

// GroupEndObserver is an Observer that is also told when the outermost
// group that queued operations on the communicator has ended (ncclGroupEnd
// returned): those operations are launched then, on a blocking
// communicator, or handed to NCCL's thread on a non-blocking one. It runs
// under the communicator's lock, on the goroutine that ended the group.
type GroupEndObserver interface {
	Observer
	GroupEnded()
}

// groupEndedObserverLocked tells the observer a group used the
// communicator and ended (mu held).
func (c *Communicator) groupEndedObserverLocked() {
	if o, ok := c.trace.observer.(GroupEndObserver); ok {
		o.GroupEnded()
	}
}

// Observer is told of every operation a communicator queues on a stream
// (collectives, point-to-point and one-sided calls), right after NCCL
// accepted it: under the communicator's lock, on the goroutine that made
// the call, before the call returns. Queued must be quick and must not call
// the communicator's methods (its lock is held); it may record a CUDA event
// on op.Event.Stream, which then follows the operation. The watchdog
// package is an Observer.
type Observer interface {
	Queued(op QueuedOp)
}

// QueuedOp is one queued operation as an Observer sees it.
type QueuedOp struct {
	Comm  *Communicator // the communicator (its lock is held: do not call it)
	Trace *trace.Comm   // its flight-recorder history, for Start and Complete
	Ref   trace.Ref     // the operation's entry there (its Seq names it across ranks)
	Event trace.Event   // what was queued: operation, type, count, peer, stream, group
}

// SetObserver makes o the communicator's observer (nil: none) and returns
// the previous one. The operations keep their sequence numbers when the
// flight recorder is off (NCCL4GO_TRACE_BUFFER=0). Not an NCCL call.
func (c *Communicator) SetObserver(o Observer) (Observer, error) {
	if _, err := c.lock("SetObserver", takePrepared); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	c.registerTraceLocked()
	prev := c.trace.observer
	c.trace.observer = o
	return prev, nil
}

// TraceComm is the communicator's flight-recorder history (trace.Comm: its
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

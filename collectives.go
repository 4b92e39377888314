package nccl

import (
	"context"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Collectives and point-to-point calls share one hot path (issue): the
// binding checks the arguments in pure Go, makes exactly one cgo call and
// allocates nothing when all goes well. Errors are built only on failure.
//
// Every call takes a stream: the zero cuda.Stream is the legacy default
// stream (handle 0) of the communicator's device. The call only enqueues
// work on the stream; synchronize the stream (or record an event) before
// reading the results on the host.
//
// In place: NCCL works in place when the addresses say so (see each
// method). Send and receive buffers that overlap in any other way are
// rejected with an error wrapping ErrInvalidArgument.

// collKind names each operation of the hot path.
type collKind uint8

const (
	kAllReduce collKind = iota
	kBroadcast
	kReduce
	kAllGather
	kReduceScatter
	kAllToAll
	kGather
	kScatter
	kSend
	kRecv
)

// collNames: the binding's operation and the C function of each kind.
var collNames = [...]struct{ op, fn string }{
	kAllReduce:     {"AllReduce", "ncclAllReduce"},
	kBroadcast:     {"Broadcast", "ncclBroadcast"},
	kReduce:        {"Reduce", "ncclReduce"},
	kAllGather:     {"AllGather", "ncclAllGather"},
	kReduceScatter: {"ReduceScatter", "ncclReduceScatter"},
	kAllToAll:      {"AllToAll", "ncclAlltoAll"},
	kGather:        {"Gather", "ncclGather"},
	kScatter:       {"Scatter", "ncclScatter"},
	kSend:          {"Send", "ncclSend"},
	kRecv:          {"Recv", "ncclRecv"},
}

// collCall is one call's arguments, kept on the caller's stack.
type collCall struct {
	kind       collKind
	send, recv Buffer // Send's buffer is send, Recv's is recv
	op         RedOp
	root       int // the root, or the peer of Send and Recv
	stream     cuda.Stream
}

// AllReduce reduces send across all ranks with op and leaves the result in
// recv on every rank (ncclAllReduce). send and recv hold the same number of
// elements of the same type; recv == send (the same address) works in
// place. op is a built-in operator or a [CustomOp] of this communicator made
// for the buffers' type. Collective. NCCL 2.3.5.
func (c *Communicator) AllReduce(send, recv Buffer, op RedOp, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllReduce, send: send, recv: recv, op: op, stream: s})
}

// Broadcast copies root's send to recv on every rank (ncclBroadcast). The
// count is recv.Count; on root, send must have the same count and type
// (send == recv works in place). On other ranks send is not read and may be
// the zero [Buffer]. Collective. NCCL 2.3.5.
func (c *Communicator) Broadcast(send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kBroadcast, send: send, recv: recv, root: root, stream: s})
}

// Reduce reduces send across all ranks with op into recv on root
// (ncclReduce). On root recv has send's count and type (recv == send works
// in place); on other ranks recv is not used and may be the zero [Buffer].
// Collective. NCCL 2.3.5.
func (c *Communicator) Reduce(send, recv Buffer, op RedOp, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kReduce, send: send, recv: recv, op: op, root: root, stream: s})
}

// AllGather gathers every rank's send into recv on every rank, rank i's
// part at element i*send.Count (ncclAllGather). recv.Count must be exactly
// nranks*send.Count. In place when send is recv's own part: send.Ptr ==
// recv.Ptr + rank*send.Bytes(). Collective. NCCL 2.3.5.
func (c *Communicator) AllGather(send, recv Buffer, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllGather, send: send, recv: recv, stream: s})
}

// ReduceScatter reduces send across all ranks with op and leaves block i of
// the result in rank i's recv (ncclReduceScatter). send.Count must be
// exactly nranks*recv.Count. In place when recv is this rank's block of
// send: recv.Ptr == send.Ptr + rank*recv.Bytes(). Collective. NCCL 2.3.5.
func (c *Communicator) ReduceScatter(send, recv Buffer, op RedOp, s cuda.Stream) error {
	return c.run(&collCall{kind: kReduceScatter, send: send, recv: recv, op: op, stream: s})
}

// AllToAll sends block j of send to rank j and receives rank i's block into
// block i of recv (ncclAlltoAll). send and recv have the same count, which
// nranks divides exactly; each block holds count/nranks elements. NCCL does
// not support it in place: the buffers must not overlap. Collective.
// NCCL 2.28.3 ([ErrUnsupported] before).
func (c *Communicator) AllToAll(send, recv Buffer, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllToAll, send: send, recv: recv, stream: s})
}

// Gather collects every rank's send into recv on root, rank i's part at
// element i*send.Count (ncclGather). On root recv.Count must be exactly
// nranks*send.Count (in place when send.Ptr == recv.Ptr +
// root*send.Bytes()); elsewhere recv is not used and may be the zero
// Buffer. Collective. NCCL 2.28.3 ([ErrUnsupported] before).
func (c *Communicator) Gather(send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kGather, send: send, recv: recv, root: root, stream: s})
}

// Scatter sends block i of root's send to rank i's recv (ncclScatter). On
// root send.Count must be exactly nranks*recv.Count (in place when recv.Ptr
// == send.Ptr + root*recv.Bytes()); elsewhere send is not read and may be
// the zero [Buffer]. Collective. NCCL 2.28.3 ([ErrUnsupported] before).
func (c *Communicator) Scatter(send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kScatter, send: send, recv: recv, root: root, stream: s})
}

// run is the hot path of every collective and point-to-point call: checks
// decided inline, one C call, nothing allocated (the closure stays on the
// stack: call does not keep it).
func (c *Communicator) run(a *collCall) error {
	name := &collNames[a.kind]
	h, sdev, err := resolveStream(a.stream)
	if err != nil {
		return &ArgError{Op: name.op, Arg: "stream", Reason: "destroyed", Err: err}
	}
	var ev trace.Event // filled once the checks passed; recorded by attempt
	return c.call(context.Background(), started, name.op, name.fn, takePrepared, &ev, func(ptr uintptr) (capi.Status, error) {
		if err := c.queueCheckLocked(name.op, sdev); err != nil {
			return capi.Status{}, err
		}
		send, recv, count, dt, err := c.validateLocked(a, name.op)
		if err != nil {
			return capi.Status{}, err
		}
		// Field by field: a composite literal is built on the stack and
		// copied wide, which stalls on its own narrow stores.
		ev.Op, ev.DataType, ev.RedOp = traceOps[a.kind], trace.DataType(dt), trace.RedOp(a.op)
		ev.Peer, ev.Count, ev.Stream = int32(a.root), count, h
		var st capi.Status
		switch a.kind {
		case kAllReduce:
			st = capi.AllReduce(send, recv, count, int32(dt), int32(a.op), ptr, h)
		case kBroadcast:
			st = capi.Broadcast(send, recv, count, int32(dt), a.root, ptr, h)
		case kReduce:
			st = capi.Reduce(send, recv, count, int32(dt), int32(a.op), a.root, ptr, h)
		case kAllGather:
			st = capi.AllGather(send, recv, count, int32(dt), ptr, h)
		case kReduceScatter:
			st = capi.ReduceScatter(send, recv, count, int32(dt), int32(a.op), ptr, h)
		case kAllToAll:
			st = capi.AlltoAll(send, recv, count, int32(dt), ptr, h)
		case kGather:
			st = capi.Gather(send, recv, count, int32(dt), a.root, ptr, h)
		case kScatter:
			st = capi.Scatter(send, recv, count, int32(dt), a.root, ptr, h)
		case kSend:
			st = capi.Send(send, count, int32(dt), a.root, ptr, h)
		default:
			st = capi.Recv(recv, count, int32(dt), a.root, ptr, h)
		}
		return st, nil
	})
}

// queueCheckLocked checks, for a call that queues work on a stream of
// device sdev (-1: the legacy default stream), that the stream is on the
// communicator's device and that GroupSimulate is not simulating the call
// (mu held).
func (c *Communicator) queueCheckLocked(op string, sdev int) error {
	if sdev >= 0 && sdev != c.dev {
		return argErr(op, "stream", "a stream of cuda:%d, but the communicator is on cuda:%d", sdev, c.dev)
	}
	if simulating.Load() != 0 && (!c.blocking || c.nranks == 1) && onSimulatingThread(true) {
		return errSimulated(op)
	}
	return nil
}

package nccl

import (
	"context"
	"fmt"

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

// collKind names each operation of the hot path: an index into colls.
//
// Adding a collective (or a point-to-point call) touches each place below;
// TestCollectiveChecklist fails for every one left out, and
// TestCollectiveChecklistCatchesOmissions adds a pretend kind to show each
// check firing:
//
//  1. a kind here, before numKinds, and its row in colls (collTable takes
//     exactly numKinds rows: a kind added last without a row fails the
//     build; one added in the middle leaves an empty row, which step 2's
//     check reports);
//  2. the recorder's operation (trace/op.go: a trace.Op and its row in
//     ops: a name, class Collective or PointToPoint, HasData), the row's op:
//     its name is the call's name in errors and dumps;
//  3. the C function in internal/capi's list (the X-macro in shim.h, then
//     go generate for zsyms.go), its Go wrapper and its !cgo stub: the
//     row's sym;
//  4. run's switch: a case calling that wrapper (its default refuses);
//  5. validateLocked (validate.go): the argument rules (its default refuses);
//  6. the method on [Communicator], named as the trace op, whose doc names
//     the C function;
//  7. the fake NCCL (internal/faketest/testdata/fakenccl.c): the function,
//     behaving as the real one does;
//  8. README.md's table of collectives: a row with the method, the C
//     function and its first release;
//  9. perf (nccl4go perf), where nccl-tests has the test: a perf
//     collective (perf's TestEveryCollectiveHasATest).
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
	numKinds
)

// collInfo is what the call path knows of a kind. name and fn are op's and
// sym's names, derived once (collTable) so that the hot path only reads.
type collInfo struct {
	op       trace.Op // the recorder's operation; its name is the call's
	sym      capi.Sym // the C function
	name, fn string
	// The per-collective config variant (collconfig.go), where NCCL has
	// one: its C function and capi.CollConfigCall's collective.
	configurable bool
	cfgSym       capi.Sym
	cfgKind      int
}

// colls is every kind's row: the one place that says which recorder
// operation and which C function a kind is.
var colls = collTable([...]collInfo{
	kAllReduce:     {op: trace.AllReduce, sym: capi.SymAllReduce, configurable: true, cfgSym: capi.SymAllReduceConfig, cfgKind: capi.CollAllReduce},
	kBroadcast:     {op: trace.Broadcast, sym: capi.SymBroadcast, configurable: true, cfgSym: capi.SymBroadcastConfig, cfgKind: capi.CollBroadcast},
	kReduce:        {op: trace.Reduce, sym: capi.SymReduce, configurable: true, cfgSym: capi.SymReduceConfig, cfgKind: capi.CollReduce},
	kAllGather:     {op: trace.AllGather, sym: capi.SymAllGather, configurable: true, cfgSym: capi.SymAllGatherConfig, cfgKind: capi.CollAllGather},
	kReduceScatter: {op: trace.ReduceScatter, sym: capi.SymReduceScatter, configurable: true, cfgSym: capi.SymReduceScatterConfig, cfgKind: capi.CollReduceScatter},
	kAllToAll:      {op: trace.AllToAll, sym: capi.SymAlltoAll, configurable: true, cfgSym: capi.SymAlltoAllConfig, cfgKind: capi.CollAllToAll},
	kGather:        {op: trace.Gather, sym: capi.SymGather, configurable: true, cfgSym: capi.SymGatherConfig, cfgKind: capi.CollGather},
	kScatter:       {op: trace.Scatter, sym: capi.SymScatter, configurable: true, cfgSym: capi.SymScatterConfig, cfgKind: capi.CollScatter},
	kSend:          {op: trace.Send, sym: capi.SymSend},
	kRecv:          {op: trace.Recv, sym: capi.SymRecv},
})

// collsWith is colls for the ...With calls (collconfig.go), named as
// their methods ("AllReduceWith"): [withNil] for a nil config (the plain C
// function), [withConfig] for a config (ncclAllReduceConfig). Rows without
// a config variant are unused.
var collsWith = [2][numKinds]collInfo{withTable(colls, false), withTable(colls, true)}

// A collCall's with: which table names the call.
const (
	plainCall  uint8 = iota // colls
	withNil                 // collsWith[0]
	withConfig              // collsWith[1]
)

func withTable(rows [numKinds]collInfo, configured bool) [numKinds]collInfo {
	for i := range rows {
		if rows[i].configurable {
			rows[i].name += "With"
			if configured {
				rows[i].fn = rows[i].cfgSym.String()
			}
		}
	}
	return rows
}

// collTable fills in the names of rows. Its parameter's length is
// numKinds: a kind without a row does not compile.
func collTable(rows [numKinds]collInfo) [numKinds]collInfo {
	for i := range rows {
		rows[i].name, rows[i].fn = rows[i].op.String(), rows[i].sym.String()
	}
	return rows
}

// collCall is one call's arguments, kept on the caller's stack.
type collCall struct {
	kind       collKind
	send, recv Buffer // Send's buffer is send, Recv's is recv
	op         RedOp
	root       int // the root, or the peer of Send and Recv
	stream     cuda.Stream
	cfg        *CollConfig // a ...With call's config, or nil
	with       uint8       // plainCall, withNil or withConfig
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
	k := &colls[a.kind]
	if a.with != plainCall {
		k = &collsWith[a.with-withNil][a.kind]
	}
	h, sdev, err := resolveStream(a.stream)
	if err != nil {
		return &ArgError{Op: k.name, Arg: "stream", Reason: "destroyed", Err: err}
	}
	var ev trace.Event // filled once the checks passed; recorded by attempt
	return c.call(context.Background(), started, k.name, k.fn, takePrepared, &ev, func(ptr uintptr) (capi.Status, error) {
		if err := c.queueCheckLocked(k.name, sdev); err != nil {
			return capi.Status{}, err
		}
		send, recv, count, dt, err := c.validateLocked(a, k.name)
		if err != nil {
			return capi.Status{}, err
		}
		// Field by field: a composite literal is built on the stack and
		// copied wide, which stalls on its own narrow stores.
		ev.Op, ev.DataType, ev.RedOp = k.op, recType(dt), recOp(a.op)
		ev.Peer, ev.Count, ev.Stream = int32(a.root), count, h
		if a.with == withConfig && k.configurable {
			return c.callConfigLocked(a, k, send, recv, count, dt, ptr, h)
		}
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
		case kRecv:
			st = capi.Recv(recv, count, int32(dt), a.root, ptr, h)
		default: // validateLocked refuses first; kept for step 4 of collKind's list
			return capi.Status{}, fmt.Errorf("nccl: %s: internal: run has no C call for kind %d", k.name, a.kind)
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

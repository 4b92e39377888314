package trace

import (
	"fmt"
	"strconv"
)

// Op is the operation an entry records. Its values are small integers so an
// entry stays a few machine words; String gives the name the dump uses.
type Op uint8

// The operations. Collectives (including the communicator-creating calls [Init],
// [Split], [Shrink] and [Grow], which every member calls in the same order) share
// one sequence per communicator; point-to-point and one-sided operations share
// a second; local operations ([Finalize], [Revoke], [Abort], [Destroy]) take no
// sequence number, since no other rank needs to match them.
const (
	OpUnknown     Op = iota // not a valid operation; its entries dump as "Op(0)"
	AllReduce               // ncclAllReduce
	Broadcast               // ncclBroadcast (peer is the root)
	Reduce                  // ncclReduce (peer is the root)
	AllGather               // ncclAllGather
	ReduceScatter           // ncclReduceScatter
	AllToAll                // ncclAlltoAll
	Gather                  // ncclGather (peer is the root)
	Scatter                 // ncclScatter (peer is the root)
	Send                    // ncclSend (peer is the receiver)
	Recv                    // ncclRecv (peer is the sender)
	Signal                  // ncclSignal (peer is the signalled rank)
	PutSignal               // ncclPutSignal (peer is the target rank)
	WaitSignal              // ncclWaitSignal (several peers: none recorded)
	Init                    // ncclCommInitRank and friends, recorded on the new communicator
	Split                   // ncclCommSplit, recorded on the parent
	Shrink                  // ncclCommShrink, recorded on the parent
	Grow                    // ncclCommGrow, recorded on the parent
	Finalize                // ncclCommFinalize
	Revoke                  // ncclCommRevoke
	Abort                   // ncclCommAbort
	Destroy                 // ncclCommDestroy
	numOps
)

// Class says how an operation is matched across ranks.
type Class uint8

const (
	// Collective operations are called by every rank of the communicator in
	// the same order; their sequence numbers align across ranks.
	Collective Class = iota
	// PointToPoint operations pair one rank with a peer; their sequence
	// numbers count per rank and do not align across ranks.
	PointToPoint
	// Local operations concern this rank only and take no sequence number.
	Local
)

var classNames = [...]string{"collective", "p2p", "local"}

// String is the class's name in a dump: "collective", "p2p" or "local".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// opInfo is what the dump and the analyzer know of an operation.
type opInfo struct {
	name   string
	class  Class
	peer   peerKind // what Event.Peer means
	data   bool     // has a count and a data type
	reduce bool     // has a reduction operator
}

// peerKind says what an operation's Peer field is.
type peerKind uint8

const (
	noPeer peerKind = iota
	rootPeer
	p2pPeer
)

var ops = [numOps]opInfo{
	OpUnknown:     {name: "Op(0)", class: Local},
	AllReduce:     {name: "AllReduce", class: Collective, data: true, reduce: true},
	Broadcast:     {name: "Broadcast", class: Collective, peer: rootPeer, data: true},
	Reduce:        {name: "Reduce", class: Collective, peer: rootPeer, data: true, reduce: true},
	AllGather:     {name: "AllGather", class: Collective, data: true},
	ReduceScatter: {name: "ReduceScatter", class: Collective, data: true, reduce: true},
	AllToAll:      {name: "AllToAll", class: Collective, data: true},
	Gather:        {name: "Gather", class: Collective, peer: rootPeer, data: true},
	Scatter:       {name: "Scatter", class: Collective, peer: rootPeer, data: true},
	Send:          {name: "Send", class: PointToPoint, peer: p2pPeer, data: true},
	Recv:          {name: "Recv", class: PointToPoint, peer: p2pPeer, data: true},
	Signal:        {name: "Signal", class: PointToPoint, peer: p2pPeer},
	PutSignal:     {name: "PutSignal", class: PointToPoint, peer: p2pPeer, data: true},
	WaitSignal:    {name: "WaitSignal", class: PointToPoint},
	Init:          {name: "Init", class: Collective},
	Split:         {name: "Split", class: Collective},
	Shrink:        {name: "Shrink", class: Collective},
	Grow:          {name: "Grow", class: Collective},
	Finalize:      {name: "Finalize", class: Local},
	Revoke:        {name: "Revoke", class: Local},
	Abort:         {name: "Abort", class: Local},
	Destroy:       {name: "Destroy", class: Local},
}

// info is the table row of o; an out-of-range o reads as [OpUnknown].
func (o Op) info() *opInfo {
	if o < numOps {
		return &ops[o]
	}
	return &ops[OpUnknown]
}

// String is the operation's name, as NCCL's function without the "nccl"
// prefix: "AllReduce", "Send", ...
func (o Op) String() string {
	if o == OpUnknown || o >= numOps {
		return "Op(" + strconv.Itoa(int(o)) + ")"
	}
	return ops[o].name
}

// Class is how the operation is matched across ranks.
func (o Op) Class() Class { return o.info().class }

// HasRoot reports whether [Event.Peer] is the root rank of a rooted collective.
func (o Op) HasRoot() bool { return o.info().peer == rootPeer }

// HasPeer reports whether [Event.Peer] is the peer rank of a point-to-point
// operation.
func (o Op) HasPeer() bool { return o.info().peer == p2pPeer }

// HasData reports whether the operation moves a count of typed elements
// ([Event.Count] and [Event.DataType] are meaningful).
func (o Op) HasData() bool { return o.info().data }

// HasRedOp reports whether [Event.RedOp] is meaningful.
func (o Op) HasRedOp() bool { return o.info().reduce }

// ParseOp is the [Op] named s (as String writes it).
func ParseOp(s string) (Op, bool) {
	for i := Op(1); i < numOps; i++ {
		if ops[i].name == s {
			return i, true
		}
	}
	return OpUnknown, false
}

// DataType is an element type, as the recorder keeps it: in a byte of the
// entry, with NCCL's ncclDataType_t codes. It is the recorder's word for
// cuda.DType (which nccl.DataType is); package trace imports no cgo
// package, so it keeps its own table, and package nccl's
// TestTraceVocabulary fails when the two differ in a value, name or size.
type DataType uint8

// The data types, with NCCL's codes.
const (
	Int8       DataType = 0
	Uint8      DataType = 1
	Int32      DataType = 2
	Uint32     DataType = 3
	Int64      DataType = 4
	Uint64     DataType = 5
	Float16    DataType = 6
	Float32    DataType = 7
	Float64    DataType = 8
	BFloat16   DataType = 9
	Float8E4M3 DataType = 10
	Float8E5M2 DataType = 11
)

var dataTypes = [...]struct {
	name string
	size int
}{
	{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1},
}

// String is the type's name in a dump: "float32", "bfloat16", ...; an
// unknown code gives "DataType(N)".
func (t DataType) String() string {
	if int(t) < len(dataTypes) {
		return dataTypes[t].name
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Size is the size of one element in bytes, 0 for an unknown code.
func (t DataType) Size() int {
	if int(t) < len(dataTypes) {
		return dataTypes[t].size
	}
	return 0
}

// ParseDataType is the [DataType] named s (as String writes it, including
// "DataType(N)").
func ParseDataType(s string) (DataType, bool) {
	for i, d := range dataTypes {
		if d.name == s {
			return DataType(i), true
		}
	}
	var n uint8
	if _, err := fmt.Sscanf(s, "DataType(%d)", &n); err == nil && fmt.Sprintf("DataType(%d)", n) == s {
		return DataType(n), true
	}
	return 0, false
}

// RedOp is a reduction operator, as the recorder keeps it: in a byte, with
// NCCL's ncclRedOp_t codes: 0 to 4 are built in (nccl.Sum ... nccl.Avg,
// checked by package nccl's TestTraceVocabulary), larger values are
// operators the application created (ncclRedOpCreatePreMulSum); one beyond
// a byte is recorded as 255.
type RedOp uint8

// The built-in reduction operators, with NCCL's codes.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

var redOpNames = [...]string{"sum", "prod", "max", "min", "avg"}

// String is the operator's name in a dump: "sum", "prod", "max", "min",
// "avg", or "custom(N)" for an operator the application created.
func (o RedOp) String() string {
	if int(o) < len(redOpNames) {
		return redOpNames[o]
	}
	return "custom(" + strconv.Itoa(int(o)) + ")"
}

// Builtin reports whether o is one of NCCL's own operators. Custom operators
// are numbered per communicator, so ranks normally agree on them too, but
// the analyzer compares only built-in ones.
func (o RedOp) Builtin() bool { return int(o) < len(redOpNames) }

// ParseRedOp is the [RedOp] named s (as String writes it).
func ParseRedOp(s string) (RedOp, bool) {
	for i, n := range redOpNames {
		if n == s {
			return RedOp(i), true
		}
	}
	var n uint8
	if _, err := fmt.Sscanf(s, "custom(%d)", &n); err == nil && fmt.Sprintf("custom(%d)", n) == s {
		return RedOp(n), true
	}
	return 0, false
}

// State is how far an operation has come. It is tracked only for operations
// recorded with [Event.Watched] (the watchdog's), since only the watchdog
// learns when the GPU starts and finishes them.
type State uint8

const (
	// Enqueued: the call handed the operation to NCCL (for unwatched
	// operations, the only thing known).
	Enqueued State = iota
	// Started: the GPU began the operation.
	Started
	// Completed: the GPU finished the operation.
	Completed
)

var stateNames = [...]string{"enqueued", "started", "completed"}

// String is the state's name in a dump: "enqueued", "started", "completed".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// ParseState is the [State] named s (as String writes it).
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

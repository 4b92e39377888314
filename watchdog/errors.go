package watchdog

import (
	"fmt"
	"strings"
	"time"

	"github.com/nccl4go/nccl/trace"
)

// Operation describes the operation a watchdog gave up on.
type Operation struct {
	Op       trace.Op       // AllReduce, Send, ...
	Seq      uint64         // its sequence number: among collectives (the same on every rank), or among point-to-point operations
	Count    uint64         // the NCCL call's count, in elements (Op.HasData)
	DataType trace.DataType // element type (Op.HasData)
	Peer     int            // root of a rooted collective, peer of a point-to-point operation; -1 otherwise
	Stream   uintptr        // the CUDA stream it was enqueued on
}

// String names the operation: "AllReduce #17 (1024 float32)",
// "Send p2p#3 (16 bfloat16, to rank 1)".
func (o Operation) String() string {
	var b strings.Builder
	b.WriteString(o.Op.String())
	if o.Op.Class() == trace.PointToPoint {
		fmt.Fprintf(&b, " p2p#%d", o.Seq)
	} else {
		fmt.Fprintf(&b, " #%d", o.Seq)
	}
	var args []string
	if o.Op.HasData() {
		args = append(args, fmt.Sprintf("%d %s", o.Count, o.DataType))
	}
	switch {
	case o.Op.HasRoot() && o.Peer >= 0:
		args = append(args, fmt.Sprintf("root %d", o.Peer))
	case o.Op == trace.Recv && o.Peer >= 0:
		args = append(args, fmt.Sprintf("from rank %d", o.Peer))
	case o.Op.HasPeer() && o.Peer >= 0:
		args = append(args, fmt.Sprintf("to rank %d", o.Peer))
	}
	if len(args) > 0 {
		b.WriteString(" (" + strings.Join(args, ", ") + ")")
	}
	return b.String()
}

// Comm identifies the communicator a failure happened on.
type Comm struct {
	Name       string // trace name: Config.CommName, or "comm-<hash>"
	Hash       uint64 // the same on every rank of the communicator
	Rank, Size int
}

// String reads "world rank 2/4".
func (c Comm) String() string { return fmt.Sprintf("%s rank %d/%d", c.Name, c.Rank, c.Size) }

// TimeoutError says that an operation did not complete on the GPU within
// the watchdog's timeout. Its message names the operation, its sequence
// number and how long it waited, what the watchdog did about it, and where
// the flight recorder was dumped:
//
//	watchdog: AllReduce #17 (1024 float32) on world rank 2/4 did not complete in 10s; communicator aborted; flight recorder dumped to /dumps/nccl4go-trace-rank2-pid77-1718000000000.json
type TimeoutError struct {
	Comm    Comm
	Op      Operation
	Waited  time.Duration // from when the operation was first seen at the head of its stream to the timeout
	Timeout time.Duration // Options.Timeout
	Action  Action        // what the watchdog did to the communicator
	// ActionErr is the error the action returned (a Revoke on an NCCL
	// without it, an Abort refused while a group holds the communicator).
	ActionErr error
	Dump      string // the dump's file; "" when none was written
	DumpErr   error  // why no dump was written, if one was asked for
	Pending   int    // operations of the communicator not completed, this one included
	// NotLaunched says NCCL never launched the operation: queued inside a
	// group that did not end, or on a non-blocking communicator whose
	// operation stayed in progress; Waited then counts from when the
	// poller first saw it queued.
	NotLaunched bool
	// Shared counts the operations queued after Op on its stream that the
	// same CUDA event follows (queued within one poll interval: the
	// watchdog records at most one event per stream and interval). Op is
	// the oldest not known to be complete; when Shared > 0 the one that
	// hangs may be any of them.
	Shared int
}

// Error names the operation, its sequence number, the time waited, the
// action taken and the dump.
func (e *TimeoutError) Error() string {
	what := "did not complete"
	if e.NotLaunched {
		what = "was not launched by NCCL"
	}
	shared := ""
	if e.Shared > 0 {
		shared = fmt.Sprintf(" (nor did the %d operations queued after it within the same poll interval)", e.Shared)
	}
	return fmt.Sprintf("watchdog: %s on %s %s in %s%s%s", e.Op, e.Comm, what, e.Waited.Round(time.Millisecond), shared, tail(e.Action, e.ActionErr, e.Dump, e.DumpErr))
}

// AsyncError says that NCCL reported the communicator broken
// (ncclCommGetAsyncError: a peer failed, a network error, ...). Err is
// NCCL's error (an *[nccl.Error]; errors.Is(err, [nccl.ErrRemote]) and friends
// work through Unwrap). Oldest is the oldest operation not completed when
// it was seen, if any.
type AsyncError struct {
	Comm   Comm
	Err    error
	Oldest *Operation
	Waited time.Duration // how long Oldest had been at the head of its stream
	// Shared counts the operations queued after Oldest on its stream whose
	// state the watchdog could not know apart from Oldest's (they share
	// its CUDA event, or none was recorded for them yet: at most one event
	// per stream and poll interval); Newest is the last of them. When
	// Shared > 0, Oldest may have completed and the one in flight is any
	// of Oldest to Newest: the message names the range.
	Shared    int
	Newest    *Operation
	Action    Action
	ActionErr error
	Dump      string
	DumpErr   error
	Pending   int
}

// Error names the communicator, the oldest operation still pending (or the
// range the watchdog cannot tell apart), NCCL's error, the action taken and
// the dump.
func (e *AsyncError) Error() string {
	what := ""
	if e.Oldest != nil {
		what = fmt.Sprintf(" with %s not completed after %s", e.Oldest, e.Waited.Round(time.Millisecond))
		if e.Shared > 0 && e.Newest != nil {
			what = fmt.Sprintf(" with one of %s to %s (%d operations queued within one poll interval, followed by one CUDA event) not completed after %s",
				e.Oldest, e.Newest, e.Shared+1, e.Waited.Round(time.Millisecond))
		}
	}
	return fmt.Sprintf("watchdog: %s broke%s: %v%s", e.Comm, what, e.Err, tail(e.Action, e.ActionErr, e.Dump, e.DumpErr))
}

// Unwrap is NCCL's error.
func (e *AsyncError) Unwrap() error { return e.Err }

func tail(a Action, aerr error, dump string, derr error) string {
	var b strings.Builder
	switch {
	case aerr != nil:
		fmt.Fprintf(&b, "; %s failed: %v", a.verb(), aerr)
	case a != ActionNone:
		fmt.Fprintf(&b, "; communicator %s", a.past())
	}
	switch {
	case dump != "":
		b.WriteString("; flight recorder dumped to " + dump)
	case derr != nil:
		fmt.Fprintf(&b, "; flight recorder not dumped: %v", derr)
	}
	return b.String()
}

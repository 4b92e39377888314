package nccl

import (
	"context"
	"fmt"
	"math"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// One-sided operations issued by the host (NCCL 2.29.2): PutSignal writes
// into a peer's window and raises a signal there, Signal only raises it,
// WaitSignal makes a stream wait for signals from peers. They need a
// communicator with host RMA support (Communicator.HostRMASupport, reported
// from NCCL 2.29.7; NCCL also needs CUDA driver 12.5). NCCL's signal index,
// context and flags must currently be 0: the binding passes 0.

// WaitSignalDesc is one peer's signals for WaitSignal
// (ncclWaitSignalDesc_t). NCCL 2.29.2.
type WaitSignalDesc struct {
	Peer        int // the rank whose signals to wait for
	OpCount     int // how many of its signal operations to wait for, >= 1
	SignalIndex int // must be 0 (NCCL supports one signal)
	Context     int // must be 0 (NCCL supports one context)
}

// rmaReady checks that one-sided calls exist in the loaded NCCL and fills
// the communicator's properties (slow path, once; cached after).
func (c *Communicator) rmaReady(op string, fn capi.Sym) error {
	if _, err := require(fn); err != nil {
		return err
	}
	_, err := c.properties(op)
	return err
}

// rmaCheckLocked checks (mu held) that the communicator supports
// host-initiated one-sided calls. It allocates nothing on success.
func (c *Communicator) rmaCheckLocked(op string) error {
	if c.props != nil {
		if hr := c.props.HostRMASupport; hr != nil && !*hr {
			return fmt.Errorf("nccl: %s: this communicator has no host-initiated RMA support (ncclCommProperties_t.hostRmaSupport is false; it needs symmetric memory across its ranks): %w", op, ErrUnsupported)
		}
	}
	return nil
}

// rmaCall makes a one-sided call on stream s: call checks the arguments
// (c.mu held, the communicator's facts filled) and calls NCCL with the
// communicator and stream handles, through the call path of call.go.
func (c *Communicator) rmaCall(op string, fn capi.Sym, s cuda.Stream, ev trace.Event, call func(comm, stream uintptr) (capi.Status, error)) error {
	h, sdev, err := resolveStream(s)
	if err != nil {
		return &ArgError{Op: op, Arg: "stream", Reason: "destroyed", Err: err}
	}
	if err := c.rmaReady(op, fn); err != nil {
		return err
	}
	ev.Stream = h
	return c.call(context.Background(), started, op, capi.SymName[fn], takePrepared, &ev, func(ptr uintptr) (capi.Status, error) {
		if err := c.rmaCheckLocked(op); err != nil {
			return capi.Status{}, err
		}
		if err := c.queueCheckLocked(op, sdev); err != nil {
			return capi.Status{}, err
		}
		return call(ptr, h)
	})
}

// Signal raises a signal at peer once this rank's earlier one-sided
// operations to peer on s are done (ncclSignal). peer's WaitSignal
// consumes it. One-sided; may be grouped. NCCL 2.29.2.
func (c *Communicator) Signal(peer int, s cuda.Stream) error {
	return c.rmaCall("Signal", capi.SymSignal, s, trace.Event{Op: trace.Signal, Peer: int32(peer)}, func(comm, stream uintptr) (capi.Status, error) {
		if err := checkRank("Signal", "peer", peer, c.nranks); err != nil {
			return capi.Status{}, err
		}
		return capi.Signal(peer, 0, 0, 0, comm, stream), nil
	})
}

// WaitSignal makes s wait until each descriptor's peer has raised
// OpCount signals (by PutSignal or Signal) (ncclWaitSignal). descs must be
// non-empty, with peers in [0, NRanks), OpCount >= 1 and SignalIndex and
// Context 0. One-sided; may be grouped. NCCL 2.29.2.
func (c *Communicator) WaitSignal(descs []WaitSignalDesc, s cuda.Stream) error {
	const op = "WaitSignal"
	if len(descs) == 0 {
		return argErr(op, "descs", "empty: wait for at least one peer")
	}
	if len(descs) > 1<<31-1 {
		return argErr(op, "descs", "%d descriptors: too many", len(descs))
	}
	var small [8]capi.WaitSignalDesc
	raw := small[:0]
	if len(descs) > len(small) {
		raw = make([]capi.WaitSignalDesc, 0, len(descs))
	}
	return c.rmaCall(op, capi.SymWaitSignal, s, trace.Event{Op: trace.WaitSignal}, func(comm, stream uintptr) (capi.Status, error) {
		raw = raw[:0]
		for i, d := range descs {
			if err := checkWaitDesc(op, i, d, c.nranks); err != nil {
				return capi.Status{}, err
			}
			raw = append(raw, capi.WaitSignalDesc{OpCnt: int32(d.OpCount), Peer: int32(d.Peer)})
		}
		return capi.WaitSignal(raw, comm, stream), nil
	})
}

// checkWaitDesc checks descriptor i.
func checkWaitDesc(op string, i int, d WaitSignalDesc, n int) error {
	switch {
	case d.Peer < 0 || d.Peer >= n:
		return argErr(op, fmt.Sprintf("descs[%d].Peer", i), "%d: not in [0, %d)", d.Peer, n)
	case d.OpCount < 1:
		return argErr(op, fmt.Sprintf("descs[%d].OpCount", i), "%d: must be at least 1", d.OpCount)
	case d.OpCount > math.MaxInt32:
		return argErr(op, fmt.Sprintf("descs[%d].OpCount", i), "%d: above NCCL's limit %d (int)", d.OpCount, math.MaxInt32)
	case d.SignalIndex != 0:
		return argErr(op, fmt.Sprintf("descs[%d].SignalIndex", i), "%d: NCCL supports only signal 0", d.SignalIndex)
	case d.Context != 0:
		return argErr(op, fmt.Sprintf("descs[%d].Context", i), "%d: NCCL supports only context 0", d.Context)
	}
	return nil
}

// PutSignal copies local into peer's window and then raises a signal at
// peer (ncclPutSignal). peerWin is this rank's handle of the window (a
// window is registered collectively, so the local handle names every
// rank's part). offsetElems is where the data lands in peer's window, in
// ELEMENTS of local's type: the byte offset is offsetElems *
// local.Type.Size(). local must lie in a window of this communicator
// registered with [WindowCollSymmetric], in one cuMem allocation. The write
// must end inside the window (checked against this rank's size of it,
// which a symmetric window shares with every rank; NCCL itself checks only
// where local starts). peer's
// WaitSignal consumes the signal. One-sided; may be grouped. NCCL 2.29.2.
func (c *Communicator) PutSignal(local Buffer, peer int, peerWin *Window, offsetElems int, s cuda.Stream) error {
	const op = "PutSignal"
	return c.rmaCall(op, capi.SymPutSignal, s, trace.Event{Op: trace.PutSignal, Peer: int32(peer), DataType: recType(local.Type), Count: uint64(max(local.Count, 0))}, func(comm, stream uintptr) (capi.Status, error) {
		win, off, err := c.checkPutLocked(op, local, peer, peerWin, offsetElems)
		if err != nil {
			return capi.Status{}, err
		}
		return capi.PutSignal(local.Ptr, uint64(local.Count), int32(local.Type), peer, win, off, 0, 0, 0, comm, stream), nil
	})
}

// checkPutLocked checks PutSignal's arguments (mu held) and returns the
// window handle and the byte offset.
func (c *Communicator) checkPutLocked(op string, local Buffer, peer int, w *Window, offsetElems int) (uintptr, uint64, error) {
	if err := c.checkBuf(op, "local", local); err != nil {
		return 0, 0, err
	}
	if err := checkRank(op, "peer", peer, c.nranks); err != nil {
		return 0, 0, err
	}
	switch {
	case w == nil:
		return 0, 0, argErr(op, "peerWin", "nil: pass this communicator's Window")
	case w.c != c:
		return 0, 0, argErr(op, "peerWin", "a window of another communicator")
	case offsetElems < 0:
		return 0, 0, argErr(op, "offsetElems", "%d: must be >= 0", offsetElems)
	}
	// NCCL checks only that local starts in a window: the end of the
	// write is checked here, against this rank's size of the window (a
	// symmetric window has the same size on every rank).
	size, win := uint64(local.Type.Size()), w.buf.Bytes()
	if n := local.Bytes(); n > win || uint64(offsetElems) > (win-n)/size {
		return 0, 0, argErr(op, "offsetElems", "%d elements of %d bytes, then %d bytes: past the end of the %d-byte window",
			offsetElems, size, local.Bytes(), win)
	}
	if err := readyLocked(w, op); err != nil {
		return 0, 0, err
	}
	return w.handle, uint64(offsetElems) * size, nil
}

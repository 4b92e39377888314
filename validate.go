package nccl

import (
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// The checks of the hot path. Each returns nil without allocating when the
// argument is good, and builds its error only on failure. They run with the
// communicator's mu held and its collState filled.

// validateLocked checks a call and returns what NCCL is passed.
func (c *Communicator) validateLocked(a *collCall, op string) (send, recv uintptr, count uint64, dt DataType, err error) {
	n, rank := c.nranks, c.rank
	switch a.kind {
	case kSend:
		if err = c.checkBufP(op, "buf", &a.send); err != nil {
			return
		}
		if err = checkRank(op, "peer", a.root, n); err != nil {
			return
		}
		if err = checkSelf(op, a.root, rank); err != nil {
			return
		}
		return a.send.Ptr, 0, uint64(a.send.Count), a.send.Type, nil
	case kRecv:
		if err = c.checkBufP(op, "buf", &a.recv); err != nil {
			return
		}
		if err = checkRank(op, "peer", a.root, n); err != nil {
			return
		}
		if err = checkSelf(op, a.root, rank); err != nil {
			return
		}
		return 0, a.recv.Ptr, uint64(a.recv.Count), a.recv.Type, nil
	case kBroadcast, kReduce, kGather, kScatter:
		if err = checkRank(op, "root", a.root, n); err != nil {
			return
		}
	}
	s, r := &a.send, &a.recv
	onRoot := a.root == rank
	switch a.kind {
	case kAllReduce:
		if err = c.checkSame(op, s, r, "recv", ""); err != nil {
			return
		}
		if err = c.checkOp(op, a.op, s.Type); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(s.Count), s.Type, nil

	case kBroadcast:
		if err = c.checkBufP(op, "recv", r); err != nil {
			return
		}
		if !onRoot {
			// send is not read here; as for Gather, pass a valid address.
			return r.Ptr, r.Ptr, uint64(r.Count), r.Type, nil
		}
		if err = c.checkSame(op, s, r, "send", onTheRoot); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(r.Count), r.Type, nil

	case kReduce:
		if err = c.checkBufP(op, "send", s); err != nil {
			return
		}
		if onRoot {
			if err = c.checkSame(op, s, r, "recv", onTheRoot); err != nil {
				return
			}
		}
		if err = c.checkOp(op, a.op, s.Type); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(s.Count), s.Type, nil

	case kAllGather:
		if err = c.checkBlocks(op, s, r, gathers, "", "send == recv + rank*send.Bytes()"); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(s.Count), s.Type, nil

	case kReduceScatter:
		if err = c.checkBlocks(op, s, r, scatters, "", "recv == send + rank*recv.Bytes()"); err != nil {
			return
		}
		if err = c.checkOp(op, a.op, s.Type); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(r.Count), s.Type, nil

	case kAllToAll:
		if err = c.checkSameCount(op, s, r, "recv", ""); err != nil {
			return
		}
		if s.Count%n != 0 {
			err = argErr(op, "send", "%d elements: not a multiple of nranks %d (each rank gets count/nranks; a remainder is an error)", s.Count, n)
			return
		}
		if err = checkAlias(op, s, r, false, ""); err != nil {
			return
		}
		return s.Ptr, r.Ptr, uint64(s.Count / n), s.Type, nil

	case kGather:
		if err = c.checkBufP(op, "send", s); err != nil {
			return
		}
		if onRoot {
			if err = c.checkBlocks(op, s, r, gathers, onTheRoot, "send == recv + root*send.Bytes()"); err != nil {
				return
			}
			return s.Ptr, r.Ptr, uint64(s.Count), s.Type, nil
		}
		// recv is not used here; NCCL_CHECK_POINTERS=1 still checks it
		// (2.28-2.30 check Gather's recvbuff on every rank): pass send.
		return s.Ptr, s.Ptr, uint64(s.Count), s.Type, nil

	case kScatter:
		if err = c.checkBufP(op, "recv", r); err != nil {
			return
		}
		if onRoot {
			if err = c.checkBlocks(op, s, r, scatters, onTheRoot, "recv == send + root*recv.Bytes()"); err != nil {
				return
			}
			return s.Ptr, r.Ptr, uint64(r.Count), r.Type, nil
		}
		// send is not read here; as for Gather, pass a valid address.
		return r.Ptr, r.Ptr, uint64(r.Count), r.Type, nil
	}
	return 0, 0, 0, 0, fmt.Errorf("nccl: %s: internal: unknown operation kind %d", op, a.kind)
}

// checkBuf checks one buffer: usable, on the communicator's device, of a
// type the loaded NCCL has. collState must be filled (prepare).
func (c *Communicator) checkBuf(op, arg string, b Buffer) error { return c.checkBufP(op, arg, &b) }

// checkBufP is checkBuf without copying the buffer, for the hot path.
func (c *Communicator) checkBufP(op, arg string, b *Buffer) error {
	if c.usable(b) {
		return nil
	}
	return c.badBuf(op, arg, b)
}

// usable is the common case of checkBufP, decided inline: a buffer of a
// live, known-good allocation, inside it, on the communicator's device, of
// a type every supported NCCL has, too small for its size or end to wrap
// (at most 2^53 elements of at most 8 bytes, below address 2^60).
func (c *Communicator) usable(b *Buffer) bool {
	a := b.alloc
	if a == nil || !a.Good() || b.Ptr-1 >= 1<<60-1 || uint(b.Count-1) >= 1<<53 || b.Device != c.dev || uint32(b.Type) > uint32(BFloat16) {
		return false
	}
	off := uint64(b.Ptr - a.Base)
	return b.Ptr >= a.Base && off <= a.Size && uint64(b.Count)*uint64(b.Type.Size()) <= a.Size-off && a.Dev == b.Device
}

// badBuf is checkBufP's slow path: the reason a buffer is refused, if any.
func (c *Communicator) badBuf(op, arg string, b *Buffer) error {
	if r, closed := b.reason(c.dev); r != "" {
		e := &ArgError{Op: op, Arg: arg, Reason: r}
		if closed {
			e.Err = ErrClosed
		}
		return e
	}
	return checkDataType(b.Type, c.coll.release)
}

// checkPair checks send and recv and that their types match.
func (c *Communicator) checkPair(op string, s, r *Buffer) error {
	if c.usable(s) && c.usable(r) && s.Type == r.Type {
		return nil
	}
	if err := c.checkBufP(op, "send", s); err != nil {
		return err
	}
	if err := c.checkBufP(op, "recv", r); err != nil {
		return err
	}
	if s.Type != r.Type {
		return argErr(op, "recv", "type %s, but send is %s", r.Type, s.Type)
	}
	return nil
}

// onTheRoot qualifies the count errors of buffers only the root uses.
const onTheRoot = " on the root"

// checkSameCount checks send and recv as a pair of the same count; arg is
// the buffer whose count must match the other's (Broadcast's send matches
// recv; elsewhere recv matches send), where is "" or onTheRoot.
func (c *Communicator) checkSameCount(op string, s, r *Buffer, arg, where string) error {
	if err := c.checkPair(op, s, r); err != nil {
		return err
	}
	if s.Count == r.Count {
		return nil
	}
	if arg == "send" {
		return argErr(op, arg, "%d elements%s, need exactly recv's %d", s.Count, where, r.Count)
	}
	return argErr(op, arg, "%d elements%s, need exactly send's %d", r.Count, where, s.Count)
}

// checkSame checks the operations whose send and recv have one shape
// (AllReduce, and Broadcast and Reduce on the root): a pair of the same
// count, in place only when recv == send.
func (c *Communicator) checkSame(op string, s, r *Buffer, arg, where string) error {
	if err := c.checkSameCount(op, s, r, arg, where); err != nil {
		return err
	}
	return checkAlias(op, s, r, s.Ptr == r.Ptr, "recv == send")
}

// Which buffer of checkBlocks holds the nranks blocks.
const (
	gathers  = true  // AllGather, Gather: recv holds a block of send's count per rank
	scatters = false // ReduceScatter, Scatter: send holds a block of recv's count per rank
)

// checkBlocks checks the operations where one buffer holds nranks blocks
// of the other's count (see gathers and scatters): in place when the other
// buffer is this rank's block, as layout says. where is "" or onTheRoot.
func (c *Communicator) checkBlocks(op string, s, r *Buffer, gather bool, where, layout string) error {
	if err := c.checkPair(op, s, r); err != nil {
		return err
	}
	n := c.nranks
	whole, block := s, r
	if gather {
		whole, block = r, s
	}
	if whole.Count%n != 0 || whole.Count/n != block.Count {
		if gather {
			return argErr(op, "recv", "%d elements%s, need exactly nranks*send.Count = %d*%d", r.Count, where, n, s.Count)
		}
		return argErr(op, "send", "%d elements%s, need exactly nranks*recv.Count = %d*%d", s.Count, where, n, r.Count)
	}
	return checkAlias(op, s, r, block.Ptr == whole.Ptr+uintptr(c.rank)*uintptr(block.Bytes()), layout)
}

// checkSelf refuses a send or receive to this rank itself outside a
// group: its match can only come in the same group, so NCCL would wait
// forever. (One cgo call, on this rare path only.)
func checkSelf(op string, peer, rank int) error {
	if peer == rank && capi.GroupDepth() == 0 {
		match := "Send"
		if op == "Send" {
			match = "Recv"
		}
		return argErr(op, "peer", "%d is this rank: a %s to itself must be in a Group with its matching %s", peer, op, match)
	}
	return nil
}

// checkRank checks a root or peer.
func checkRank(op, arg string, v, n int) error {
	if v < 0 || v >= n {
		return argErr(op, arg, "%d: not in [0, %d)", v, n)
	}
	return nil
}

// checkAlias rejects send and recv that overlap other than in NCCL's
// in-place layout (inPlace reports whether they are in it; layout says what
// it is, "" when the operation has none).
func checkAlias(op string, s, r *Buffer, inPlace bool, layout string) error {
	if inPlace {
		return nil
	}
	return checkDisjoint(op, s, r, layout)
}

// checkDisjoint is checkAlias's slow path, for buffers not in place.
func checkDisjoint(op string, s, r *Buffer, layout string) error {
	if s.Ptr >= r.Ptr+uintptr(r.Bytes()) || r.Ptr >= s.Ptr+uintptr(s.Bytes()) {
		return nil
	}
	if layout == "" {
		return argErr(op, "recv", "overlaps send: %s does not work in place", op)
	}
	return argErr(op, "recv", "overlaps send but is not the in-place layout (%s)", layout)
}

// checkOp checks a reduction operator for the buffers' type t.
func (c *Communicator) checkOp(op string, o RedOp, t DataType) error {
	if uint32(o) < uint32(numBuiltinOps) && uint32(t) < uint32(Float8E4M3) {
		return nil // the common case, decided inline at the call
	}
	return c.checkOpSlow(op, o, t)
}

// checkOpSlow is checkOp's slow path: custom operators and fp8.
func (c *Communicator) checkOpSlow(op string, o RedOp, t DataType) error {
	switch {
	case o < 0:
		return argErr(op, "op", "%s: not a reduction operator", o)
	case o >= numBuiltinOps:
		if err := c.checkCustomLocked(op, o, t); err != nil {
			return err
		}
	}
	// NCCL (2.19 through 2.30) reduces every type with every operator, fp8
	// only on sm_90 and newer (its kernels need it).
	if isFloat8(t) {
		if c.coll.cc < 90 {
			return &ArgError{Op: op, Arg: "op", Err: ErrUnsupported, Reason: fmt.Sprintf(
				"%s reductions need a GPU of compute capability 9.0 or newer; cuda:%d is %d.%d", t, c.dev, c.coll.cc/10, c.coll.cc%10)}
		}
		// NCCL's one-rank path picks its fp8 scaling kernels under
		// __CUDA_ARCH__ >= 900 in host code, where that is never defined
		// (src/device/onerank.cu, 2.19 through 2.30.7): a one-rank
		// communicator refuses fp8 Avg and PreMulSum.
		if c.nranks == 1 && (o == Avg || o >= numBuiltinOps) {
			return &ArgError{Op: op, Arg: "op", Err: ErrUnsupported, Reason: fmt.Sprintf(
				"%s with %s on a one-rank communicator: NCCL's one-rank path has no fp8 kernel for scaling operators (src/device/onerank.cu)", opName(o), t)}
		}
	}
	return nil
}

// opName is "Avg", "PreMulSum" or the operator's C name.
func opName(o RedOp) string {
	switch {
	case o == Avg:
		return "Avg"
	case o >= numBuiltinOps:
		return "PreMulSum"
	}
	return o.String()
}

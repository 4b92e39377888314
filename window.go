package nccl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// WindowFlag is a set of NCCL_WIN_* flags for [Communicator.RegisterWindow],
// combined with |. A flag newer than the loaded NCCL is refused with an
// [*UnsupportedError] naming it and its first release, an unknown bit with
// an [*ArgError], both before NCCL is called.
type WindowFlag int

// Window flags.
const (
	// WindowDefault: a window of this rank's buffer (NCCL_WIN_DEFAULT).
	// NCCL 2.27.3.
	WindowDefault WindowFlag = 0x00
	// WindowCollSymmetric: every rank registers a buffer of the same size
	// at the same offset, so that NCCL can use symmetric kernels; also
	// needed for PutSignal's source (NCCL_WIN_COLL_SYMMETRIC). NCCL 2.27.3.
	WindowCollSymmetric WindowFlag = 0x01
	// WindowStrictOrdering orders the window's operations strictly
	// (NCCL_WIN_STRICT_ORDERING). NCCL 2.29.7.
	WindowStrictOrdering WindowFlag = 0x02
	// WindowGINOnly registers the window for GIN (GPU-initiated
	// networking) access only (NCCL_WIN_GIN_ONLY; the value of nccl4py's
	// WindowFlag.GIN_ONLY). NCCL 2.32.3.
	WindowGINOnly WindowFlag = 0x04
	// WindowCFTCounted registers the window against counted CFT logical
	// endpoints instead of the default non-counted ones
	// (NCCL_WIN_CFT_COUNTED; the value of nccl4py's
	// WindowFlag.CFT_COUNTED). CFT needs Blackwell GPUs and CUDA 13.3
	// (NCCL's release notes of 2.31.2). NCCL 2.32.3.
	WindowCFTCounted WindowFlag = 0x08
)

// String names the flags as C does, joined by "|": "NCCL_WIN_DEFAULT",
// "NCCL_WIN_COLL_SYMMETRIC|NCCL_WIN_STRICT_ORDERING"; unknown bits print
// in hex after them ("NCCL_WIN_COLL_SYMMETRIC|0x40").
func (f WindowFlag) String() string {
	if f == WindowDefault {
		return "NCCL_WIN_DEFAULT"
	}
	var names []string
	for _, n := range [...]struct {
		f    WindowFlag
		name string
	}{
		{WindowCollSymmetric, "NCCL_WIN_COLL_SYMMETRIC"},
		{WindowStrictOrdering, "NCCL_WIN_STRICT_ORDERING"},
		{WindowGINOnly, "NCCL_WIN_GIN_ONLY"},
		{WindowCFTCounted, "NCCL_WIN_CFT_COUNTED"},
	} {
		if f&n.f != 0 {
			names = append(names, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		names = append(names, fmt.Sprintf("%#x", int(f)))
	}
	return strings.Join(names, "|")
}

// windowFlagGates are the window flags newer than RegisterWindow itself.
var windowFlagGates = [...]struct {
	flag WindowFlag
	f    versions.Feature
}{
	{WindowStrictOrdering, versions.WindowStrictOrdering},
	{WindowGINOnly, versions.WindowGINOnly},
	{WindowCFTCounted, versions.WindowCFTCounted},
}

// windowAlignment is NCCL_WIN_REQUIRED_ALIGNMENT ([versions.WindowAlignment]): a window's buffer
// starts this many bytes (a multiple) from its cuMem allocation's start.
const windowAlignment = 4096

// ErrNoWindow: NCCL created no window for a buffer (ncclCommWindowRegister
// returned success and a NULL window), typically because the communicator
// has no symmetric-memory support. It matches [ErrUnsupported] too.
var ErrNoWindow error = noWindowError{}

type noWindowError struct{}

func (noWindowError) Error() string { return "nccl: no window" }

// Is matches ErrUnsupported and errors.ErrUnsupported as well.
func (noWindowError) Is(target error) bool {
	return target == ErrUnsupported || target == errors.ErrUnsupported
}

// Window is a buffer registered with every rank of a communicator
// (ncclWindow_t), for symmetric kernels, one-sided operations (PutSignal)
// and direct access to peers' memory from kernels. It is tracked by its
// communicator: Destroy and Abort close it. Safe for concurrent use.
//
// A window registered inside a group (or on a non-blocking communicator)
// is known only once the group ends and NCCL's work is over: until then
// its methods return an error wrapping [ErrInProgress]; afterwards they use
// the window, or return an error wrapping [ErrNoWindow] if NCCL made none.
type Window struct {
	asyncRes
	cell   capi.Cell // where NCCL writes the ncclWindow_t, possibly later
	buf    Buffer
	flags  WindowFlag
	handle uintptr // guarded by c.mu
}

var windowKind = asyncKind{
	op:       "RegisterWindow",
	create:   "ncclCommWindowRegister",
	what:     "window",
	creation: "the window's registration",
	inGroup:  "the window is registered in a group",
	closeOp:  "Window.Close",
	destroy:  "ncclCommWindowDeregister",
}

// RegisterWindow registers b as this rank's part of a window
// (ncclCommWindowRegister). b must be on the communicator's device, in CUDA
// VMM (cuMem) memory such as [MemAlloc]'s, starting at a multiple of 4096
// bytes from its allocation. Collective: every rank registers its buffer
// (sizes may differ unless flags has [WindowCollSymmetric]). Where NCCL
// creates no window (a communicator without symmetric-memory support), it
// returns an error wrapping [ErrNoWindow], which says why. Inside a group it
// returns a [Window] known at the group's end. It returns a Window or an
// error, never neither: a Destroy or Abort of another goroutine that closes
// the window before the call returns makes it fail with [ErrClosed].
// NCCL 2.27.3 ([WindowStrictOrdering]: 2.29.7; [WindowGINOnly] and
// [WindowCFTCounted]: 2.32.3).
func (c *Communicator) RegisterWindow(b Buffer, flags WindowFlag) (*Window, error) {
	return c.registerWindow(context.Background(), started, b, flags)
}

// RegisterWindowContext is RegisterWindow (ncclCommWindowRegister)
// completed within ctx: it waits for the window even on a non-blocking
// communicator (outside a group), which is aborted if ctx ends first (a
// blocking one waits inside NCCL: see the package documentation).
// Collective. NCCL 2.27.3.
func (c *Communicator) RegisterWindowContext(ctx context.Context, b Buffer, flags WindowFlag) (*Window, error) {
	return c.registerWindow(ctx, completed, b, flags)
}

// registerWindow is ncclCommWindowRegister, finished as m says.
func (c *Communicator) registerWindow(ctx context.Context, m mode, b Buffer, flags WindowFlag) (*Window, error) {
	const op = "RegisterWindow"
	if flags&^(WindowCollSymmetric|WindowStrictOrdering|WindowGINOnly|WindowCFTCounted) != 0 {
		return nil, argErr(op, "flags", "%#x: not a combination of WindowCollSymmetric, WindowStrictOrdering, WindowGINOnly and WindowCFTCounted", int(flags))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := require(capi.SymCommWindowRegister)
	if err != nil {
		return nil, err
	}
	for _, g := range windowFlagGates {
		if flags&g.flag != 0 {
			if err := need(r, g.f); err != nil {
				return nil, err
			}
		}
	}
	return createAsync(ctx, m, c, &windowKind, takePrepared, func(ptr uintptr) (*Window, capi.Status, bool, error) {
		if err := c.checkBuf(op, "buf", b); err != nil {
			return nil, capi.Status{}, false, err
		}
		if has(r, versions.WindowAlignment) && b.Ptr%windowAlignment != 0 {
			return nil, capi.Status{}, false, argErr(op, "buf", "address %#x is not a multiple of %d: a window starts at a multiple of %d bytes from its cuMem allocation (MemAlloc's memory is aligned)", b.Ptr, windowAlignment, windowAlignment)
		}
		cell := capi.NewCell()
		st := capi.CommWindowRegister(ptr, b.Ptr, b.Bytes(), cell, int(flags))
		if !accepted(st) {
			cell.Free() // pending or failed: NCCL queued nothing that would write it
			return nil, st, false, nil
		}
		return &Window{cell: cell, buf: b, flags: flags}, st, true, nil
	})
}

// noWindowErr says why NCCL made no window.
func noWindowErr(op string) error {
	r, _ := loaded()
	return fmt.Errorf("nccl: %s: NCCL %s created no window: this communicator has no symmetric-memory support "+
		"(it needs CUDA VMM memory that the ranks' GPUs can map, and NCCL_WIN_ENABLE, NCCL_CUMEM_ENABLE and "+
		"NCCL_LOCAL_REGISTER not set to 0): %w", op, r, ErrNoWindow)
}

// settleLocked learns whether NCCL's registration is over (c.mu held).
func (w *Window) settleLocked() {
	if w.state != resPending {
		return
	}
	// NCCL writes the window once it is registered.
	if v := w.cell.Load(); v != 0 {
		w.handle = v
		w.setStateLocked(resReady)
		return
	}
	done, err := w.c.jobDoneLocked("RegisterWindow", w.comp)
	if !done {
		return
	}
	// A poll that saw the job succeed also joined it: the cell is final.
	switch v := w.cell.Load(); {
	case v != 0:
		w.handle = v
		w.setStateLocked(resReady)
	case err != nil:
		w.err = err
		w.setStateLocked(resFailed)
	default:
		w.err = noWindowErr("RegisterWindow")
		w.setStateLocked(resNone)
	}
}

// lock locks the window's communicator and checks the window is usable;
// it returns with mu held only on success.
func (w *Window) lock(op string) error {
	if w == nil || w.c == nil {
		return closedErr(op, "window")
	}
	return lockReady(w, op)
}

// Handle is the ncclWindow_t, valid until Close.
func (w *Window) Handle() (uintptr, error) {
	if err := w.lock("Window.Handle"); err != nil {
		return 0, err
	}
	defer w.c.mu.Unlock()
	return w.handle, nil
}

// Err reports whether the window is usable: nil when ready, else the error
// its methods return (pending, no window, failed or closed).
func (w *Window) Err() error {
	if err := w.lock("Window"); err != nil {
		return err
	}
	defer w.c.mu.Unlock()
	return nil
}

// Buffer is this rank's registered memory.
func (w *Window) Buffer() Buffer {
	if w == nil {
		return Buffer{}
	}
	return w.buf
}

// Size is this rank's registered size in bytes.
func (w *Window) Size() uint64 { return w.Buffer().Bytes() }

// Flags are the flags the window was registered with.
func (w *Window) Flags() WindowFlag {
	if w == nil {
		return 0
	}
	return w.flags
}

// String reads "nccl.Window(float32[1024]@cuda:0:0x..., ready 0x...)".
func (w *Window) String() string {
	if w == nil || w.c == nil {
		return "nccl.Window(nil)"
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return fmt.Sprintf("nccl.Window(%v, %s %#x)", w.buf, w.state, w.handle)
}

// UserPtr is the device address of this rank's buffer as NCCL records it
// (ncclWinGetUserPtr). Not collective. NCCL 2.29.2.
func (w *Window) UserPtr() (uintptr, error) {
	const op = "Window.UserPtr"
	if _, err := require(capi.SymWinGetUserPtr); err != nil {
		return 0, err
	}
	if w == nil || w.c == nil {
		return 0, closedErr(op, "window")
	}
	var p uintptr
	st, err := w.c.retry(context.Background(), op, func() (st capi.Status, err error) {
		p, st, err = w.query(op, func(comm, win uintptr) (uintptr, capi.Status) {
			return capi.WinGetUserPtr(comm, win)
		})
		return st, err
	})
	if err != nil {
		return 0, err
	}
	if err := statusErr(op, "ncclWinGetUserPtr", st); err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, fmt.Errorf("nccl: %s: NCCL returned no user pointer (no symmetric-memory support): %w", op, ErrNoWindow)
	}
	return p, nil
}

// pointer checks offsetBytes, asks NCCL for a device address with call
// (fn names the C function) and refuses a zero answer, saying why (an
// error wrapping [ErrUnsupported]).
func (w *Window) pointer(op, fn string, offsetBytes uint64, call func(win uintptr) (uintptr, capi.Status), why func() string) (uintptr, error) {
	if err := w.checkOffset(op, offsetBytes); err != nil {
		return 0, err
	}
	p, st, err := w.query(op, func(_, win uintptr) (uintptr, capi.Status) { return call(win) })
	if err != nil {
		return 0, err
	}
	if err := statusErr(op, fn, st); err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, fmt.Errorf("nccl: %s: %s: %w", op, why(), ErrUnsupported)
	}
	return p, nil
}

// query runs f, one NCCL call on the window, with its communicator locked
// and the window usable: comm is the ncclComm_t, win the ncclWindow_t.
func (w *Window) query(op string, f func(comm, win uintptr) (uintptr, capi.Status)) (uintptr, capi.Status, error) {
	if err := w.lock(op); err != nil {
		return 0, capi.Status{}, err
	}
	defer w.c.mu.Unlock()
	p, st := f(w.c.ptr, w.handle)
	return p, st, nil
}

// checkOffset checks a byte offset into the window.
func (w *Window) checkOffset(op string, offset uint64) error {
	if w == nil || w.c == nil {
		return closedErr(op, "window")
	}
	if offset >= w.buf.Bytes() {
		return argErr(op, "offsetBytes", "%d: not below the window's %d bytes", offset, w.buf.Bytes())
	}
	return nil
}

// LSAPointer is the device address, usable from this rank's kernels, of
// offsetBytes into the window of rank lsaRank of this rank's
// load/store-accessible team (ncclGetLsaDevicePointer). Not collective.
// NCCL 2.29.2.
func (w *Window) LSAPointer(lsaRank int, offsetBytes uint64) (uintptr, error) {
	const op = "Window.LSAPointer"
	if _, err := require(capi.SymGetLsaDevicePointer); err != nil {
		return 0, err
	}
	if lsaRank < 0 || lsaRank > math.MaxInt32 {
		return 0, argErr(op, "lsaRank", "%d: not in [0, 2^31)", lsaRank)
	}
	return w.pointer(op, "ncclGetLsaDevicePointer", offsetBytes, func(win uintptr) (uintptr, capi.Status) {
		return capi.GetLsaDevicePointer(win, offsetBytes, lsaRank)
	}, func() string { return fmt.Sprintf("LSA rank %d has no load/store-accessible window", lsaRank) })
}

// PeerPointer is the device address, usable from this rank's kernels, of
// offsetBytes into peer's window (ncclGetPeerDevicePointer). A peer that
// this rank cannot reach by load/store gives an error wrapping
// [ErrUnsupported]. Not collective. NCCL 2.29.2.
func (w *Window) PeerPointer(peer int, offsetBytes uint64) (uintptr, error) {
	const op = "Window.PeerPointer"
	if _, err := require(capi.SymGetPeerDevicePointer); err != nil {
		return 0, err
	}
	if w == nil || w.c == nil {
		return 0, closedErr(op, "window")
	}
	n, _, _, err := w.c.ident(op)
	if err != nil {
		return 0, err
	}
	if err := checkRank(op, "peer", peer, n); err != nil {
		return 0, err
	}
	return w.pointer(op, "ncclGetPeerDevicePointer", offsetBytes, func(win uintptr) (uintptr, capi.Status) {
		return capi.GetPeerDevicePointer(win, offsetBytes, peer)
	}, func() string { return fmt.Sprintf("peer %d is not reachable by load/store from this rank", peer) })
}

// MultimemPointer is the multicast (multimem) device address of offsetBytes
// into the window for this rank's LSA team (ncclGetLsaMultimemDevicePointer).
// Without multimem support it returns an error wrapping [ErrUnsupported].
// Not collective. NCCL 2.29.2.
func (w *Window) MultimemPointer(offsetBytes uint64) (uintptr, error) {
	const op = "Window.MultimemPointer"
	if _, err := require(capi.SymGetLsaMultimemDevicePointer); err != nil {
		return 0, err
	}
	return w.pointer(op, "ncclGetLsaMultimemDevicePointer", offsetBytes, func(win uintptr) (uintptr, capi.Status) {
		return capi.GetLsaMultimemDevicePointer(win, offsetBytes)
	}, func() string { return "no multimem address for this window (no multimem support)" })
}

// MultimemPointerFor is ncclGetMultimemDevicePointer: the multimem
// (multicast) address of the byte at offsetBytes in the window, through
// the multicast object of team (a [TeamResource] made with multimem and
// passed to [Communicator.CreateDevComm], which has made its device
// communicator), rather than the LSA team's ([Window.MultimemPointer]).
// Not collective. NCCL 2.29.2.
func (w *Window) MultimemPointerFor(team *TeamResource, offsetBytes uint64) (uintptr, error) {
	const op = "Window.MultimemPointerFor"
	if _, err := require(capi.SymGetMultimemDevicePointer); err != nil {
		return 0, err
	}
	base, owner, err := team.multimemHandle(op)
	if err != nil {
		return 0, err
	}
	if base == 0 {
		return 0, fmt.Errorf("nccl: %s: the team's multimem handle is empty (NCCL made no multicast object): %w", op, ErrUnsupported)
	}
	if err := w.checkOffset(op, offsetBytes); err != nil {
		return 0, err
	}
	if owner != w.c {
		return 0, argErr(op, "team", "serves a device communicator of another communicator than the window's: its multimem handle is that communicator's")
	}
	return w.pointer(op, "ncclGetMultimemDevicePointer", offsetBytes, func(win uintptr) (uintptr, capi.Status) {
		return capi.GetMultimemDevicePointer(win, offsetBytes, base)
	}, func() string { return "no multimem address for this window (no multimem support)" })
}

// Close deregisters the window (ncclCommWindowDeregister). No operation or
// kernel using it may still run. A window still being registered is waited
// for first (outside its group). Close is idempotent: a second Close, or a
// Close after the communicator's Destroy or Abort (which closed it),
// returns nil. Not collective. NCCL 2.27.3.
func (w *Window) Close() error {
	if w == nil || w.c == nil {
		return nil
	}
	return closeAsync(w)
}

// closeLocked is Close for Destroy and Abort (c.mu held).
func (w *Window) closeLocked() error { return closeAsyncLocked(w) }

func (w *Window) async() *asyncRes { return &w.asyncRes }

func (w *Window) destroyLocked() capi.Status { return capi.CommWindowDeregister(w.c.ptr, w.handle) }

func (w *Window) freeLocked(later bool) {
	if later {
		w.c.life.deferred = append(w.c.life.deferred, w.cell.Free)
		return
	}
	w.cell.Free()
}

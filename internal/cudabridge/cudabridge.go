// Package cudabridge hands the other packages of this module what package
// cuda knows but does not export: the state of a stream or a block of
// device memory, the primary context of a device, raw event calls. Users
// never call these (STYLE.md: helpers that exist for sibling packages live
// under internal/, as cilium/ebpf's internal/sys), so they are not part of
// package cuda's API.
//
// Package cuda imports this package and fills every variable in its init.
// A caller imports cuda too (it holds a cuda value to pass), so by the time
// the caller's own package variables are initialized the variables here are
// set.
//
// This package cannot name cuda's types (cuda imports it), so a variable
// whose function takes a cuda type is an any holding the function its
// comment names: its caller asserts it once, into a typed package variable
// of its own (a mismatch panics while the caller's package initializes, so
// every test of the caller catches it), and calls that variable. A call
// costs one indirect call and allocates nothing.
package cudabridge

import (
	"sync"
	"sync/atomic"
)

// Functions of package cuda that take or return only this package's types
// or basic ones.
var (
	// CheckRange asks the driver whether bytes bytes at device address p
	// are device memory of device dev (cuPointerGetAttribute, four driver
	// calls per chunk of a mapping). It returns nil, or an error: a
	// *cuda.ArgError saying what is wrong with the memory (bad is then
	// true), or another error when the driver could not answer.
	CheckRange func(p uintptr, bytes uint64, dev int) (bad bool, err error)

	// PrimaryContext is the CUcontext of device dev's primary context,
	// retained on first use (the context NCCL, the CUDA runtime and other
	// libraries share).
	PrimaryContext func(dev int) (uintptr, error)

	// ErrFreed is what Memory.Verify returns for freed memory: an error
	// wrapping cuda.ErrClosed.
	ErrFreed error
)

// Functions of package cuda that take cuda's types, each an any holding
// the function its comment names.
var (
	// StreamResolve holds func(s cuda.Stream) (handle uintptr, dev int,
	// err error): what an operation on s needs, its CUstream and its
	// device (-1 for the zero Stream, which fits any device), or an error
	// wrapping cuda.ErrClosed after Destroy.
	StreamResolve any

	// AllocationMemory holds func(a *cuda.Allocation) *Memory: the state
	// of the block of memory a (nil for nil).
	AllocationMemory any

	// EventRecord holds func(e *cuda.Event, stream uintptr) error: Record
	// on a raw stream handle (a CUstream of the event's device; 0 is its
	// legacy default stream), for callers that hold the handle rather than
	// a cuda.Stream, such as an nccl.Hook. It allocates nothing.
	EventRecord any

	// EventQuery holds func(e *cuda.Event) cuda.Result: the driver's
	// answer to cuEventQuery as a code (Success, NotReady, or the reason
	// the event cannot be queried, such as CUDA_ERROR_CAPTURED_EVENT),
	// allocating nothing, for pollers.
	EventQuery any

	// EventResolve holds func(e *cuda.Event) (handle uintptr, dev int,
	// flags uint32, err error): the CUevent, device and creation flags
	// (cuda.EventFlag) of e, or an error wrapping cuda.ErrClosed after
	// Destroy (nccl.CollConfig's launch completion event).
	EventResolve any
)

// Memory is the state of one block of device memory, shared by every
// cuda.Slice cut from it (through its cuda.Allocation) and by every
// nccl.Buffer made from one: its address range, its device, and whether it
// is still usable. Memory made by cuda.Alloc is known good until freed;
// memory adopted by cuda.Wrap is what the caller says it is until Verify
// asks the driver. Safe for concurrent use; Base, Size and Dev are set
// before the Memory is shared and never change.
type Memory struct {
	Base uintptr // device address of the first byte
	Size uint64  // in bytes
	Dev  int     // CUDA device ordinal

	state atomic.Uint32 // unverified, good, bad or freed
	bad   error         // why Verify refused the memory (set before state bad)
	// verifying lets one goroutine at a time ask the driver (Verify).
	verifying sync.Mutex
}

// Memory states. Free moves any state to freed.
const (
	unverified uint32 = iota // adopted by Wrap, not checked yet
	good                     // made by Alloc, or checked by Verify
	bad                      // Verify refused it: Memory.bad says why
	freed                    // freed
)

// SetGood marks memory the driver just allocated: known good, no check.
func (m *Memory) SetGood() { m.state.Store(good) }

// Good reports whether the memory is known usable: made by Alloc, or
// adopted and verified, and not freed. It costs one atomic load.
func (m *Memory) Good() bool { return m.state.Load() == good }

// Freed reports whether the memory was freed.
func (m *Memory) Freed() bool { return m.state.Load() == freed }

// Free marks the memory freed. It reports false when it already was, so
// that exactly one caller releases it.
func (m *Memory) Free() bool { return m.state.Swap(freed) != freed }

// Verify checks adopted memory against the driver (CheckRange), once: it
// must be device (or managed) memory of Dev, the whole range inside one
// allocation or chunks mapped side by side. It returns nil for good memory,
// ErrFreed after Free, and a *cuda.ArgError saying what is wrong otherwise;
// the answer is cached (memory does not change device), except a driver
// failure, which is no answer about the memory. Memory made by Alloc is
// good without a driver call.
func (m *Memory) Verify() error {
	switch m.state.Load() {
	case good:
		return nil
	case freed:
		return ErrFreed
	case bad:
		return m.bad // written before the state said bad
	}
	// One goroutine asks the driver; others wait for its answer.
	m.verifying.Lock()
	defer m.verifying.Unlock()
	if m.state.Load() == unverified {
		isBad, err := CheckRange(m.Base, m.Size, m.Dev)
		switch {
		case err == nil:
			m.state.CompareAndSwap(unverified, good)
		case isBad:
			m.bad = err
			m.state.CompareAndSwap(unverified, bad)
		default:
			return err // the driver failed: not an answer about the memory
		}
	}
	switch m.state.Load() {
	case good:
		return nil
	case bad:
		return m.bad
	}
	return ErrFreed
}

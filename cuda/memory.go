package cuda

import (
	"fmt"
	"unsafe"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// Allocation is one block of device memory as it was allocated or
// adopted, shared by every [Slice] cut from it ([Slice.Allocation]): its
// address range and its device. Safe for concurrent use.
type Allocation struct {
	m     cudabridge.Memory       // range, device, and whether usable (good, freed...)
	owned bool                    // made by Alloc or WrapOwned: Free releases it
	free  func(ptr uintptr) error // how WrapOwned memory is released; nil: cuMemFree
}

// Base is the device address of the first byte.
func (a *Allocation) Base() uintptr { return a.m.Base }

// Size is the size in bytes.
func (a *Allocation) Size() uint64 { return a.m.Size }

// Device is the device the memory is on.
func (a *Allocation) Device() Device { return Device(a.m.Dev) }

// newAllocation is an [Allocation] of bytes bytes at ptr on dev.
func newAllocation(ptr uintptr, bytes uint64, dev Device) *Allocation {
	return &Allocation{m: cudabridge.Memory{Base: ptr, Size: bytes, Dev: int(dev)}}
}

// Memory types of CU_POINTER_ATTRIBUTE_MEMORY_TYPE.
const (
	memoryTypeDevice  = 2
	memoryTypeUnified = 4
)

// checkRange asks the driver whether bytes bytes at device address p are
// device memory of dev (cuPointerGetAttribute): an *[ArgError] says what is
// wrong (not device memory, on another device, running past the end of the
// allocation that holds p), another error that the driver could not answer.
// Memory mapped from several chunks side by side (cuMemMap) is one range
// when every chunk is device memory of dev. It costs four driver calls per
// chunk.
func checkRange(p uintptr, bytes uint64, dev Device) error {
	const op = "Verify"
	ctx, err := dev.context(op)
	if err != nil {
		return err
	}
	info, r := capi.CuPointerInfo(ctx, p)
	if Result(r) == InvalidValue {
		return &ArgError{Op: op, Arg: "ptr", Reason: fmt.Sprintf("%#x is not device memory the CUDA driver knows", p)}
	}
	if err := check(op, "cuPointerGetAttribute", r); err != nil {
		return err
	}
	switch {
	case info.MemoryType != memoryTypeDevice && info.MemoryType != memoryTypeUnified:
		return &ArgError{Op: op, Arg: "ptr", Reason: fmt.Sprintf("%#x is not device memory (CUDA memory type %d)", p, info.MemoryType)}
	case Device(info.Device) != dev:
		return &ArgError{Op: op, Arg: "ptr", Reason: fmt.Sprintf("%#x is memory of cuda:%d, not cuda:%d", p, info.Device, int(dev))}
	case p < info.Base || uint64(p-info.Base) > info.Size:
		return &ArgError{Op: op, Arg: "ptr", Reason: fmt.Sprintf("%#x lies outside the allocation the driver says holds it (%d bytes at %#x)", p, info.Size, info.Base)}
	}
	// Memory mapped from several physical chunks side by side (cuMemMap:
	// PyTorch's expandable segments, NCCL's cuMem allocations) is one
	// range to its users, but the driver reports each chunk's range: go on
	// chunk by chunk while the next one starts where this one ends.
	end := uint64(info.Base) + info.Size
	for chunks := 1; uint64(p)+bytes > end; chunks++ {
		next, r := capi.CuPointerInfo(ctx, uintptr(end))
		if r != 0 || chunks >= maxChunks || (next.MemoryType != memoryTypeDevice && next.MemoryType != memoryTypeUnified) ||
			Device(next.Device) != dev || uint64(next.Base) != end || next.Size == 0 {
			return &ArgError{Op: op, Arg: "ptr", Reason: fmt.Sprintf("%d bytes at %#x run past the end of its allocation (%d bytes at %#x)", bytes, p, end-uint64(info.Base), info.Base)}
		}
		end += next.Size
	}
	return nil
}

// maxChunks bounds the chunks checkRange follows (four driver calls each).
const maxChunks = 4096

// Slice is typed device memory: n elements of T from a device address, on
// one device. [Alloc] makes one; Sub cuts a part; [Wrap] adopts memory made by
// another library. A Slice is a small value: copies share the memory.
// Methods are safe for concurrent use; the memory itself is not
// synchronized.
type Slice[T Elem] struct {
	a   *Allocation
	off int // in elements
	n   int
}

// Alloc allocates n elements of T on dev (cuMemAlloc). The memory is not
// initialized. Free it when done.
func Alloc[T Elem](dev Device, n int) (Slice[T], error) {
	size := DTypeOf[T]().Size()
	if n <= 0 {
		return Slice[T]{}, &ArgError{Op: "Alloc", Arg: "n", Reason: fmt.Sprintf("%d elements: need at least 1", n)}
	}
	if uint64(n) > (1<<62)/uint64(size) {
		return Slice[T]{}, &ArgError{Op: "Alloc", Arg: "n", Reason: fmt.Sprintf("%d elements overflow", n)}
	}
	ctx, err := dev.context("Alloc")
	if err != nil {
		return Slice[T]{}, err
	}
	bytes := uint64(n) * uint64(size)
	p, r := capi.CuMemAlloc(ctx, bytes)
	if err := check("Alloc", "cuMemAlloc_v2", r); err != nil {
		return Slice[T]{}, fmt.Errorf("%w (%d bytes on %s)", err, bytes, dev)
	}
	a := newAllocation(p, bytes, dev)
	a.owned = true
	a.m.SetGood()
	return Slice[T]{a: a, n: n}, nil
}

// AllocFrom allocates len(src) elements on dev and copies src into them. It
// returns when the data is on the device: work queued afterwards on any
// stream sees it (see [Slice.CopyFromHost]).
func AllocFrom[T Elem](dev Device, src []T) (Slice[T], error) {
	s, err := Alloc[T](dev, len(src))
	if err != nil {
		return s, err
	}
	if err := s.CopyFromHost(src); err != nil {
		s.Free()
		return Slice[T]{}, err
	}
	return s, nil
}

// Wrap adopts n elements of T at device address ptr on dev, made by another
// library (a PyTorch tensor, CuPy array, ncclMemAlloc...). Free on it is an
// error: the other library owns the memory.
func Wrap[T Elem](ptr uintptr, n int, dev Device) Slice[T] {
	return Slice[T]{a: newAllocation(ptr, uint64(n)*uint64(DTypeOf[T]().Size()), dev), n: n}
}

// WrapOwned adopts n elements at ptr on dev that Free releases with free,
// for memory from another allocator (ncclMemAlloc, for example) that should
// behave like [Alloc]'s: Free once, [ErrClosed] after.
func WrapOwned[T Elem](ptr uintptr, n int, dev Device, free func(ptr uintptr) error) Slice[T] {
	s := Wrap[T](ptr, n, dev)
	s.a.owned, s.a.free = true, free
	return s
}

// Len is the number of elements.
func (s Slice[T]) Len() int { return s.n }

// Bytes is the size in bytes.
func (s Slice[T]) Bytes() uint64 { return uint64(s.n) * uint64(DTypeOf[T]().Size()) }

// DType is the element type.
func (s Slice[T]) DType() DType { return DTypeOf[T]() }

// Ptr is the device address of the first element (0 for the zero [Slice]).
func (s Slice[T]) Ptr() uintptr {
	if s.a == nil {
		return 0
	}
	return s.a.m.Base + uintptr(s.off*DTypeOf[T]().Size())
}

// Device is the device the memory is on.
func (s Slice[T]) Device() Device {
	if s.a == nil {
		return 0
	}
	return s.a.Device()
}

// Err reports whether the slice can be used: nil, or an error wrapping
// [ErrClosed] after Free, or [ErrInvalidValue] for the zero [Slice] and for a
// negative length given to [Wrap].
func (s Slice[T]) Err() error {
	if s.a == nil {
		return &ArgError{Op: "Slice", Arg: "slice", Reason: "zero Slice: no memory"}
	}
	if s.n < 0 {
		return &ArgError{Op: "Slice", Arg: "slice", Reason: fmt.Sprintf("%d elements: negative length", s.n)}
	}
	if s.a.m.Freed() {
		return closedError("Slice", "memory freed")
	}
	return nil
}

// Freed reports whether the memory was freed.
func (s Slice[T]) Freed() bool { return s.a != nil && s.a.m.Freed() }

// Allocation is the block of memory s was cut from (nil for the zero
// [Slice]): the same for s, its copies and the parts [Slice.Sub] cuts from it.
func (s Slice[T]) Allocation() *Allocation { return s.a }

// Sub is elements [i, j) of s, sharing its memory.
func (s Slice[T]) Sub(i, j int) (Slice[T], error) {
	if i < 0 || j < i || j > s.n {
		return Slice[T]{}, &ArgError{Op: "Sub", Arg: "range", Reason: fmt.Sprintf("[%d:%d] of a slice of %d", i, j, s.n)}
	}
	return Slice[T]{a: s.a, off: s.off + i, n: j - i}, nil
}

// Free releases memory made by [Alloc] (cuMemFree). Freeing twice returns an
// error wrapping [ErrClosed]; freeing a Sub or a [Wrap] is an error and frees
// nothing.
func (s Slice[T]) Free() error {
	if s.a == nil {
		return nil
	}
	if !s.a.owned {
		return &ArgError{Op: "Free", Arg: "slice", Reason: "memory adopted by Wrap: its owner frees it"}
	}
	if s.off != 0 || uint64(s.n)*uint64(DTypeOf[T]().Size()) != s.a.m.Size {
		return &ArgError{Op: "Free", Arg: "slice", Reason: "a part made by Sub: free the whole allocation"}
	}
	if !s.a.m.Free() {
		return closedError("Free", "memory already freed")
	}
	if s.a.free != nil {
		return s.a.free(s.a.m.Base)
	}
	ctx, err := s.a.Device().context("Free")
	if err != nil {
		return err
	}
	return check("Free", "cuMemFree_v2", capi.CuMemFree(ctx, s.a.m.Base))
}

// use returns the context and address for an operation on s.
func (s Slice[T]) use(op string) (uintptr, uintptr, error) {
	if err := s.Err(); err != nil {
		return 0, 0, fmt.Errorf("cuda: %s: %w", op, err)
	}
	ctx, err := s.a.Device().context(op)
	return ctx, s.Ptr(), err
}

func lengthError(op string, want, got int) error {
	return &ArgError{Op: op, Arg: "length", Reason: fmt.Sprintf("device slice has %d elements, the other side %d", want, got)}
}

func hostPtr[T Elem](h []T) unsafe.Pointer {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Pointer(&h[0])
}

// streamFor checks that st may carry work for dev.
func streamFor(op string, st Stream, dev Device) (uintptr, error) {
	h, sdev, err := st.resolve()
	if err != nil {
		return 0, err
	}
	if sdev >= 0 && Device(sdev) != dev {
		return 0, &ArgError{Op: op, Arg: "stream", Reason: fmt.Sprintf("stream of %s, memory on %s", Device(sdev), dev)}
	}
	return h, nil
}

// CopyFromHost copies src to the device; len(src) must equal s.Len(). It
// returns when the data is on the device: work queued afterwards on any
// stream sees it.
//
// cuMemcpyHtoD from pageable memory (all Go memory is) returns once the
// driver has staged src; the copy to the device goes on in the legacy
// default stream, which streams made by [Device.NewStream] do not wait for
// (seen on an H200: a Reduce on such a stream read zeros for inputs just
// uploaded). So CopyFromHost then synchronizes the legacy default stream
// (cuStreamSynchronize of stream 0), which waits for that stream's work
// only, not for other streams' work (cuCtxSynchronize would).
func (s Slice[T]) CopyFromHost(src []T) error {
	ctx, p, err := s.use("CopyFromHost")
	if err != nil {
		return err
	}
	if len(src) != s.n {
		return lengthError("CopyFromHost", s.n, len(src))
	}
	if err := check("CopyFromHost", "cuMemcpyHtoD_v2", capi.CuMemcpyHtoD(ctx, p, hostPtr(src), s.Bytes())); err != nil {
		return err
	}
	return legacyDone("CopyFromHost", ctx)
}

// legacyDone waits for the work of the legacy default stream of ctx's
// device: the synchronous copies and memsets, which the driver may leave
// there unfinished when it returns ("API synchronization behavior" in the
// CUDA driver documentation).
func legacyDone(op string, ctx uintptr) error {
	return check(op, "cuStreamSynchronize", capi.CuStreamSynchronize(ctx, 0))
}

// CopyToHost copies the device memory to dst; len(dst) must equal s.Len().
// It returns when dst holds the data (cuMemcpyDtoH to pageable memory is
// synchronous); it is ordered after the legacy default stream's work, not
// after work queued on other streams: synchronize those first.
func (s Slice[T]) CopyToHost(dst []T) error {
	ctx, p, err := s.use("CopyToHost")
	if err != nil {
		return err
	}
	if len(dst) != s.n {
		return lengthError("CopyToHost", s.n, len(dst))
	}
	return check("CopyToHost", "cuMemcpyDtoH_v2", capi.CuMemcpyDtoH(ctx, hostPtr(dst), p, s.Bytes()))
}

// ToHost copies the device memory into a new slice, as [Slice.CopyToHost].
func (s Slice[T]) ToHost() ([]T, error) {
	if s.n < 0 {
		return nil, fmt.Errorf("cuda: ToHost: %w", s.Err())
	}
	h := make([]T, s.n)
	return h, s.CopyToHost(h)
}

// CopyFrom copies src, device to device (across devices too); the lengths
// must match. It returns when the data is on the device: work queued
// afterwards on any stream sees it (cuMemcpyDtoD returns before the copy is
// done, so CopyFrom then synchronizes the legacy default stream, as
// [Slice.CopyFromHost] does).
func (s Slice[T]) CopyFrom(src Slice[T]) error {
	ctx, p, q, err := s.pair("CopyFrom", src)
	if err != nil {
		return err
	}
	if err := check("CopyFrom", "cuMemcpyDtoD_v2", capi.CuMemcpyDtoD(ctx, p, q, s.Bytes())); err != nil {
		return err
	}
	return legacyDone("CopyFrom", ctx)
}

// pair checks a device-to-device copy of src to s: it returns s's context
// and both pointers.
func (s Slice[T]) pair(op string, src Slice[T]) (ctx, p, q uintptr, err error) {
	if ctx, p, err = s.use(op); err != nil {
		return 0, 0, 0, err
	}
	if _, q, err = src.use(op); err != nil {
		return 0, 0, 0, err
	}
	if src.n != s.n {
		return 0, 0, 0, lengthError(op, s.n, src.n)
	}
	return ctx, p, q, nil
}

// hostCopy checks a copy between s and n elements of host memory on st: it
// returns s's context, s's pointer and st's handle.
func (s Slice[T]) hostCopy(op string, n int, st Stream) (ctx, p, h uintptr, err error) {
	if ctx, p, err = s.use(op); err != nil {
		return 0, 0, 0, err
	}
	if n != s.n {
		return 0, 0, 0, lengthError(op, s.n, n)
	}
	if h, err = streamFor(op, st, s.a.Device()); err != nil {
		return 0, 0, 0, err
	}
	return ctx, p, h, nil
}

// CopyFromHostAsync queues a copy of src to the device on st. src is Go
// (pageable) memory, which the driver has read by the time this returns.
func (s Slice[T]) CopyFromHostAsync(src []T, st Stream) error {
	ctx, p, h, err := s.hostCopy("CopyFromHostAsync", len(src), st)
	if err != nil {
		return err
	}
	return check("CopyFromHostAsync", "cuMemcpyHtoDAsync_v2", capi.CuMemcpyHtoDAsync(ctx, p, hostPtr(src), s.Bytes(), h))
}

// CopyToHostAsync copies the device memory to dst in the order of st. dst is
// Go (pageable) memory, so the driver returns only once the copy is done.
func (s Slice[T]) CopyToHostAsync(dst []T, st Stream) error {
	ctx, p, h, err := s.hostCopy("CopyToHostAsync", len(dst), st)
	if err != nil {
		return err
	}
	return check("CopyToHostAsync", "cuMemcpyDtoHAsync_v2", capi.CuMemcpyDtoHAsync(ctx, hostPtr(dst), p, s.Bytes(), h))
}

// CopyFromAsync queues a device-to-device copy of src on st.
func (s Slice[T]) CopyFromAsync(src Slice[T], st Stream) error {
	ctx, p, q, err := s.pair("CopyFromAsync", src)
	if err != nil {
		return err
	}
	h, err := streamFor("CopyFromAsync", st, s.a.Device())
	if err != nil {
		return err
	}
	return check("CopyFromAsync", "cuMemcpyDtoDAsync_v2", capi.CuMemcpyDtoDAsync(ctx, p, q, s.Bytes(), h))
}

// Memset sets every byte of the memory to b. It returns when the memory is
// set: work queued afterwards on any stream sees it (cuMemsetD8 returns
// before the memset is done, so Memset then synchronizes the legacy default
// stream, as [Slice.CopyFromHost] does).
func (s Slice[T]) Memset(b byte) error {
	ctx, p, err := s.use("Memset")
	if err != nil {
		return err
	}
	if err := check("Memset", "cuMemsetD8_v2", capi.CuMemsetD8(ctx, p, b, s.Bytes())); err != nil {
		return err
	}
	return legacyDone("Memset", ctx)
}

// MemsetAsync queues setting every byte of the memory to b on st.
func (s Slice[T]) MemsetAsync(b byte, st Stream) error {
	ctx, p, err := s.use("MemsetAsync")
	if err != nil {
		return err
	}
	h, err := streamFor("MemsetAsync", st, s.a.Device())
	if err != nil {
		return err
	}
	return check("MemsetAsync", "cuMemsetD8Async", capi.CuMemsetD8Async(ctx, p, b, s.Bytes(), h))
}

// PointerDevice is the device that holds the device address p
// (cuPointerGetAttribute), for memory made by other libraries.
func PointerDevice(p uintptr) (Device, error) {
	if err := ensure(); err != nil {
		return 0, err
	}
	const attrDeviceOrdinal = 9 // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
	d, r := capi.CuPointerGetAttributeInt(attrDeviceOrdinal, p)
	return Device(d), check("PointerDevice", "cuPointerGetAttribute", r)
}

package nccl

import (
	"errors"
	"fmt"
	"math"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// Buffer is device memory as NCCL takes it: a device address, a count of
// elements, their type and the device. It is a small value, free to pass:
// [BufferOf] turns any [cuda.Slice] into one, and [RawBuffer] wraps memory from
// another library (a PyTorch tensor's data_ptr, a CuPy array...). The zero
// Buffer is "no buffer": pass it where a rank does not use an argument
// (Broadcast's and Scatter's send off the root, Reduce's and Gather's recv
// off the root); everywhere else it is refused, as is a buffer of more than
// 2^56 bytes or one that would end past the top of the address space.
//
// A Buffer remembers the allocation it was made from, also when a copy of it
// is narrowed by changing Ptr, Count and Type (a block of a larger buffer,
// with no new driver query). Every operation
// checks, before NCCL sees the address, that the memory is device memory of
// Device, not freed, and that [Ptr, Ptr+Bytes()) lies inside that
// allocation (NCCL does not check pointers, and a bad one crashes the
// process): for a cuda.Slice's Buffer that costs an atomic load; a
// RawBuffer asks the CUDA driver once, on its first use, and remembers the
// answer. A Buffer written as a literal has no allocation: the driver is
// asked on every call (four driver calls), so prefer BufferOf and
// RawBuffer.
type Buffer struct {
	Ptr    uintptr  // device address of the first element
	Count  int      // number of elements
	Type   DataType // element type
	Device int      // CUDA device ordinal holding the memory
	alloc  *cudabridge.Memory
}

// BufferOf is the [Buffer] of a device slice. Once the slice's memory is
// freed (through any Slice of it), every operation rejects the Buffer.
// It allocates nothing.
func BufferOf[T cuda.Elem](s cuda.Slice[T]) Buffer {
	return Buffer{Ptr: s.Ptr(), Count: s.Len(), Type: cuda.DTypeOf[T](), Device: int(s.Device()), alloc: allocationMemory(s.Allocation())}
}

// RawBuffer wraps count elements of type t at device address ptr on device
// dev, made by another library. The CUDA driver is asked once, on the
// Buffer's first use (or Err), whether the whole range is device memory of
// dev; copies of the [Buffer] share the answer.
func RawBuffer(ptr uintptr, count int, t DataType, dev int) Buffer {
	b := Buffer{Ptr: ptr, Count: count, Type: t, Device: dev}
	if ptr != 0 && count > 0 && t.Valid() && uint64(count) <= maxBufferBytes/uint64(t.Size()) && dev >= 0 {
		b.alloc = allocationMemory(cuda.Wrap[uint8](ptr, int(b.Bytes()), cuda.Device(dev)).Allocation())
	}
	return b
}

// Err reports whether an operation would accept the buffer on its device:
// nil, or the error the operation would return (an *[ArgError] wrapping
// [ErrInvalidArgument], and [ErrClosed] for freed memory). It asks the CUDA
// driver about a [RawBuffer] not checked yet.
func (b Buffer) Err() error {
	if r, closed := b.reason(b.Device); r != "" {
		e := &ArgError{Op: "Buffer", Arg: "buffer", Reason: r}
		if closed {
			e.Err = ErrClosed
		}
		return e
	}
	return nil
}

// Bytes is the size of the buffer in bytes.
func (b Buffer) Bytes() uint64 { return uint64(b.Count) * uint64(b.Type.Size()) }

// String reads "float32[1024]@cuda:0:0x7f...".
func (b Buffer) String() string {
	return fmt.Sprintf("%s[%d]@cuda:%d:%#x", b.Type, b.Count, b.Device, b.Ptr)
}

// reason validates b for an operation on device dev; it returns why the
// buffer is refused (closed: its memory was freed), or "" when it is usable.
// It allocates nothing on success.
func (b Buffer) reason(dev int) (r string, closed bool) {
	switch {
	case b.alloc != nil && b.alloc.Freed():
		return "memory was freed", true
	case b.Ptr == 0:
		return "null device address", false
	case b.Count <= 0:
		return fmt.Sprintf("%d elements: empty", b.Count), false
	case !b.Type.Valid():
		return fmt.Sprintf("unknown data type %d", int32(b.Type)), false
	case uint64(b.Count) > maxBufferBytes/uint64(b.Type.Size()):
		return fmt.Sprintf("%d elements of %d bytes: larger than any device memory (2^56 bytes)", b.Count, b.Type.Size()), false
	case uint64(b.Ptr) > math.MaxUint64-b.Bytes():
		return fmt.Sprintf("%d bytes at %#x: past the end of the address space", b.Bytes(), b.Ptr), false
	case b.Device != dev:
		return fmt.Sprintf("on device %d, but the communicator is on device %d", b.Device, dev), false
	}
	return b.memoryReason()
}

// memoryReason checks the memory behind b: the allocation it was made
// from (asking the driver once for adopted memory), or the driver on every
// call for a [Buffer] written as a literal.
func (b Buffer) memoryReason() (string, bool) {
	a := b.alloc
	if a == nil {
		if _, err := cudabridge.CheckRange(b.Ptr, b.Bytes(), b.Device); err != nil {
			return driverReason(err), false
		}
		return "", false
	}
	if err := a.Verify(); err != nil {
		return driverReason(err), errors.Is(err, cuda.ErrClosed)
	}
	switch {
	case a.Dev != b.Device:
		return fmt.Sprintf("memory of cuda:%d, but the buffer says cuda:%d", a.Dev, b.Device), false
	case b.Ptr < a.Base || uint64(b.Ptr-a.Base) > a.Size || b.Bytes() > a.Size-uint64(b.Ptr-a.Base):
		return fmt.Sprintf("%d bytes at %#x run past the end of its allocation (%d bytes at %#x)", b.Bytes(), b.Ptr, a.Size, a.Base), false
	}
	return "", false
}

// driverReason is the reason of a cuda error about memory, without the
// cuda package's prefix.
func driverReason(err error) string {
	var arg *cuda.ArgError
	if errors.As(err, &arg) {
		return arg.Reason
	}
	return "cannot check the memory: " + err.Error()
}

// maxBufferBytes bounds a buffer's size (2^56 bytes: more than any device
// has, and below the address space), so that sizes, ends and offsets
// computed from a count never wrap.
const maxBufferBytes = 1 << 56

package nccl

import (
	"fmt"
	"math"

	"github.com/nccl4go/nccl/cuda"
)

// Buffer is device memory as NCCL takes it: a device address, a count of
// elements, their type and the device. It is a small value, free to pass:
// BufferOf turns any cuda.Slice into one, and RawBuffer wraps memory from
// another library (a PyTorch tensor's data_ptr, a CuPy array...). The zero
// Buffer is "no buffer": pass it where a rank does not use an argument
// (Broadcast's and Scatter's send off the root, Reduce's and Gather's recv
// off the root); everywhere else it is refused, as is a buffer of more than
// 2^56 bytes or one that would end past the top of the address space.
type Buffer struct {
	Ptr    uintptr  // device address of the first element
	Count  int      // number of elements
	Type   DataType // element type
	Device int      // CUDA device ordinal holding the memory
	freed  bool     // made from a cuda.Slice that was freed
}

// BufferOf is the Buffer of a device slice. A freed slice gives a Buffer
// every operation rejects.
func BufferOf[T cuda.Elem](s cuda.Slice[T]) Buffer {
	return Buffer{Ptr: s.Ptr(), Count: s.Len(), Type: DataType(cuda.DTypeOf[T]()), Device: int(s.Device()), freed: s.Freed()}
}

// RawBuffer wraps count elements of type t at device address ptr on device
// dev, made by another library.
func RawBuffer(ptr uintptr, count int, t DataType, dev int) Buffer {
	return Buffer{Ptr: ptr, Count: count, Type: t, Device: dev}
}

// Bytes is the size of the buffer in bytes.
func (b Buffer) Bytes() uint64 { return uint64(b.Count) * uint64(b.Type.Size()) }

// String reads "ncclFloat32[1024]@cuda:0:0x7f...".
func (b Buffer) String() string {
	return fmt.Sprintf("%s[%d]@cuda:%d:%#x", b.Type, b.Count, b.Device, b.Ptr)
}

// check validates b for an operation on device dev; it returns a reason, or
// "" when the buffer is usable. It allocates nothing on success.
func (b Buffer) check(dev int) string {
	switch {
	case b.freed:
		return "memory was freed"
	case b.Ptr == 0:
		return "null device address"
	case b.Count <= 0:
		return fmt.Sprintf("%d elements: empty", b.Count)
	case !b.Type.Valid():
		return fmt.Sprintf("unknown data type %d", int32(b.Type))
	case uint64(b.Count) > maxBufferBytes/uint64(b.Type.Size()):
		return fmt.Sprintf("%d elements of %d bytes: larger than any device memory (2^56 bytes)", b.Count, b.Type.Size())
	case uint64(b.Ptr) > math.MaxUint64-b.Bytes():
		return fmt.Sprintf("%d bytes at %#x: past the end of the address space", b.Bytes(), b.Ptr)
	case b.Device != dev:
		return fmt.Sprintf("on device %d, but the communicator is on device %d", b.Device, dev)
	}
	return ""
}

// maxBufferBytes bounds a buffer's size (2^56 bytes: more than any device
// has, and below the address space), so that sizes, ends and offsets
// computed from a count never wrap.
const maxBufferBytes = 1 << 56

package nccl

import (
	"fmt"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// MemAlloc allocates n elements of T on dev with NCCL's allocator
// (ncclMemAlloc): CUDA VMM (cuMem) memory that NCCL can register as a
// window or map for its peers, aligned as windows need. The slice's Free
// releases it with ncclMemFree (once; [ErrClosed] after). Not collective.
// NCCL 2.19.1.
func MemAlloc[T cuda.Elem](dev cuda.Device, n int) (cuda.Slice[T], error) {
	const op = "MemAlloc"
	size := cuda.DTypeOf[T]().Size()
	if n <= 0 {
		return cuda.Slice[T]{}, argErr(op, "n", "%d elements: need at least 1", n)
	}
	if uint64(n) > (1<<62)/uint64(size) {
		return cuda.Slice[T]{}, argErr(op, "n", "%d elements overflow", n)
	}
	p, err := memAlloc(op, dev, uint64(n)*uint64(size))
	if err != nil {
		return cuda.Slice[T]{}, err
	}
	return cuda.WrapOwned[T](p, n, dev, MemFree), nil
}

// MemAllocRaw allocates bytes on dev with ncclMemAlloc and returns the
// device address, for memory handed to another library. Free it with
// [MemFree]. Not collective. NCCL 2.19.1.
func MemAllocRaw(dev cuda.Device, bytes uint64) (uintptr, error) {
	if bytes == 0 {
		return 0, argErr("MemAllocRaw", "bytes", "0: need at least 1")
	}
	return memAlloc("MemAllocRaw", dev, bytes)
}

func memAlloc(op string, dev cuda.Device, bytes uint64) (uintptr, error) {
	if _, err := loaded(); err != nil {
		return 0, err
	}
	ctx, err := deviceContext(op, "dev", int(dev))
	if err != nil {
		return 0, err
	}
	// ncclMemAlloc allocates on the current device: the shim makes dev's
	// primary context current for the call.
	p, st := capi.MemAlloc(ctx, bytes)
	if err := statusErr(op, "ncclMemAlloc", st); err != nil {
		return 0, fmt.Errorf("%w (%d bytes on %v)", err, bytes, dev)
	}
	return p, nil
}

// MemFree frees memory of ncclMemAlloc (ncclMemFree), given its device
// address: for [MemAllocRaw]'s memory ([MemAlloc]'s slices free themselves).
// Not collective. NCCL 2.19.1.
func MemFree(ptr uintptr) error {
	if ptr == 0 {
		return argErr("MemFree", "ptr", "null device address")
	}
	if _, err := loaded(); err != nil {
		return err
	}
	return statusErr("MemFree", "ncclMemFree", capi.MemFree(ptr))
}

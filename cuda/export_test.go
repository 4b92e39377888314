package cuda

import (
	"errors"

	"github.com/nccl4go/nccl/internal/capi"
)

// MapChunks maps chunks separate physical allocations of the minimum
// granularity side by side into one reserved range of dev's address space
// (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess), as
// PyTorch's expandable segments and NCCL's cuMem allocations do. free
// unmaps and releases everything.
func MapChunks(dev Device, chunks int) (base uintptr, size uint64, free func() error, err error) {
	const op = "MapChunks"
	ctx, err := dev.context(op)
	if err != nil {
		return 0, 0, nil, err
	}
	g, r := capi.CuMemGetAllocationGranularity(ctx, int32(dev))
	if err := check(op, "cuMemGetAllocationGranularity", r); err != nil {
		return 0, 0, nil, err
	}
	size = g * uint64(chunks)
	base, r = capi.CuMemAddressReserve(ctx, size, g)
	if err := check(op, "cuMemAddressReserve", r); err != nil {
		return 0, 0, nil, err
	}
	var handles []uint64
	mapped := 0
	free = func() error {
		var errs []error
		if mapped > 0 {
			errs = append(errs, check(op, "cuMemUnmap", capi.CuMemUnmap(ctx, base, g*uint64(mapped))))
		}
		for _, h := range handles {
			errs = append(errs, check(op, "cuMemRelease", capi.CuMemRelease(ctx, h)))
		}
		errs = append(errs, check(op, "cuMemAddressFree", capi.CuMemAddressFree(ctx, base, size)))
		return errors.Join(errs...)
	}
	for i := range chunks {
		h, r := capi.CuMemCreate(ctx, int32(dev), g)
		if err := check(op, "cuMemCreate", r); err != nil {
			free()
			return 0, 0, nil, err
		}
		handles = append(handles, h)
		if err := check(op, "cuMemMap", capi.CuMemMap(ctx, base+uintptr(g)*uintptr(i), g, h)); err != nil {
			free()
			return 0, 0, nil, err
		}
		mapped++
	}
	if err := check(op, "cuMemSetAccess", capi.CuMemSetAccess(ctx, base, size, int32(dev))); err != nil {
		free()
		return 0, 0, nil, err
	}
	return base, size, free, nil
}

// CopyFromHostUnsynced is CopyFromHost as it was before it waited for the
// copy: cuMemcpyHtoD alone, which returns once the driver has staged src.
func CopyFromHostUnsynced[T Elem](s Slice[T], src []T) error {
	ctx, p, err := s.use("CopyFromHostUnsynced")
	if err != nil {
		return err
	}
	return check("CopyFromHostUnsynced", "cuMemcpyHtoD_v2", capi.CuMemcpyHtoD(ctx, p, hostPtr(src), s.Bytes()))
}

//go:build linux && cgo

package capi

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// PointerInfo is what the CUDA driver knows of a device address
// (cuPointerGetAttribute, four attributes). Each field is valid only when
// its result is 0 (CUDA_SUCCESS); the first failure stops the queries.
type PointerInfo struct {
	MemoryType uint32  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: 1 host, 2 device, 3 array, 4 unified
	Device     int32   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
	Base       uintptr // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
	Size       uint64  // CU_POINTER_ATTRIBUTE_RANGE_SIZE
}

// CU_POINTER_ATTRIBUTE_* values (cuda.h, CUDA 10.2 and later).
const (
	attrMemoryType    = 2
	attrDeviceOrdinal = 9
	attrRangeStart    = 11
	attrRangeSize     = 12
)

// CuPointerInfo queries the driver about p, with ctx current (0: the
// thread's): its memory type, device and the
// allocation that holds it. It returns the first CUresult that is not 0.
func CuPointerInfo(ctx, p uintptr) (PointerInfo, int32) {
	var (
		mt    C.uint
		dev   C.int
		start C.uintptr_t
		size  C.size_t
	)
	if r := C.capi_cuPointerGetAttribute(C.uintptr_t(ctx), unsafe.Pointer(&mt), attrMemoryType, C.uintptr_t(p)); r != 0 {
		return PointerInfo{}, int32(r)
	}
	if r := C.capi_cuPointerGetAttribute(C.uintptr_t(ctx), unsafe.Pointer(&dev), attrDeviceOrdinal, C.uintptr_t(p)); r != 0 {
		return PointerInfo{}, int32(r)
	}
	if r := C.capi_cuPointerGetAttribute(C.uintptr_t(ctx), unsafe.Pointer(&start), attrRangeStart, C.uintptr_t(p)); r != 0 {
		return PointerInfo{}, int32(r)
	}
	if r := C.capi_cuPointerGetAttribute(C.uintptr_t(ctx), unsafe.Pointer(&size), attrRangeSize, C.uintptr_t(p)); r != 0 {
		return PointerInfo{}, int32(r)
	}
	return PointerInfo{MemoryType: uint32(mt), Device: int32(dev), Base: uintptr(start), Size: uint64(size)}, 0
}

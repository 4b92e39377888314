//go:build linux && cgo

package capi

/*
#include <stdlib.h>
#include <string.h>
#include "devres.h"
*/
import "C"

import "unsafe"

// DevResource is a capi_dev_resource in C memory (devres.h): a requirement
// node and its handle, at fixed addresses.
type DevResource struct{ p *C.capi_dev_resource }

// NewDevResource allocates a zeroed one; Free releases it.
func NewDevResource() DevResource {
	return DevResource{(*C.capi_dev_resource)(C.calloc(1, C.sizeof_capi_dev_resource))}
}

// Free releases the C memory.
func (r DevResource) Free() { C.free(unsafe.Pointer(r.p)) }

// Addr is the node's address, for a requirements list.
func (r DevResource) Addr() uintptr { return uintptr(unsafe.Pointer(r.p)) }

// SetNext links the node to next (0: the end of the list).
func (r DevResource) SetNext(next uintptr) { r.p.req[0] = C.uint64_t(next) }

// Handle is the two 32-bit words of the handle.
func (r DevResource) Handle() [2]uint32 {
	return [2]uint32{uint32(r.p.handle[0]), uint32(r.p.handle[1])}
}

// LSABarrierRequirement is ncclLsaBarrierCreateRequirement into r; the
// result is NCCL's, Missing or NotLoaded.
func LSABarrierRequirement(team Team, nBarriers int32, r DevResource) int32 {
	t := C.capi_team{nRanks: C.int(team.NRanks), rank: C.int(team.Rank), stride: C.int(team.Stride)}
	return int32(C.capi_lsa_barrier_requirement(&t, C.int(nBarriers), r.p))
}

// LLA2ARequirement is ncclLLA2ACreateRequirement into r.
func LLA2ARequirement(nBlocks, nSlots int32, r DevResource) int32 {
	return int32(C.capi_lla2a_requirement(C.int(nBlocks), C.int(nSlots), r.p))
}

// LLA2ACalcSlots is ncclLLA2ACalcSlots; r is 0, Missing or NotLoaded.
func LLA2ACalcSlots(maxElts, maxEltSize int32) (int32, int32) {
	var out C.int
	r := C.capi_lla2a_calc_slots(C.int(maxElts), C.int(maxEltSize), &out)
	return int32(out), int32(r)
}

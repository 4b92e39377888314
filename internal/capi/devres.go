//go:build linux && cgo

package capi

/*
#include <stdlib.h>
#include <string.h>
#include "devres.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// liveRes counts the DevResource and TeamResource nodes allocated and not
// yet freed, for the leak tests.
var liveRes atomic.Int64

// LiveResources is how many DevResource and TeamResource nodes are
// allocated and not yet freed.
func LiveResources() int64 { return liveRes.Load() }

// DevResource is a capi_dev_resource in C memory (devres.h): a requirement
// node and its handle, at fixed addresses.
type DevResource struct{ p *C.capi_dev_resource }

// NewDevResource allocates a zeroed one; Free releases it.
func NewDevResource() DevResource {
	liveRes.Add(1)
	return DevResource{(*C.capi_dev_resource)(C.calloc(1, C.sizeof_capi_dev_resource))}
}

// Free releases the C memory.
func (r DevResource) Free() {
	liveRes.Add(-1)
	C.free(unsafe.Pointer(r.p))
}

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

// GINBarrierRequirement is ncclGinBarrierCreateRequirement on comm into r;
// the result is NCCL's, Missing or NotLoaded.
func GINBarrierRequirement(comm uintptr, team Team, nBarriers int32, r DevResource) int32 {
	t := C.capi_team{nRanks: C.int(team.NRanks), rank: C.int(team.Rank), stride: C.int(team.Stride)}
	return int32(C.capi_gin_barrier_requirement(C.uintptr_t(comm), &t, C.int(nBarriers), r.p))
}

// Requirement reads the node's bufferSize and ginSignalCount (the
// ncclDevResourceRequirements_t of 2.28.7 and later: bufferSize at byte 8,
// ginSignalCount at 32).
func (r DevResource) Requirement() (bufferSize uint64, ginSignalCount int32) {
	return uint64(r.p.req[1]), int32(uint32(r.p.req[4]))
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

// TeamResource is a capi_team_resource in C memory (devres.h).
type TeamResource struct{ p *C.capi_team_resource }

// NewTeamResource allocates one for team; Free releases it.
func NewTeamResource(team Team, multimem bool) TeamResource {
	liveRes.Add(1)
	r := TeamResource{(*C.capi_team_resource)(C.calloc(1, C.sizeof_capi_team_resource))}
	t := C.capi_team{nRanks: C.int(team.NRanks), rank: C.int(team.Rank), stride: C.int(team.Stride)}
	m := C.int(0)
	if multimem {
		m = 1
	}
	C.capi_team_resource_init(r.p, &t, m)
	return r
}

// Free releases the C memory.
func (r TeamResource) Free() {
	liveRes.Add(-1)
	C.free(unsafe.Pointer(r.p))
}

// Addr is the node's address, for a requirements list.
func (r TeamResource) Addr() uintptr { return uintptr(unsafe.Pointer(r.p)) }

// SetNext links the node to next (0: the end of the list).
func (r TeamResource) SetNext(next uintptr) { C.capi_team_resource_link(r.p, C.uintptr_t(next)) }

// MultimemBase is the handle's mcBasePtr.
func (r TeamResource) MultimemBase() uintptr { return uintptr(r.p.mcBasePtr) }

// GetMultimemDevicePointer is ncclGetMultimemDevicePointer; r is NCCL's
// result, Missing or NotLoaded.
func GetMultimemDevicePointer(win uintptr, offset uint64, mcBasePtr uintptr) (uintptr, Status) {
	var out C.uintptr_t
	r := C.capi_get_multimem_device_pointer(C.uintptr_t(win), C.size_t(offset), C.uintptr_t(mcBasePtr), &out)
	return uintptr(out), Status{Code: int32(r)}
}

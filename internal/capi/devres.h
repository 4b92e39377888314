// nccl4go C shim: NCCL's host helpers for device-API resources
// (nccl_device/ll_a2a.h). ncclLLA2ACalcSlots (NCCL 2.28.3) returns an int,
// not an ncclResult_t.
#ifndef NCCL4GO_DEVRES_H
#define NCCL4GO_DEVRES_H

#include <stddef.h>
#include <stdint.h>

#include "team.h"

// A device resource requirement in C memory, at a fixed address: the
// ncclDevResourceRequirements_t node (32 bytes in 2.28.3, 56 from 2.28.7;
// NCCL's *CreateRequirement helpers zero their own size and point
// outBufferHandle, or outGinSignalStart, into the handle), then the handle
// (ncclLsaBarrierHandle_t {bufHandle, nBarriers}, ncclLLA2AHandle_t
// {bufHandle, nSlots} or ncclGinBarrierHandle_t {signal0, bufHandle or
// unused}, 8 bytes), which ncclDevCommCreate's job writes when it
// completes.
typedef struct {
	uint64_t req[7];
	uint32_t handle[2];
} capi_dev_resource;

// capi_lsa_barrier_requirement is ncclLsaBarrierCreateRequirement(team,
// nBarriers, &r->handle, &r->req); capi_lla2a_requirement is
// ncclLLA2ACreateRequirement(nBlocks, nSlots, ...). Each returns NCCL's
// result, or CAPI_MISSING / CAPI_NOT_LOADED without calling.
int capi_lsa_barrier_requirement(const capi_team *team, int nBarriers, capi_dev_resource *r);
int capi_lla2a_requirement(int nBlocks, int nSlots, capi_dev_resource *r);
// capi_gin_barrier_requirement is ncclGinBarrierCreateRequirement(comm,
// team, nBarriers, &r->handle, &r->req) (NCCL 2.28.7). Its handle,
// ncclGinBarrierHandle_t, is {signal0, bufHandle} up to 2.29.3 and
// {signal0, unused} from 2.29.7: 8 bytes either way, signal0 first.
int capi_gin_barrier_requirement(uintptr_t comm, const capi_team *team, int nBarriers, capi_dev_resource *r);

// capi_lla2a_calc_slots calls ncclLLA2ACalcSlots(maxElts, maxEltSize) and
// stores its value in *out; it returns 0, or CAPI_MISSING / CAPI_NOT_LOADED
// without calling.
int capi_lla2a_calc_slots(int maxElts, int maxEltSize, int *out);

// A team requirement in C memory (ncclTeamRequirements_t, 32 bytes in
// every release from 2.28.3), then the ncclMultimemHandle_t
// (mcBasePtr) that ncclDevCommCreate's job writes when the node asks for
// multimem.
typedef struct {
	void *next;
	capi_team team;
	uint8_t multimem;
	void *outMultimemHandle;
} capi_team_req;

typedef struct {
	capi_team_req req;
	void *mcBasePtr;
} capi_team_resource;

// capi_team_resource_init fills r's node for team (multimem: 0 or 1),
// pointing outMultimemHandle at r's handle.
void capi_team_resource_init(capi_team_resource *r, const capi_team *team, int multimem);
// capi_team_resource_link sets r's next node (0: the end of the list).
void capi_team_resource_link(capi_team_resource *r, uintptr_t next);

// capi_get_multimem_device_pointer is ncclGetMultimemDevicePointer(win,
// offset, {mcBasePtr}, out) (NCCL 2.29.2; the handle by value).
int capi_get_multimem_device_pointer(uintptr_t win, size_t offset, uintptr_t mcBasePtr, uintptr_t *out);

#endif

// nccl4go C shim: NCCL's host helpers for device-API resources. See devres.h.
#include "devres.h"
#include "shim.h"

#include <stddef.h>

// 56 bytes hold the node of every release; the handle follows, 8-aligned.
_Static_assert(sizeof(capi_dev_resource) == 64 && offsetof(capi_dev_resource, handle) == 56, "capi_dev_resource layout");
// ncclTeamRequirements_t (nccl-abi.md §3.7): next 0, team 8, multimem 20,
// outMultimemHandle 24; 32 bytes.
_Static_assert(sizeof(capi_team_req) == 32 && offsetof(capi_team_req, team) == 8 &&
		       offsetof(capi_team_req, multimem) == 20 && offsetof(capi_team_req, outMultimemHandle) == 24,
	       "capi_team_req layout");

int capi_lla2a_calc_slots(int maxElts, int maxEltSize, int *out) {
	typedef int (*fn_t)(int, int);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclLLA2ACalcSlots);
	if (!f) {
		return capi_nccl_missing();
	}
	*out = f(maxElts, maxEltSize);
	return 0;
}

int capi_lsa_barrier_requirement(const capi_team *team, int nBarriers, capi_dev_resource *r) {
	typedef int (*fn_t)(capi_team, int, void *, void *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclLsaBarrierCreateRequirement);
	if (!f) {
		return capi_nccl_missing();
	}
	return f(*team, nBarriers, r->handle, r->req);
}

int capi_lla2a_requirement(int nBlocks, int nSlots, capi_dev_resource *r) {
	typedef int (*fn_t)(int, int, void *, void *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclLLA2ACreateRequirement);
	if (!f) {
		return capi_nccl_missing();
	}
	return f(nBlocks, nSlots, r->handle, r->req);
}

int capi_gin_barrier_requirement(uintptr_t comm, const capi_team *team, int nBarriers, capi_dev_resource *r) {
	typedef int (*fn_t)(void *, capi_team, int, void *, void *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclGinBarrierCreateRequirement);
	if (!f) {
		return capi_nccl_missing();
	}
	return f((void *)comm, *team, nBarriers, r->handle, r->req);
}

void capi_team_resource_init(capi_team_resource *r, const capi_team *team, int multimem) {
	r->req.next = NULL;
	r->req.team = *team;
	r->req.multimem = (uint8_t)(multimem != 0);
	r->req.outMultimemHandle = &r->mcBasePtr;
	r->mcBasePtr = NULL;
}

void capi_team_resource_link(capi_team_resource *r, uintptr_t next) { r->req.next = (void *)next; }

// ncclMultimemHandle_t: one pointer, passed by value.
typedef struct {
	void *mcBasePtr;
} capi_multimem;

int capi_get_multimem_device_pointer(uintptr_t win, size_t offset, uintptr_t mcBasePtr, uintptr_t *out) {
	typedef int (*fn_t)(void *, size_t, capi_multimem, void **);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclGetMultimemDevicePointer);
	if (!f) {
		return capi_nccl_missing();
	}
	capi_multimem mm = {(void *)mcBasePtr};
	void *p = NULL;
	int r = f((void *)win, offset, mm, &p);
	*out = (uintptr_t)p;
	return r;
}

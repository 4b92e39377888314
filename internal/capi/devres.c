// nccl4go C shim: NCCL's host helpers for device-API resources. See devres.h.
#include "devres.h"
#include "shim.h"

#include <stddef.h>

// 56 bytes hold the node of every release; the handle follows, 8-aligned.
_Static_assert(sizeof(capi_dev_resource) == 64 && offsetof(capi_dev_resource, handle) == 56, "capi_dev_resource layout");

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

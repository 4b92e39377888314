// nccl4go C shim: NCCL's host helpers for device-API resources. See devres.h.
#include "devres.h"
#include "shim.h"

int capi_lla2a_calc_slots(int maxElts, int maxEltSize, int *out) {
	typedef int (*fn_t)(int, int);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclLLA2ACalcSlots);
	if (!f) {
		return capi_nccl_missing();
	}
	*out = f(maxElts, maxEltSize);
	return 0;
}

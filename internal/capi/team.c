// nccl4go C shim: NCCL's host-side team functions. See team.h.
#include "team.h"
#include "shim.h"

int capi_team_get(int which, uintptr_t comm, capi_team *out) {
	static const int syms[] = {CAPI_SYM_ncclTeamWorld, CAPI_SYM_ncclTeamLsa, CAPI_SYM_ncclTeamRail};
	if (which < 0 || which > CAPI_TEAM_RAIL) {
		return 4; // ncclInvalidArgument
	}
	typedef capi_team (*fn_t)(void *);
	fn_t f = (fn_t)capi_nccl_fn(syms[which]);
	if (!f) {
		return capi_nccl_missing();
	}
	int g = capi_gate(comm);
	if (g) {
		return g;
	}
	*out = f((void *)comm);
	return 0;
}

int capi_team_rank_to(int to_lsa, uintptr_t comm, const capi_team *team, int rank, int *out) {
	typedef int (*fn_t)(void *, capi_team, int);
	fn_t f = (fn_t)capi_nccl_fn(to_lsa ? CAPI_SYM_ncclTeamRankToLsa : CAPI_SYM_ncclTeamRankToWorld);
	if (!f) {
		return capi_nccl_missing();
	}
	int g = capi_gate(comm);
	if (g) {
		return g;
	}
	*out = f((void *)comm, *team, rank);
	return 0;
}

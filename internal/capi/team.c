// nccl4go C shim: NCCL's host-side team functions. See team.h.
#include "team.h"
#include "shim.h"

// team_ready is 0 when f (a team function of the loaded NCCL, NULL if it
// lacks it) may be called on comm now, else the status to return.
static int team_ready(void *f, uintptr_t comm) {
	if (!f) {
		return capi_nccl_missing();
	}
	return capi_gate(comm);
}

int capi_team_get(int which, uintptr_t comm, capi_team *out) {
	static const int syms[] = {CAPI_SYM_ncclTeamWorld, CAPI_SYM_ncclTeamLsa, CAPI_SYM_ncclTeamRail,
				   CAPI_SYM_ncclTeamCftMultimem};
	if (which < 0 || which > CAPI_TEAM_CFT_MULTIMEM) {
		return 4; // ncclInvalidArgument
	}
	typedef capi_team (*fn_t)(void *);
	fn_t f = (fn_t)capi_nccl_fn(syms[which]);
	int g = team_ready((void *)f, comm);
	if (g) {
		return g;
	}
	*out = f((void *)comm);
	return 0;
}

int capi_team_rank_to(int to_lsa, uintptr_t comm, const capi_team *team, int rank, int *out) {
	typedef int (*fn_t)(void *, capi_team, int);
	fn_t f = (fn_t)capi_nccl_fn(to_lsa ? CAPI_SYM_ncclTeamRankToLsa : CAPI_SYM_ncclTeamRankToWorld);
	int g = team_ready((void *)f, comm);
	if (g) {
		return g;
	}
	*out = f((void *)comm, *team, rank);
	return 0;
}

int capi_team_cft(uintptr_t comm, int mode, capi_team *out) {
	typedef capi_team (*fn_t)(void *, int); // ncclCftTeamMode_t: an int-sized enum
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclTeamCft);
	int g = team_ready((void *)f, comm);
	if (g) {
		return g;
	}
	*out = f((void *)comm, mode);
	return 0;
}

capi_status capi_get_cft_device_le_info(uintptr_t win, size_t offset, int peer, const capi_team *team,
					uint32_t *leId, size_t *leOffset) {
	typedef int (*fn_t)(void *, size_t, int, capi_team, uint32_t *, size_t *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclGetCftDeviceLeInfo);
	capi_status s = {0, NULL};
	if (!f) {
		s.code = capi_nccl_missing();
		return s;
	}
	s.code = f((void *)win, offset, peer, *team, leId, leOffset);
	if (s.code != 0) {
		s.detail = capi_ncclGetLastError();
	}
	return s;
}

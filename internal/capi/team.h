// nccl4go C shim: NCCL's host-side team functions (ncclTeamWorld, Lsa,
// Rail, ncclTeamRankToWorld, ToLsa; NCCL 2.28.3; ncclTeamCft,
// ncclTeamCftMultimem; 2.31.2). They return ncclTeam_t
// (12 bytes, in two registers) or int, take ncclTeam_t by value, and check
// neither the communicator nor the rank: the Go side passes a live
// communicator and checks the rank. Each returns 0, CAPI_MISSING /
// CAPI_NOT_LOADED, or CAPI_PENDING (the gate: the communicator's previous
// operation is still in progress) without calling.
#ifndef NCCL4GO_TEAM_H
#define NCCL4GO_TEAM_H

#include <stddef.h>
#include <stdint.h>

#include "shim.h"

// ncclTeam_t: 12 bytes, alignment 4.
typedef struct {
	int nRanks;
	int rank;
	int stride;
} capi_team;

enum {
	CAPI_TEAM_WORLD,
	CAPI_TEAM_LSA,
	CAPI_TEAM_RAIL,
	CAPI_TEAM_CFT_MULTIMEM,
};

// capi_team_get: ncclTeamWorld, ncclTeamLsa, ncclTeamRail or
// ncclTeamCftMultimem (which).
int capi_team_get(int which, uintptr_t comm, capi_team *out);
// capi_team_cft: ncclTeamCft(comm, mode) (mode an ncclCftTeamMode_t).
int capi_team_cft(uintptr_t comm, int mode, capi_team *out);
// capi_get_cft_device_le_info: ncclGetCftDeviceLeInfo(win, offset, peer,
// *team, leId, leOffset), an ncclResult_t (NCCL 2.31.2). It takes no
// communicator: no gate.
capi_status capi_get_cft_device_le_info(uintptr_t win, size_t offset, int peer, const capi_team *team,
					uint32_t *leId, size_t *leOffset);
// capi_team_rank_to: ncclTeamRankToWorld (to_lsa 0) or ncclTeamRankToLsa.
int capi_team_rank_to(int to_lsa, uintptr_t comm, const capi_team *team, int rank, int *out);

#endif

// nccl4go C shim: NCCL's host-side team functions (ncclTeamWorld, Lsa,
// Rail, ncclTeamRankToWorld, ToLsa; NCCL 2.28.3). They return ncclTeam_t
// (12 bytes, in two registers) or int, take ncclTeam_t by value, and check
// neither the communicator nor the rank: the Go side passes a live
// communicator and checks the rank. Each returns 0, CAPI_MISSING /
// CAPI_NOT_LOADED, or CAPI_PENDING (the gate: the communicator's previous
// operation is still in progress) without calling.
#ifndef NCCL4GO_TEAM_H
#define NCCL4GO_TEAM_H

#include <stdint.h>

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
};

// capi_team_get: ncclTeamWorld, ncclTeamLsa or ncclTeamRail (which).
int capi_team_get(int which, uintptr_t comm, capi_team *out);
// capi_team_rank_to: ncclTeamRankToWorld (to_lsa 0) or ncclTeamRankToLsa.
int capi_team_rank_to(int to_lsa, uintptr_t comm, const capi_team *team, int rank, int *out);

#endif

//go:build linux && cgo

package capi

/*
#include "team.h"
*/
import "C"

// Team is ncclTeam_t.
type Team struct{ NRanks, Rank, Stride int32 }

// The teams of TeamGet.
const (
	TeamWorld = C.CAPI_TEAM_WORLD
	TeamLSA   = C.CAPI_TEAM_LSA
	TeamRail  = C.CAPI_TEAM_RAIL
	// TeamCFTMultimem is ncclTeamCftMultimem (NCCL 2.31.2).
	TeamCFTMultimem = C.CAPI_TEAM_CFT_MULTIMEM
)

// TeamGet is ncclTeamWorld, ncclTeamLsa, ncclTeamRail or
// ncclTeamCftMultimem (which) on comm;
// r is 0, Missing, NotLoaded or Pending.
func TeamGet(which int, comm uintptr) (Team, int32) {
	var t C.capi_team
	r := C.capi_team_get(C.int(which), C.uintptr_t(comm), &t)
	return Team{int32(t.nRanks), int32(t.rank), int32(t.stride)}, int32(r)
}

// TeamRankTo is ncclTeamRankToWorld (toLSA false) or ncclTeamRankToLsa.
func TeamRankTo(toLSA bool, comm uintptr, team Team, rank int) (int, int32) {
	t := C.capi_team{nRanks: C.int(team.NRanks), rank: C.int(team.Rank), stride: C.int(team.Stride)}
	var out C.int
	lsa := C.int(0)
	if toLSA {
		lsa = 1
	}
	r := C.capi_team_rank_to(lsa, C.uintptr_t(comm), &t, C.int(rank), &out)
	return int(out), int32(r)
}

// TeamCFT is ncclTeamCft(comm, mode); r is 0, Missing, NotLoaded or Pending.
func TeamCFT(comm uintptr, mode int32) (Team, int32) {
	var t C.capi_team
	r := C.capi_team_cft(C.uintptr_t(comm), C.int(mode), &t)
	return Team{int32(t.nRanks), int32(t.rank), int32(t.stride)}, int32(r)
}

// GetCftDeviceLeInfo is ncclGetCftDeviceLeInfo: the logical endpoint id and
// offset of the byte at offset in window win of member peer of team.
func GetCftDeviceLeInfo(win uintptr, offset uint64, peer int, team Team) (uint32, uint64, Status) {
	t := C.capi_team{nRanks: C.int(team.NRanks), rank: C.int(team.Rank), stride: C.int(team.Stride)}
	var id C.uint32_t
	var off C.size_t
	st := status(C.capi_get_cft_device_le_info(C.uintptr_t(win), C.size_t(offset), C.int(peer), &t, &id, &off))
	return uint32(id), uint64(off), st
}

//go:build !linux || !cgo

package capi

// Team is ncclTeam_t.
type Team struct{ NRanks, Rank, Stride int32 }

// The teams of TeamGet.
const (
	TeamWorld = 0
	TeamLSA   = 1
	TeamRail  = 2
	// TeamCFTMultimem is ncclTeamCftMultimem (NCCL 2.31.2).
	TeamCFTMultimem = 3
)

func TeamGet(which int, comm uintptr) (Team, int32) { return Team{}, NotLoaded }

func TeamRankTo(toLSA bool, comm uintptr, team Team, rank int) (int, int32) { return 0, NotLoaded }

func TeamCFT(comm uintptr, mode int32) (Team, int32) { return Team{}, NotLoaded }

func GetCftDeviceLeInfo(win uintptr, offset uint64, peer int, team Team) (uint32, uint64, Status) {
	return 0, 0, Status{Code: NotLoaded}
}

package nccl

import (
	"context"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// Team is a set of ranks of a communicator as NCCL's device API names them
// (ncclTeam_t): NRanks members, this rank's index Rank among them, and
// Stride, the distance in world ranks between consecutive members. Teams
// come from [Communicator.TeamWorld], [Communicator.TeamLSA],
// [Communicator.TeamRail], [Communicator.TeamCFT] and
// [Communicator.TeamCFTMultimem]; translate a member's index with
// [Communicator.TeamRankToWorld] and [Communicator.TeamRankToLSA].
type Team struct {
	NRanks int `json:"nranks"`
	Rank   int `json:"rank"`
	Stride int `json:"stride"`
}

// String reads "team{rank 1 of 4, stride 2}".
func (t Team) String() string {
	return fmt.Sprintf("team{rank %d of %d, stride %d}", t.Rank, t.NRanks, t.Stride)
}

// TeamWorld is the team of every rank of the communicator (ncclTeamWorld,
// NCCL 2.28.3): NRanks the communicator's size, Rank this rank, Stride 1.
// Local: not collective.
func (c *Communicator) TeamWorld() (Team, error) {
	return c.team("TeamWorld", "ncclTeamWorld", capi.SymTeamWorld, capi.TeamWorld, takeLive)
}

// TeamLSA is this rank's load/store-accessible team: the ranks whose
// memory it can reach by NVLink loads and stores (ncclTeamLsa, NCCL
// 2.28.3). NCCL initializes its device runtime for it on first use. Local:
// not collective.
func (c *Communicator) TeamLSA() (Team, error) {
	return c.team("TeamLSA", "ncclTeamLsa", capi.SymTeamLsa, capi.TeamLSA, takeWork)
}

// TeamRail is this rank's rail team: the ranks with the same index in the
// other LSA teams, Stride apart (ncclTeamRail, NCCL 2.28.3). Local: not
// collective.
func (c *Communicator) TeamRail() (Team, error) {
	return c.team("TeamRail", "ncclTeamRail", capi.SymTeamRail, capi.TeamRail, takeWork)
}

// TeamRankToWorld is the communicator rank of member rank of team t, a team
// of this rank on this communicator (ncclTeamRankToWorld, NCCL 2.28.3).
// Local: not collective. NCCL checks nothing: the binding refuses a rank
// outside the team, and a result outside the communicator (t is not one
// of its teams), with an error wrapping [ErrInvalidArgument].
func (c *Communicator) TeamRankToWorld(t Team, rank int) (int, error) {
	return c.teamRankTo("TeamRankToWorld", "ncclTeamRankToWorld", capi.SymTeamRankToWorld, false, t, rank, takeLive)
}

// TeamRankToLSA is the LSA team index of member rank of team t
// (ncclTeamRankToLsa, NCCL 2.28.3). Local: not collective. The binding
// checks rank and the result as [Communicator.TeamRankToWorld] does.
func (c *Communicator) TeamRankToLSA(t Team, rank int) (int, error) {
	return c.teamRankTo("TeamRankToLSA", "ncclTeamRankToLsa", capi.SymTeamRankToLsa, true, t, rank, takeWork)
}

func (c *Communicator) team(op, fn string, s capi.Sym, which int, tk take) (Team, error) {
	if _, err := require(s); err != nil {
		return Team{}, err
	}
	var raw capi.Team
	err := c.call(context.Background(), completed, op, fn, tk, nil, func(ptr uintptr) (capi.Status, error) {
		var r int32
		raw, r = capi.TeamGet(which, ptr)
		return capi.Status{Code: r}, nil
	})
	if err != nil {
		return Team{}, err
	}
	t := teamOf(raw)
	if t.NRanks <= 0 {
		return Team{}, emptyTeam(op, fn)
	}
	return t, nil
}

// emptyTeam is the error of an empty team from fn: ncclTeamLsa, Rail and
// the CFT teams return one when NCCL cannot initialize its device runtime.
func emptyTeam(op, fn string) error {
	return &Error{Op: op, Code: InternalError, Detail: fmt.Sprintf(
		"%s returned an empty team: NCCL could not initialize its device runtime for this communicator", fn)}
}

func (c *Communicator) teamRankTo(op, fn string, s capi.Sym, toLSA bool, t Team, rank int, tk take) (int, error) {
	if err := checkTeam(op, t, rank); err != nil {
		return 0, err
	}
	if _, err := require(s); err != nil {
		return 0, err
	}
	var out int
	err := c.call(context.Background(), completed, op, fn, tk, nil, func(ptr uintptr) (capi.Status, error) {
		raw := t.raw()
		var r int32
		out, r = capi.TeamRankTo(toLSA, ptr, raw, rank)
		return capi.Status{Code: r}, nil
	})
	if err != nil {
		return 0, err
	}
	limit := "the communicator"
	var size int
	if toLSA {
		lsa, err := c.TeamLSA()
		if err != nil {
			return 0, err
		}
		size, limit = lsa.NRanks, "the LSA team"
	} else {
		n, err := c.NRanks()
		if err != nil {
			return 0, err
		}
		size = n
	}
	if out < 0 || out >= size {
		return 0, argErr(op, "team", "%v, member %d: %s gives %d, outside %s of %d ranks: not a team of this rank on this communicator", t, rank, fn, out, limit, size)
	}
	return out, nil
}

// valid reports whether t can be a team: NRanks and Stride at least 1,
// Rank in [0, NRanks), every field within NCCL's int (a larger one would
// be truncated on its way to C), and its members no further apart than
// ranks of a communicator can be, (NRanks-1)×Stride below 2^31-1 (NCCL's
// rank arithmetic would wrap around, possibly onto a valid rank).
func (t Team) valid() bool {
	return t.NRanks >= 1 && t.NRanks <= maxInt32 && t.Stride >= 1 && t.Stride <= maxInt32 &&
		t.Rank >= 0 && t.Rank < t.NRanks && uint64(t.NRanks-1)*uint64(t.Stride) < uint64(maxInt32)
}

// raw is t as the shim passes it (valid: its fields fit NCCL's int).
func (t Team) raw() capi.Team {
	return capi.Team{NRanks: int32(t.NRanks), Rank: int32(t.Rank), Stride: int32(t.Stride)}
}

// teamOf is the Team of a capi.Team NCCL returned.
func teamOf(raw capi.Team) Team {
	return Team{NRanks: int(raw.NRanks), Rank: int(raw.Rank), Stride: int(raw.Stride)}
}

// checkTeam refuses what NCCL would compute garbage from.
func checkTeam(op string, t Team, rank int) error {
	switch {
	case !t.valid():
		return argErr(op, "team", "%v is not a team (get one from TeamWorld, TeamLSA or TeamRail)", t)
	case rank < 0 || rank >= t.NRanks:
		return argErr(op, "rank", "%d: outside the team's %d members", rank, t.NRanks)
	}
	return nil
}

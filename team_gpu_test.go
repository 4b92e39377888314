package nccl_test

import (
	"errors"
	"os"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/gputest"
)

// Teams of a one-rank communicator on a real GPU: every team is the rank
// itself, and its member 0 is world rank 0 and LSA rank 0.
func TestGPUTeams(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()
	one := nccl.Team{NRanks: 1, Rank: 0, Stride: 1}
	w, err := c.TeamWorld()
	if r < 22803 {
		wantUnsupported(t, "TeamWorld", err, "ncclTeamWorld", 22803)
		return
	}
	if err != nil || w != one {
		t.Errorf("NCCL %s: TeamWorld = %v, %v; want %v", r, w, err, one)
	}
	lsa, err := c.TeamLSA()
	if err != nil || lsa != one {
		t.Errorf("NCCL %s: TeamLSA = %v, %v; want %v", r, lsa, err, one)
	}
	rail, err := c.TeamRail()
	if err != nil || rail.NRanks != 1 || rail.Rank != 0 {
		t.Errorf("NCCL %s: TeamRail = %v, %v; want one member", r, rail, err)
	}
	if n, err := c.TeamRankToWorld(lsa, 0); err != nil || n != 0 {
		t.Errorf("NCCL %s: TeamRankToWorld(lsa, 0) = %d, %v", r, n, err)
	}
	if n, err := c.TeamRankToLSA(w, 0); err != nil || n != 0 {
		t.Errorf("NCCL %s: TeamRankToLSA(world, 0) = %d, %v", r, n, err)
	}
	t.Logf("NCCL %s: world %v, LSA %v, rail %v", r, w, lsa, rail)
}

// NCCL's parameters read back what the environment set (NCCL 2.30.3).
func TestGPUParams(t *testing.T) {
	r := gputest.Require(t)
	v, err := nccl.Param("NCCL_DEBUG_TIMESTAMP_FORMAT")
	if r < 23003 {
		wantUnsupported(t, "Param", err, "ncclParamGetParameter", 23003)
		if !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("error %v does not match ErrUnsupported", err)
		}
		return
	}
	// NCCL reads a parameter once, on first use: compare with what the
	// environment held when the process started (gpu.sh sets it).
	if want := os.Getenv("NCCL_DEBUG_TIMESTAMP_FORMAT"); want != "" && (err != nil || v != want) {
		t.Errorf("NCCL %s: Param(NCCL_DEBUG_TIMESTAMP_FORMAT) = %q, %v; want %q from the environment", r, v, err, want)
	}
	t.Logf("NCCL %s: NCCL_DEBUG_TIMESTAMP_FORMAT=%q, %v", r, v, err)
	keys, err := nccl.ParamKeys()
	if err != nil || len(keys) == 0 {
		t.Fatalf("ParamKeys = %v, %v", keys, err)
	}
	t.Logf("NCCL %s: %d keys: %v", r, len(keys), keys)
}

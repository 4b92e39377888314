package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Host-side teams (ncclTeamWorld, Lsa, Rail, ncclTeamRankToWorld, ToLsa;
// NCCL 2.28.3) against the fake NCCL, which computes them as NCCL's
// src/nccl_device/core.cc does, with FAKE_NCCL_LSA_TEAMS LSA teams of
// consecutive ranks.

func TestTeams(t *testing.T) {
	// Rank 5 of 8 in 2 LSA teams of 4: LSA index 1, rail index 1.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_LSA_TEAMS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 8, 5, nil)
		world, err := c.TeamWorld()
		if want := (nccl.Team{NRanks: 8, Rank: 5, Stride: 1}); err != nil || world != want {
			t.Errorf("TeamWorld = %v, %v; want %v", world, err, want)
		}
		lsa, err := c.TeamLSA()
		if want := (nccl.Team{NRanks: 4, Rank: 1, Stride: 1}); err != nil || lsa != want {
			t.Errorf("TeamLSA = %v, %v; want %v", lsa, err, want)
		}
		rail, err := c.TeamRail()
		if want := (nccl.Team{NRanks: 2, Rank: 1, Stride: 4}); err != nil || rail != want {
			t.Errorf("TeamRail = %v, %v; want %v", rail, err, want)
		}
		for _, tc := range []struct {
			team          nccl.Team
			member, world int
		}{
			{world, 0, 0}, {world, 7, 7}, {lsa, 0, 4}, {lsa, 3, 7}, {rail, 0, 1}, {rail, 1, 5},
		} {
			got, err := c.TeamRankToWorld(tc.team, tc.member)
			if err != nil || got != tc.world {
				t.Errorf("TeamRankToWorld(%v, %d) = %d, %v; want %d", tc.team, tc.member, got, err, tc.world)
			}
		}
		for member, want := range []int{0, 1, 2, 3} {
			if got, err := c.TeamRankToLSA(lsa, member); err != nil || got != want {
				t.Errorf("TeamRankToLSA(lsa, %d) = %d, %v; want %d", member, got, err, want)
			}
		}
		// The other member of the rail is in another LSA team: NCCL gives
		// an LSA index outside this rank's LSA team, which the binding
		// refuses.
		_, err = c.TeamRankToLSA(rail, 0)
		wantArgErr(t, err, "TeamRankToLSA", "team", "outside the LSA team")
		if s := lsa.String(); s != "team{rank 1 of 4, stride 1}" {
			t.Errorf("String = %q", s)
		}
	})
}

func TestTeamsBadInput(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1)
		_, err := c.TeamRankToWorld(world, 4)
		wantArgErr(t, err, "TeamRankToWorld", "rank", "outside the team's 4 members")
		_, err = c.TeamRankToWorld(world, -1)
		wantArgErr(t, err, "TeamRankToWorld", "rank")
		for _, bad := range []nccl.Team{{}, {NRanks: 2, Rank: 2, Stride: 1}, {NRanks: 2, Rank: 0, Stride: 0}, {NRanks: 2, Rank: -1, Stride: 1}} {
			_, err = c.TeamRankToLSA(bad, 0)
			wantArgErr(t, err, "TeamRankToLSA", "team", "not a team")
		}
		noNCCLCall(t, "ncclTeamRankToLsa")
		// A team of another communicator: rank 1's world team of 8 ranks
		// maps member 7 to world rank 7 of a 4-rank communicator.
		_, err = c.TeamRankToWorld(nccl.Team{NRanks: 8, Rank: 1, Stride: 1}, 7)
		wantArgErr(t, err, "TeamRankToWorld", "team", "outside the communicator of 4 ranks")
		// The null communicator, and a destroyed one, never reach NCCL
		// (which would dereference them).
		var null nccl.Communicator
		if _, err := null.TeamWorld(); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("TeamWorld on the null communicator: %v", err)
		}
		if _, err := null.TeamRankToWorld(world, 0); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("TeamRankToWorld on the null communicator: %v", err)
		}
		d := fakeComm(t, 1, 0, nil)
		if err := d.Destroy(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.TeamLSA(); err == nil {
			t.Error("TeamLSA on a destroyed communicator succeeded")
		}
	})
}

// NCCL returns an empty LSA or rail team, and -1 from ncclTeamRankToLsa,
// when it cannot initialize its device runtime.
func TestTeamsDeviceRuntimeFails(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_DEVR_FAIL=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		if _, err := c.TeamWorld(); err != nil {
			t.Errorf("TeamWorld: %v (it needs no device runtime)", err)
		}
		for name, f := range map[string]func() (nccl.Team, error){"TeamLSA": c.TeamLSA, "TeamRail": c.TeamRail} {
			_, err := f()
			var ne *nccl.Error
			if !errors.Is(err, nccl.ErrInternal) || !errors.As(err, &ne) || !strings.Contains(ne.Detail, "device runtime") {
				t.Errorf("%s: %v, want an internal error about the device runtime", name, err)
			}
		}
		_, err := c.TeamRankToLSA(nccl.Team{NRanks: 2, Rank: 0, Stride: 1}, 1)
		if err == nil {
			t.Error("TeamRankToLSA succeeded without a device runtime")
		}
	})
}

// A non-blocking communicator still being created: the team calls wait for
// it instead of reaching NCCL early.
func TestTeamsWaitForInit(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=3"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 1, &nccl.Config{Blocking: nccl.Ptr(false)})
		t.Cleanup(func() { c.Abort() })
		w, err := c.TeamWorld()
		if err != nil || w != (nccl.Team{NRanks: 2, Rank: 1, Stride: 1}) {
			t.Errorf("TeamWorld = %v, %v", w, err)
		}
	})
}

func TestTeamsUnsupported(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		_, err := c.TeamWorld()
		wantUnsupported(t, "TeamWorld", err, "ncclTeamWorld", 22803)
		_, err = c.TeamLSA()
		wantUnsupported(t, "TeamLSA", err, "ncclTeamLsa", 22803)
		_, err = c.TeamRail()
		wantUnsupported(t, "TeamRail", err, "ncclTeamRail", 22803)
		_, err = c.TeamRankToWorld(nccl.Team{NRanks: 1, Stride: 1}, 0)
		wantUnsupported(t, "TeamRankToWorld", err, "ncclTeamRankToWorld", 22803)
		_, err = c.TeamRankToLSA(nccl.Team{NRanks: 1, Stride: 1}, 0)
		wantUnsupported(t, "TeamRankToLSA", err, "ncclTeamRankToLsa", 22803)
	})
}

package nccl_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
	// A typed read: NCCL_DEBUG_TIMESTAMP_LEVELS is a uint32_t bitset of
	// 1<<level (src/debug.cc of 2.30.7; ncclDebugLogLevel: VERSION 1, WARN 2,
	// INFO 3, ABORT 4, TRACE 5), NCCL's default 1<<WARN.
	want, set := uint32(1<<2), os.Getenv("NCCL_DEBUG_TIMESTAMP_LEVELS")
	if set != "" {
		want = 0
		for _, name := range strings.Split(set, ",") {
			level := map[string]int{"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}[name]
			if level == 0 {
				t.Fatalf("NCCL_DEBUG_TIMESTAMP_LEVELS=%q: the test knows no level %q", set, name)
			}
			want |= 1 << level
		}
	}
	h, err := nccl.BindParam("NCCL_DEBUG_TIMESTAMP_LEVELS")
	if err != nil {
		t.Fatalf("BindParam: %v", err)
	}
	if got, err := h.Uint32(); err != nil || got != want {
		t.Errorf("NCCL %s: NCCL_DEBUG_TIMESTAMP_LEVELS (environment %q) reads %#x, %v; want %#x", r, set, got, err, want)
	}
	if _, err := h.Int64(); err == nil {
		t.Errorf("NCCL %s: a uint32_t parameter read as int64 gave no error", r)
	}
	keys, err := nccl.ParamKeys()
	if err != nil || len(keys) == 0 {
		t.Fatalf("ParamKeys = %v, %v", keys, err)
	}
	t.Logf("NCCL %s: %d keys: %v", r, len(keys), keys)
}

// Teams of two ranks sharing GPU 0 in one process (NCCL 2.30.3+ with
// NCCL_MULTI_RANK_GPU_ENABLE=1): each rank's teams agree with its
// communicator (see checkTeamsOf).
func TestGPUTeamsTwoRanksOneProcess(t *testing.T) {
	r := gputest.Require(t)
	if r < 22803 {
		t.Skipf("teams need NCCL 2.28.3, loaded %s (TestGPUTeams checks the refusal)", r)
	}
	if err := gputest.MultiRankGPU(); err != nil {
		t.Skipf("two ranks on one GPU in one process: %v", err)
	}
	comms, err := nccl.InitAll([]int{0, 0})
	if err != nil {
		t.Fatalf("InitAll([0 0]): %v", err)
	}
	defer func() {
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Errorf("DestroyAll: %v", err)
		}
	}()
	for rank, c := range comms {
		checkTeamsOf(t, c, rank, len(comms))
	}
}

// Teams of two ranks in two processes on GPU 0, told apart as two hosts by
// distinct NCCL_HOSTID (any release with teams): each rank is alone in its
// LSA team, and the rail holds both.
func TestGPUTeamsTwoProcesses(t *testing.T) {
	if r, err := nccl.Version(); err == nil && r < 22803 {
		t.Skipf("teams need NCCL 2.28.3, loaded %s (TestGPUTeams checks the refusal)", r)
	}
	gputest.RunRanks(t, 2, 90*time.Second, nil, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		c, err := nccl.Init(nranks, rank, id, nil)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		defer c.Destroy()
		lsa := checkTeamsOf(t, c, rank, nranks)
		if lsa.NRanks != 1 {
			t.Errorf("rank %d: LSA team %v across two hosts; want this rank alone", rank, lsa)
		}
	})
}

// checkTeamsOf checks a communicator's teams against the communicator: the
// world team is every rank with this rank at its own index; the LSA team
// holds this rank, has as many members as NCCL reports (nranks divided by
// the number of LSA teams, where the properties say it: NCCL 2.29.7), and
// translates to distinct world ranks; the rail holds one rank per LSA team.
func checkTeamsOf(t *testing.T, c *nccl.Communicator, rank, nranks int) nccl.Team {
	t.Helper()
	r, _ := nccl.Version()
	w, err := c.TeamWorld()
	if want := (nccl.Team{NRanks: nranks, Rank: rank, Stride: 1}); err != nil || w != want {
		t.Errorf("rank %d: TeamWorld = %v, %v; want %v", rank, w, err, want)
	}
	lsa, err := c.TeamLSA()
	if err != nil || lsa.NRanks < 1 || nranks%lsa.NRanks != 0 || lsa.Rank < 0 || lsa.Rank >= lsa.NRanks {
		t.Fatalf("rank %d: TeamLSA = %v, %v", rank, lsa, err)
	}
	if n, err := c.NumLSATeams(); err == nil {
		if lsa.NRanks*n != nranks {
			t.Errorf("rank %d: LSA team of %d ranks, but NCCL reports %d LSA teams of %d ranks", rank, lsa.NRanks, n, nranks)
		}
	} else if r >= 22907 {
		t.Errorf("rank %d: NumLSATeams on NCCL %s: %v", rank, r, err)
	}
	seen := map[int]bool{}
	for j := range lsa.NRanks {
		wr, err := c.TeamRankToWorld(lsa, j)
		if err != nil || wr < 0 || wr >= nranks || seen[wr] {
			t.Errorf("rank %d: TeamRankToWorld(%v, %d) = %d, %v; want a distinct rank in [0, %d)", rank, lsa, j, wr, err, nranks)
		}
		seen[wr] = true
	}
	if wr, err := c.TeamRankToWorld(lsa, lsa.Rank); err != nil || wr != rank {
		t.Errorf("rank %d: TeamRankToWorld(lsa, %d) = %d, %v; want this rank", rank, lsa.Rank, wr, err)
	}
	if lr, err := c.TeamRankToLSA(w, rank); err != nil || lr != lsa.Rank {
		t.Errorf("rank %d: TeamRankToLSA(world, %d) = %d, %v; want %d", rank, rank, lr, err, lsa.Rank)
	}
	rail, err := c.TeamRail()
	if err != nil || rail.NRanks != nranks/lsa.NRanks || rail.Rank < 0 || rail.Rank >= rail.NRanks {
		t.Errorf("rank %d: TeamRail = %v, %v; want %d members (one per LSA team)", rank, rail, err, nranks/lsa.NRanks)
	}
	t.Logf("NCCL %s rank %d/%d: world %v, LSA %v, rail %v", r, rank, nranks, w, lsa, rail)
	return lsa
}

// CFT on a real NCCL: every CFT call is refused with its first release
// (2.31.2) below it, the STyGIANet fork's 2.31.0 included. From 2.31.2 on
// a GPU without CFT (an H200): the flat and multicast CFT teams are the
// rank alone, and the logical-endpoint queries fail with an error wrapping
// ErrUnsupported.
func TestGPUCFT(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()
	flat, err := c.TeamCFT(nccl.CFTTeamFlat)
	if r < 23102 {
		wantCFTUnsupported(t, c, nil)
		return
	}
	one := nccl.Team{NRanks: 1, Rank: 0, Stride: 1}
	if err != nil || flat != one {
		t.Errorf("NCCL %s: TeamCFT(flat) = %v, %v; want %v", r, flat, err, one)
	}
	if mm, err := c.TeamCFTMultimem(); err != nil || mm != one {
		t.Errorf("NCCL %s: TeamCFTMultimem = %v, %v; want %v", r, mm, err, one)
	}
	mem, err := nccl.MemAlloc[float32](0, 1024)
	if err != nil {
		t.Fatalf("MemAlloc: %v", err)
	}
	defer mem.Free()
	w, err := c.RegisterWindow(nccl.BufferOf(mem), nccl.WindowCollSymmetric)
	if err != nil {
		t.Fatalf("RegisterWindow: %v", err)
	}
	defer w.Close()
	a, err := w.CFTPeerAddress(0, 0)
	if !errors.Is(err, nccl.ErrUnsupported) {
		t.Errorf("NCCL %s: CFTPeerAddress on a GPU without CFT = %v, %v; want an error wrapping ErrUnsupported", r, a, err)
	}
	t.Logf("NCCL %s: flat CFT team %v; CFTPeerAddress: %v", r, flat, err)
}

package nccl_test

import (
	"math"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// A DevResource or TeamResource that no constructor made (a composite
// literal) owns no C node: CreateDevComm refuses it instead of writing
// through a nil pointer.
func TestHostileZeroValueResources(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{{}}})
		wantArg(t, "a zero DevResource", err, "DevCommRequirements.Resources[0]")
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{{}}})
		wantArg(t, "a zero TeamResource", err, "DevCommRequirements.Teams[0]")
		if n := faketest.Calls(t, "ncclDevCommCreate"); n != 0 {
			t.Errorf("ncclDevCommCreate called %d times", n)
		}
	})
}

// A team whose fields do not fit NCCL's int is refused, not truncated.
func TestHostileTeamPastInt32(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		for _, team := range []nccl.Team{
			{NRanks: 2, Rank: 0, Stride: 1 << 32},
			{NRanks: 1<<32 + 2, Rank: 0, Stride: 1},
			{NRanks: math.MaxInt32 + 1, Rank: 0, Stride: 1},
		} {
			_, err := nccl.NewTeamResource(team, false)
			wantArg(t, "NewTeamResource", err, "team")
			_, err = nccl.LSABarrierResource(team, 1)
			wantArg(t, "LSABarrierResource", err, "team")
		}
		c := fakeComm(t, 2, 0, nil)
		_, err := c.TeamRankToWorld(nccl.Team{NRanks: 2, Rank: 0, Stride: 1<<32 + 1}, 1)
		wantArg(t, "TeamRankToWorld", err, "team")
	})
}

// A Config string with a NUL byte is refused: C would read only the part
// before it, silently naming another network or communicator.
func TestHostileConfigStringWithNUL(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			cfg *nccl.Config
			arg string
		}{
			{&nccl.Config{NetName: "Socket\x00IB"}, "Config.NetName"},
			{&nccl.Config{CommName: "job\x00other"}, "Config.CommName"},
		} {
			c, err := nccl.Init(1, 0, id, tc.cfg)
			if err == nil {
				c.Destroy()
			}
			wantArg(t, tc.arg, err, tc.arg)
		}
		if n := faketest.Calls(t, "ncclCommInitRankConfig"); n != 0 {
			t.Errorf("NCCL called %d times for refused configs", n)
		}
	})
}

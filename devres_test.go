package nccl_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// LLA2ACalcSlots returns NCCL's maxElts × ⌈maxEltSize/8⌉, refuses what
// NCCL would overflow or misread, and needs NCCL 2.28.3.
func TestFakeLLA2ACalcSlots(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		for _, tc := range []struct{ elts, size, want int }{
			{32, 16, 64}, {32, 17, 96}, {1, 1, 1}, {0, 8, 0}, {5, 0, 0},
		} {
			got, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
			if err != nil || got != tc.want {
				t.Errorf("LLA2ACalcSlots(%d, %d) = %d, %v; want %d", tc.elts, tc.size, got, err, tc.want)
			}
		}
		if got, err := nccl.LLA2ACalcSlots(1<<28-1, 64); err != nil || got != (1<<28-1)*8 {
			t.Errorf("the largest: %d, %v", got, err)
		}
		calls := faketest.Calls(t, "ncclLLA2ACalcSlots")
		for _, tc := range []struct {
			elts, size int
			arg        string
		}{{-1, 8, "maxElts"}, {8, -1, "maxEltSize"}, {1 << 28, 64, "maxElts"}, {math.MaxInt32, 9, "maxElts"}, {1, math.MaxInt32, "maxEltSize"}} {
			_, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
			wantArg(t, fmt.Sprintf("LLA2ACalcSlots(%d, %d)", tc.elts, tc.size), err, tc.arg)
		}
		if n := faketest.Calls(t, "ncclLLA2ACalcSlots"); n != calls {
			t.Errorf("NCCL called %d times for refused arguments", n-calls)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		_, err := nccl.LLA2ACalcSlots(1, 8)
		if !errors.Is(err, nccl.ErrUnsupported) || err.Error() != "nccl: ncclLLA2ACalcSlots: requires NCCL 2.28.3, loaded 2.27.3" {
			t.Errorf("on 2.27.3: %v", err)
		}
	})
}

// Resources: NCCL's helpers fill the requirement and the handle's count;
// ncclDevCommCreate writes each buffer handle when it makes the device
// communicator (the fake: offsets in units of 128 bytes, in list order);
// a resource serves one device communicator; bad arguments are refused
// before NCCL.
func TestFakeDevResources(t *testing.T) {
	for _, r := range []int{22803, 22807, 23007, 23102} {
		faketest.Run(t, faketest.Env{Release: r, Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
			c, team := fakeWorld(t, 4, 1)
			bar, err := nccl.LSABarrierResource(team, 3) // (3+4)*3*4 = 84 bytes: 1 unit
			if err != nil {
				t.Fatal(err)
			}
			a2a, err := nccl.LLA2AResource(2, 8) // 2*17*16 = 544 bytes: 5 units
			if err != nil {
				t.Fatal(err)
			}
			last, err := nccl.LLA2AResource(1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := bar.Handle(); !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("Handle before CreateDevComm: %v", err)
			}
			var d *nccl.DevComm
			err = nccl.Group(func() error {
				var err error
				d, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar, a2a, last}})
				if err != nil {
					return err
				}
				if _, _, err := bar.Handle(); err == nil {
					t.Error("Handle inside the group, before NCCL wrote it: no error")
				}
				return nil
			})
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			for _, tc := range []struct {
				r          *nccl.DevResource
				buf, count int
			}{{bar, 0, 3}, {a2a, 1, 8}, {last, 6, 1}} {
				h, n, err := tc.r.Handle()
				if err != nil || int(h) != tc.buf || n != tc.count {
					t.Errorf("%v: handle %d count %d, %v; want %d %d", tc.r, h, n, err, tc.buf, tc.count)
				}
			}
			var arg [8]byte
			if n, err := a2a.PutKernelArg(arg[:]); err != nil || n != 8 || binary.LittleEndian.Uint32(arg[:]) != 1 || binary.LittleEndian.Uint32(arg[4:]) != 8 {
				t.Errorf("PutKernelArg: % x, %d, %v", arg, n, err)
			}
			if _, err := a2a.PutKernelArg(arg[:7]); !errors.Is(err, cuda.ErrArgumentSpace) {
				t.Errorf("PutKernelArg into 7 bytes: %v", err)
			}
			// One device communicator per resource.
			_, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{a2a}})
			wantArg(t, "a resource used twice", err, "DevCommRequirements.Resources[0]")
			_, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{nil}})
			wantArg(t, "a nil resource", err, "DevCommRequirements.Resources[0]")
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := bar.Handle(); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Handle after the device communicator's Close: %v", err)
			}
			// A refusal before NCCL gives the claim back.
			fresh, _ := nccl.LLA2AResource(1, 1)
			_, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{fresh}, GINQueueDepth: nccl.Ptr(-1)})
			if err == nil {
				t.Fatal("a bad GINQueueDepth was accepted")
			}
			d2, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{fresh}})
			if err != nil {
				t.Fatalf("the resource after a refused CreateDevComm: %v", err)
			}
			d2.Close()
		})
	}
}

func TestFakeDevResourceArguments(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		good := nccl.Team{NRanks: 4, Rank: 1, Stride: 1}
		for _, tc := range []struct {
			team nccl.Team
			n    int
			arg  string
		}{
			{nccl.Team{}, 1, "team"}, {nccl.Team{NRanks: 2, Rank: 2, Stride: 1}, 1, "team"},
			{nccl.Team{NRanks: 2, Rank: -1, Stride: 1}, 1, "team"}, {nccl.Team{NRanks: 2, Rank: 0, Stride: 0}, 1, "team"},
			{good, 0, "nBarriers"}, {good, -2, "nBarriers"}, {good, math.MaxInt32, "nBarriers"},
		} {
			_, err := nccl.LSABarrierResource(tc.team, tc.n)
			wantArg(t, "LSABarrierResource", err, tc.arg)
		}
		for _, tc := range []struct {
			blocks, slots int
			arg           string
		}{{0, 1, "nBlocks"}, {1, 0, "nSlots"}, {-1, 1, "nBlocks"}, {1 << 20, 1 << 20, "nSlots"}, {1, math.MaxInt32, "nSlots"}} {
			_, err := nccl.LLA2AResource(tc.blocks, tc.slots)
			wantArg(t, "LLA2AResource", err, tc.arg)
		}
		if n := faketest.Calls(t, "ncclLsaBarrierCreateRequirement") + faketest.Calls(t, "ncclLLA2ACreateRequirement"); n != 0 {
			t.Errorf("NCCL called %d times for refused arguments", n)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		_, err := nccl.LSABarrierResource(nccl.Team{NRanks: 1, Stride: 1}, 1)
		wantUnsupported(t, "LSABarrierResource", err, "ncclLsaBarrierCreateRequirement", 22803)
		_, err = nccl.LLA2AResource(1, 1)
		wantUnsupported(t, "LLA2AResource", err, "ncclLLA2ACreateRequirement", 22803)
	})
}

// Teams: a multimem team gets its multicast handle when the device
// communicator is made; Window.MultimemPointerFor adds the window offset
// to it (ncclGetMultimemDevicePointer, 2.29.2); without multimem support
// the binding refuses before NCCL.
func TestFakeTeamResources(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_MULTIMEM=1", "FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		plain, _ := nccl.NewTeamResource(world, false)
		mm, err := nccl.NewTeamResource(world, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mm.MultimemHandle(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("MultimemHandle before CreateDevComm: %v", err)
		}
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{plain, mm}})
		if err != nil {
			t.Fatal(err)
		}
		base, err := mm.MultimemHandle()
		if err != nil || base != 0x6d630000000+1<<20 {
			t.Errorf("MultimemHandle = %#x, %v; want the fake's handle of the second team", base, err)
		}
		if _, err := plain.MultimemHandle(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("MultimemHandle of a team without multimem: %v", err)
		}
		var arg [8]byte
		if n, err := mm.PutKernelArg(arg[:]); n != 8 || err != nil || uintptr(binary.LittleEndian.Uint64(arg[:])) != base {
			t.Errorf("PutKernelArg: % x, %d, %v", arg, n, err)
		}
		buf := mustMemAlloc[float32](t, 0, 1024)
		w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := w.MultimemPointerFor(mm, 64); err != nil || p != base+64 {
			t.Errorf("MultimemPointerFor(64) = %#x, %v; want %#x", p, err, base+64)
		}
		_, err = w.MultimemPointerFor(mm, 4096)
		wantArg(t, "offset past the window", err, "offsetBytes")
		if _, err := w.MultimemPointerFor(plain, 0); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("MultimemPointerFor a team without multimem: %v", err)
		}
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{mm}})
		wantArg(t, "a team used twice", err, "DevCommRequirements.Teams[0]")
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.MultimemPointerFor(mm, 0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("MultimemPointerFor after the device communicator's Close: %v", err)
		}
		_, err = nccl.NewTeamResource(nccl.Team{NRanks: 2, Rank: 2, Stride: 1}, true)
		wantArg(t, "a bad team", err, "team")
	})
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		mm, _ := nccl.NewTeamResource(world, true)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{mm}})
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "Teams[0] asks for multimem") {
			t.Errorf("a multimem team without multimem support: %v", err)
		}
		if n := faketest.Calls(t, "ncclDevCommCreate"); n != 0 {
			t.Errorf("ncclDevCommCreate called %d times", n)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22807, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		mm, _ := nccl.NewTeamResource(world, true)
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{Teams: []*nccl.TeamResource{mm}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if base, err := mm.MultimemHandle(); err != nil || base != 0x6d630000000 {
			t.Errorf("2.28.7 (the list at offset 8): MultimemHandle = %#x, %v", base, err)
		}
	})
}

// NCCL lays its own barriers' buffers (the LSA barriers of
// LSABarrierCount, and of BarrierCount: its hybrid barriers from 2.30.3,
// folded in by max before) in the resource window before the caller's
// resources (ncclDevrCommCreateInternal of 2.28.3 to 2.30.7): a resource's
// buffer handle starts past them. 40 LSA barriers over the LSA team of 4:
// (3+4)×40×4 = 1120 bytes, 9 units of 128.
func TestFakeDevResourceHandlesAfterNCCLsBarriers(t *testing.T) {
	for _, r := range []int{22803, 22807, 22907, 23007, 23102} {
		faketest.Run(t, faketest.Env{Release: r}, func(t *testing.T) {
			c, team := fakeWorld(t, 4, 1)
			bar, err := nccl.LSABarrierResource(team, 1)
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}, LSABarrierCount: nccl.Ptr(40)})
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			defer d.Close()
			if h, _, err := bar.Handle(); err != nil || h != 9 {
				t.Errorf("NCCL %s: handle %d, %v; want 9 (after the 9 units of NCCL's 40 LSA barriers)", nccl.Release(r), h, err)
			}
		})
	}
}

package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/gputest"
)

// On a real NCCL: ncclLLA2ACalcSlots gives maxElts × ⌈maxEltSize/8⌉ (from
// 2.28.3), Versions reports the loaded library, and what a release lacks
// (2.31 requirement fields, ncclSetEncryption) is refused with the release
// that added it, before NCCL is called.
func TestGPUVersionGates(t *testing.T) {
	r := gputest.Require(t)
	v, err := nccl.Versions()
	if err != nil || v.Library != r || v.ABI != nccl.ABIRelease || !strings.Contains(v.Path, "libnccl") {
		t.Errorf("Versions = %v, %v", v, err)
	}
	t.Logf("%v", v)
	for _, tc := range []struct{ elts, size, want int }{{32, 16, 64}, {32, 17, 96}, {7, 1, 7}, {0, 8, 0}} {
		got, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
		switch {
		case r < 22803:
			wantUnsupported(t, "LLA2ACalcSlots", err, "ncclLLA2ACalcSlots", 22803)
		case err != nil || got != tc.want:
			t.Errorf("NCCL %s: LLA2ACalcSlots(%d, %d) = %d, %v; want %d", r, tc.elts, tc.size, got, err, tc.want)
		}
	}
	err = nccl.SetEncryption(nccl.EncryptionConfig{PSK: strings.Repeat("k", 32)})
	var le *nccl.UnknownLayoutError
	switch {
	case r < 23203:
		wantUnsupported(t, "SetEncryption", err, "ncclSetEncryption", 23203)
	case !errors.As(err, &le):
		t.Errorf("NCCL %s: SetEncryption: %v, want the unknown-layout refusal", r, err)
	}
	if r >= 23100 || r < 22803 {
		return
	}
	c := initOne(t)
	defer c.Destroy()
	_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINCustomStride: nccl.Ptr(2)})
	wantUnsupportedLoaded(t, "GINCustomStride", err, "ncclDevCommRequirements_t.ginCustomStride", 23100, r)
}

// A device communicator made with resources and a team on a real NCCL (one
// rank): NCCL fills the handles' counts and assigns the two resources
// distinct buffers. NCCL before 2.28.7 has no symmetric memory for one
// rank, so there it checks the clean refusal.
func TestGPUDevResources(t *testing.T) {
	r := gputest.Require(t)
	if r < 22803 {
		_, err := nccl.LLA2AResource(1, 1)
		wantUnsupported(t, "LLA2AResource", err, "ncclLLA2ACreateRequirement", 22803)
		return
	}
	c := initOne(t)
	defer c.Destroy()
	lsa, err := c.TeamLSA()
	if err != nil {
		t.Fatal(err)
	}
	bar, err := nccl.LSABarrierResource(lsa, 2)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := nccl.LLA2ACalcSlots(32, 16)
	if err != nil || slots != 64 {
		t.Fatalf("LLA2ACalcSlots(32, 16) = %d, %v", slots, err)
	}
	a2a, err := nccl.LLA2AResource(1, slots)
	if err != nil {
		t.Fatal(err)
	}
	team, err := nccl.NewTeamResource(lsa, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar, a2a}, Teams: []*nccl.TeamResource{team},
		LSABarrierCount: nccl.Ptr(1)})
	var se *nccl.SymmetricMemoryError
	if r < 22807 && errors.As(err, &se) {
		t.Logf("NCCL %s: no symmetric memory for one rank, as expected: %v", r, err)
		return
	}
	if err != nil {
		t.Fatalf("NCCL %s: CreateDevComm with resources: %v", r, err)
	}
	defer d.Close()
	hb, nb, err := bar.Handle()
	if err != nil || nb != 2 {
		t.Errorf("LSA barrier handle %d count %d, %v; want count 2", hb, nb, err)
	}
	ha, na, err := a2a.Handle()
	if err != nil || na != slots || ha == hb {
		t.Errorf("LLA2A handle %d count %d, %v; want count %d and a buffer other than the barrier's (%d)", ha, na, err, slots, hb)
	}
	t.Logf("NCCL %s: LSA barrier buffer handle %d, LLA2A buffer handle %d, devComm %d bytes", r, hb, ha, d.Size())
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A device communicator made with the 2.31 requirement fields on a real
// NCCL 2.31 (one rank): a custom GIN stride, an explicit GIN type and the
// loaded library's own ncclDevComm_t layout, whose size is the one the
// communicator's properties report (devCommRuntimeVersionSize). The
// refusal on older releases is TestGPUVersionGates's.
func TestGPUDevComm231Requirements(t *testing.T) {
	r := gputest.Require(t)
	if r < 23100 {
		t.Skipf("the 2.31 requirement fields need NCCL 2.31.0, loaded %s (TestGPUVersionGates checks the refusal)", r)
	}
	c := initOne(t)
	defer c.Destroy()
	p, err := c.Properties()
	if err != nil || p.DevCommRuntimeVersionSize == nil || *p.DevCommRuntimeVersionSize <= 0 {
		t.Fatalf("NCCL %s: Properties = %+v, %v; want devCommRuntimeVersionSize", r, p, err)
	}
	lsa, err := c.TeamLSA()
	if err != nil {
		t.Fatal(err)
	}
	bar, err := nccl.LSABarrierResource(lsa, 2)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}, LSABarrierCount: nccl.Ptr(1),
		GINCustomStride: nccl.Ptr(1), GINType: nccl.Ptr(nccl.GINNone), UseRuntimeVersion: nccl.Ptr(true)})
	if err != nil {
		t.Fatalf("NCCL %s: CreateDevComm with the 2.31 fields: %v", r, err)
	}
	if d.Size() != *p.DevCommRuntimeVersionSize {
		t.Errorf("NCCL %s: device communicator of %d bytes, properties say %d", r, d.Size(), *p.DevCommRuntimeVersionSize)
	}
	if _, n, err := bar.Handle(); err != nil || n != 2 {
		t.Errorf("LSA barrier count %d, %v; want 2", n, err)
	}
	t.Logf("NCCL %s: %v, declared %s, %d bytes", r, d, d.Declared(), d.Size())
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// The same without UseRuntimeVersion: the layout the binding declares.
	d, err = c.CreateDevComm(&nccl.DevCommRequirements{GINCustomStride: nccl.Ptr(1)})
	if err != nil {
		t.Fatalf("NCCL %s: CreateDevComm with GINCustomStride: %v", r, err)
	}
	t.Logf("NCCL %s: declared layout: %v, %d bytes", r, d, d.Size())
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A GIN barrier on a real NCCL: ncclGinBarrierCreateRequirement (2.28.7)
// asks for nBarriers × team ranks GIN signals and no buffer from 2.29.7
// (nBarriers signals and nBarriers × 16 bytes before), over a one-rank
// team and, where two ranks can share GPU 0 in one process, over a
// two-rank one. On a communicator without GIN (one H200 without a GIN
// network) a device communicator with it is refused cleanly: by the
// binding (an *ArgError without a GIN connection, an error wrapping
// ErrUnsupported with one), and by NCCL itself with ncclInvalidArgument
// when the binding's property check is off.
func TestGPUGINBarrierResource(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()
	one := nccl.Team{NRanks: 1, Rank: 0, Stride: 1}
	g, err := c.GINBarrierResource(one, 3)
	if r < 22807 {
		wantUnsupported(t, "GINBarrierResource", err, "ncclGinBarrierCreateRequirement", 22807)
		return
	}
	if err != nil {
		t.Fatalf("NCCL %s: GINBarrierResource: %v", r, err)
	}
	wantBuf, wantSig := uint64(0), 3
	if r < 22907 {
		wantBuf = 3 * 16
	}
	if b, n := nccl.DevResourceRequirement(g); b != wantBuf || n != wantSig {
		t.Errorf("NCCL %s: one-rank team, 3 barriers: bufferSize %d, ginSignalCount %d; want %d, %d", r, b, n, wantBuf, wantSig)
	}
	if err := gputest.MultiRankGPU(); err != nil {
		t.Logf("NCCL %s: no two-rank team: %v", r, err)
	} else {
		ginBarrierTwoRanks(t, r)
	}
	if r < 22907 {
		// Before 2.29.7 GIN needs GINForceEnable, which makes NCCL try to
		// connect GIN whatever the machine has: not tried here.
		t.Logf("NCCL %s: the device communicator is not tried before 2.29.7", r)
		return
	}
	p, err := c.Properties()
	if err != nil {
		t.Fatalf("Properties: %v", err)
	}
	if p.GINType != nccl.GINNone {
		t.Skipf("NCCL %s: this machine has GIN (%v): the refusal without it cannot be seen", r, p.GINType)
	}
	_, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}})
	wantArg(t, "a GIN barrier without a GIN connection", err, "DevCommRequirements.GINConnectionType")
	q := &nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}, GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)}
	_, err = c.CreateDevComm(q)
	if !errors.Is(err, nccl.ErrUnsupported) {
		t.Errorf("NCCL %s: a GIN barrier with GINConnectionFull on a communicator without GIN: %v, want an error wrapping ErrUnsupported", r, err)
	}
	var d *nccl.DevComm
	nccl.WithoutDevCommPropertyChecks(func() { d, err = c.CreateDevComm(q) })
	var ne *nccl.Error
	switch {
	case err == nil:
		d.Close()
		t.Errorf("NCCL %s made a device communicator with GIN on a communicator whose properties say it has none", r)
	case !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument:
		t.Errorf("NCCL %s's own answer: %v (%T), want ncclInvalidArgument", r, err, err)
	default:
		t.Logf("NCCL %s's own answer: %v", r, err)
	}
	// The communicator still works: a device communicator without GIN.
	lsa, err := nccl.LSABarrierResource(one, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err = c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{lsa}})
	if err != nil {
		t.Fatalf("NCCL %s: CreateDevComm after the refusals: %v", r, err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// ginBarrierTwoRanks checks the requirement of 3 GIN barriers over the
// world team of two ranks sharing GPU 0: 6 signals, no buffer (2.30.3+,
// where ranks may share a GPU).
func ginBarrierTwoRanks(t *testing.T, r nccl.Release) {
	comms, err := nccl.InitAll([]int{0, 0})
	if err != nil {
		t.Fatalf("InitAll([0 0]): %v", err)
	}
	defer func() {
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Errorf("DestroyAll: %v", err)
		}
	}()
	world, err := comms[1].TeamWorld()
	if err != nil {
		t.Fatal(err)
	}
	g, err := comms[1].GINBarrierResource(world, 3)
	if err != nil {
		t.Fatalf("NCCL %s: GINBarrierResource over %v: %v", r, world, err)
	}
	if b, n := nccl.DevResourceRequirement(g); n != 3*world.NRanks || b != 0 {
		t.Errorf("NCCL %s: two-rank team, 3 barriers: bufferSize %d, ginSignalCount %d; want 0, %d", r, b, n, 3*world.NRanks)
	}
}

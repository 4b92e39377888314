package nccl

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// LLA2ACalcSlots is ncclLLA2ACalcSlots: the number of slots the LSA
// low-latency all-to-all needs to move maxElts elements of at most
// maxEltSize bytes each (NCCL computes maxElts × ⌈maxEltSize/8⌉): the
// value for [DevCommRequirements.LSALLA2ASlotCount]. Negative arguments, or
// a result past NCCL's int, are an [*ArgError] (NCCL checks neither).
// Needs no communicator; not collective. NCCL 2.28.3.
func LLA2ACalcSlots(maxElts, maxEltSize int) (int, error) {
	const op = "LLA2ACalcSlots"
	if _, err := require(capi.SymLLA2ACalcSlots); err != nil {
		return 0, err
	}
	switch {
	case maxElts < 0:
		return 0, argErr(op, "maxElts", "%d: must not be negative", maxElts)
	case maxEltSize < 0:
		return 0, argErr(op, "maxEltSize", "%d: must not be negative", maxEltSize)
	case maxEltSize > 1<<31-8:
		return 0, argErr(op, "maxEltSize", "%d: at most 2^31-8 (NCCL rounds it up to a multiple of 8 in an int)", maxEltSize)
	case maxElts > 1<<31-1 || uint64(maxElts)*uint64((maxEltSize+7)/8) > 1<<31-1:
		return 0, argErr(op, "maxElts", "%d elements of %d bytes: %d slots or more overflow NCCL's int", maxElts, maxEltSize, 1<<31)
	}
	n, r := capi.LLA2ACalcSlots(int32(maxElts), int32(maxEltSize))
	if r != 0 {
		return 0, statusErr(op, "ncclLLA2ACalcSlots", capi.Status{Code: r})
	}
	return int(n), nil
}

// DevResource is a device-API resource that a device communicator
// allocates for kernels, made by [LSABarrierResource] or [LLA2AResource]
// and listed in [DevCommRequirements.Resources] (the
// ncclDevResourceRequirements_t list). NCCL's helper fills the requirement
// and the resource's handle in C memory at fixed addresses;
// ncclDevCommCreate copies the requirement during the call and writes the
// handle's buffer handle when the device communicator is made (at a
// group's end, or later on a non-blocking communicator). A resource serves
// one device communicator: [Communicator.CreateDevComm] refuses one that
// another call already passed to NCCL. Its handle is readable while that
// device communicator is ready. Safe for concurrent use.
type DevResource struct {
	served
	mem capi.DevResource
}

// served is what a requirement handed to ncclDevCommCreate shares: which
// device communicator it serves.
type served struct {
	kind    string                  // "LSA barrier", "LLA2A", "team"
	claimed atomic.Bool             // passed to a CreateDevComm
	dc      atomic.Pointer[DevComm] // the device communicator it serves
}

// lockServed locks the device communicator s serves, once it is ready; it
// returns with the communicator's mu held only on success.
func (s *served) lockServed(op, what string) (*DevComm, error) {
	d := s.dc.Load()
	if d == nil {
		return nil, fmt.Errorf("nccl: %s: the %s requirement serves no device communicator yet (pass it in DevCommRequirements.%s to CreateDevComm): %w",
			op, s.kind, what, ErrInvalidUsage)
	}
	if err := d.lock(op); err != nil {
		return nil, err
	}
	return d, nil
}

// article is the indefinite article of s.kind as read aloud: "an LSA
// barrier", "an LLA2A", "a team".
func (s *served) article() string {
	if s.kind == "team" {
		return "a"
	}
	return "an"
}

func newDevResource(kind string) *DevResource {
	r := &DevResource{served: served{kind: kind}, mem: capi.NewDevResource()}
	runtime.AddCleanup(r, func(m capi.DevResource) { m.Free() }, r.mem)
	return r
}

// LSABarrierResource is ncclLsaBarrierCreateRequirement: nBarriers LSA
// memory barriers over team (for kernels' ncclLsaBarrierSession), a
// buffer of (3 + team.NRanks) × nBarriers 32-bit words. Its handle is an
// ncclLsaBarrierHandle_t {bufHandle, nBarriers}. Needs no communicator;
// not collective. NCCL 2.28.3.
func LSABarrierResource(team Team, nBarriers int) (*DevResource, error) {
	const op = "LSABarrierResource"
	if _, err := require(capi.SymLsaBarrierCreateRequirement); err != nil {
		return nil, err
	}
	switch {
	case !team.valid():
		return nil, argErr(op, "team", "%+v: not a team (NRanks and Stride at least 1, Rank in [0, NRanks), (NRanks-1)×Stride below 2^31-1)", team)
	case nBarriers < 1:
		return nil, argErr(op, "nBarriers", "%d: at least 1", nBarriers)
	case uint64(nBarriers)*uint64(3+team.NRanks) > 1<<31-1:
		return nil, argErr(op, "nBarriers", "%d barriers of %d ranks: past NCCL's int", nBarriers, team.NRanks)
	}
	r := newDevResource("LSA barrier")
	t := capi.Team{NRanks: int32(team.NRanks), Rank: int32(team.Rank), Stride: int32(team.Stride)}
	if st := capi.LSABarrierRequirement(t, int32(nBarriers), r.mem); st != 0 {
		return nil, statusErr(op, "ncclLsaBarrierCreateRequirement", capi.Status{Code: st})
	}
	return r, nil
}

// LLA2AResource is ncclLLA2ACreateRequirement: the buffer of an LSA
// low-latency all-to-all for nBlocks blocks of nSlots slots each (see
// [LLA2ACalcSlots]), nBlocks × (1 + 2 × nSlots) × 16 bytes. Its handle is
// an ncclLLA2AHandle_t {bufHandle, nSlots}. Needs no communicator; not
// collective. NCCL 2.28.3.
func LLA2AResource(nBlocks, nSlots int) (*DevResource, error) {
	const op = "LLA2AResource"
	if _, err := require(capi.SymLLA2ACreateRequirement); err != nil {
		return nil, err
	}
	switch {
	case nBlocks < 1:
		return nil, argErr(op, "nBlocks", "%d: at least 1", nBlocks)
	case nSlots < 1:
		return nil, argErr(op, "nSlots", "%d: at least 1", nSlots)
	case nSlots > 1<<30 || uint64(nBlocks)*uint64(1+2*nSlots)*16 > 1<<31-1:
		return nil, argErr(op, "nSlots", "%d blocks of %d slots: past NCCL's int", nBlocks, nSlots)
	}
	r := newDevResource("LLA2A")
	if st := capi.LLA2ARequirement(int32(nBlocks), int32(nSlots), r.mem); st != 0 {
		return nil, statusErr(op, "ncclLLA2ACreateRequirement", capi.Status{Code: st})
	}
	return r, nil
}

// Handle returns the resource's handle: the buffer handle NCCL assigned
// (the resource's offset in the device communicator's resource window, in
// units of 128 bytes) and the count it was made with (barriers or slots).
// Before the device communicator is made, or after it is closed, it is an
// error.
func (r *DevResource) Handle() (bufHandle uint32, count int, err error) {
	const op = "DevResource.Handle"
	h, err := r.readHandle(op)
	return h[0], int(h[1]), err
}

// PutKernelArg writes the handle (8 bytes, ncclLsaBarrierHandle_t or
// ncclLLA2AHandle_t) as a kernel parameter passed by value. It implements
// [cuda.KernelArg].
func (r *DevResource) PutKernelArg(dst []byte) (int, error) {
	const op = "DevResource.PutKernelArg"
	h, err := r.readHandle(op)
	if err != nil {
		return 0, err
	}
	if len(dst) < 8 {
		return 0, fmt.Errorf("nccl: %s: %d bytes of room, the handle has 8: %w", op, len(dst), cuda.ErrArgumentSpace)
	}
	binary.LittleEndian.PutUint32(dst, h[0])
	binary.LittleEndian.PutUint32(dst[4:], h[1])
	return 8, nil
}

// readHandle reads the handle under the device communicator's lock, once
// it is ready.
func (r *DevResource) readHandle(op string) ([2]uint32, error) {
	if r == nil {
		return [2]uint32{}, argErr(op, "resource", "nil")
	}
	if r.mem.Addr() == 0 {
		return [2]uint32{}, argErr(op, "resource", "not made by LSABarrierResource or LLA2AResource")
	}
	d, err := r.lockServed(op, "Resources")
	if err != nil {
		return [2]uint32{}, err
	}
	defer d.c.mu.Unlock()
	return r.mem.Handle(), nil
}

// String reads "nccl.DevResource(LSA barrier)".
func (r *DevResource) String() string {
	if r == nil {
		return "nccl.DevResource(nil)"
	}
	return "nccl.DevResource(" + r.kind + ")"
}

// claimAll claims each requirement of rs (a field of
// DevCommRequirements) for one device communicator; release gives the
// claims back (the call did not reach NCCL).
func claimAll(op, field string, rs []*served) (release func(), err error) {
	var got []*served
	release = func() {
		for _, r := range got {
			r.claimed.Store(false)
		}
	}
	for i, r := range rs {
		arg := fmt.Sprintf("DevCommRequirements.%s[%d]", field, i)
		if r == nil {
			release()
			return nil, argErr(op, arg, "nil")
		}
		if !r.claimed.CompareAndSwap(false, true) {
			release()
			return nil, argErr(op, arg, "%s %s requirement already passed to a CreateDevComm (one serves one device communicator: make another)", r.article(), r.kind)
		}
		got = append(got, r)
	}
	return release, nil
}

// linkRequirements claims q's resources and teams and links each kind into
// its C list; the heads are the lists' addresses (0: none).
func (q *DevCommRequirements) linkRequirements(op string) (resHead, teamHead uintptr, release func(), err error) {
	if q == nil {
		return 0, 0, func() {}, nil
	}
	rs := make([]*served, len(q.Resources))
	for i, r := range q.Resources {
		if r != nil {
			if r.mem.Addr() == 0 {
				return 0, 0, nil, argErr(op, fmt.Sprintf("DevCommRequirements.Resources[%d]", i), "a DevResource not made by LSABarrierResource or LLA2AResource")
			}
			rs[i] = &r.served
		}
	}
	releaseRes, err := claimAll(op, "Resources", rs)
	if err != nil {
		return 0, 0, nil, err
	}
	ts := make([]*served, len(q.Teams))
	for i, t := range q.Teams {
		if t != nil {
			if t.mem.Addr() == 0 {
				releaseRes()
				return 0, 0, nil, argErr(op, fmt.Sprintf("DevCommRequirements.Teams[%d]", i), "a TeamResource not made by NewTeamResource")
			}
			ts[i] = &t.served
		}
	}
	releaseTeams, err := claimAll(op, "Teams", ts)
	if err != nil {
		releaseRes()
		return 0, 0, nil, err
	}
	for i := len(q.Resources) - 1; i >= 0; i-- {
		q.Resources[i].mem.SetNext(resHead)
		resHead = q.Resources[i].mem.Addr()
	}
	for i := len(q.Teams) - 1; i >= 0; i-- {
		q.Teams[i].mem.SetNext(teamHead)
		teamHead = q.Teams[i].mem.Addr()
	}
	return resHead, teamHead, func() { releaseRes(); releaseTeams() }, nil
}

// served lists the requirements of q, which the device communicator made
// from q serves.
func (q *DevCommRequirements) served() []*served {
	if q == nil {
		return nil
	}
	var out []*served
	for _, r := range q.Resources {
		out = append(out, &r.served)
	}
	for _, t := range q.Teams {
		out = append(out, &t.served)
	}
	return out
}

// TeamResource asks a device communicator to set up a team
// (ncclTeamRequirements_t, the teamRequirementsList): with multimem, NCCL
// makes a multicast object for the team's ranks and, when it makes the
// device communicator, writes its ncclMultimemHandle_t, which
// [Window.MultimemPointerFor] and kernels take. Made by [NewTeamResource],
// listed in [DevCommRequirements.Teams]; it serves one device
// communicator. Safe for concurrent use.
type TeamResource struct {
	served
	team     Team
	multimem bool
	mem      capi.TeamResource
}

// NewTeamResource makes a team requirement for team (multimem: also a
// multicast object, which needs the communicator's
// [Properties.MultimemSupport]). It calls no NCCL function; the device
// communicator it is passed to needs NCCL 2.28.3.
func NewTeamResource(team Team, multimem bool) (*TeamResource, error) {
	if !team.valid() {
		return nil, argErr("NewTeamResource", "team", "%+v: not a team (NRanks and Stride at least 1, Rank in [0, NRanks), (NRanks-1)×Stride below 2^31-1)", team)
	}
	t := &TeamResource{served: served{kind: "team"}, team: team, multimem: multimem,
		mem: capi.NewTeamResource(capi.Team{NRanks: int32(team.NRanks), Rank: int32(team.Rank), Stride: int32(team.Stride)}, multimem)}
	runtime.AddCleanup(t, func(m capi.TeamResource) { m.Free() }, t.mem)
	return t, nil
}

// MultimemHandle is the team's ncclMultimemHandle_t (its mcBasePtr, a
// device address), once the device communicator is made. A team made
// without multimem is an error wrapping [ErrInvalidUsage].
func (t *TeamResource) MultimemHandle() (uintptr, error) {
	p, _, err := t.multimemHandle("TeamResource.MultimemHandle")
	return p, err
}

// multimemHandle is MultimemHandle, with the communicator whose device
// communicator the team serves.
func (t *TeamResource) multimemHandle(op string) (uintptr, *Communicator, error) {
	if t == nil {
		return 0, nil, argErr(op, "team", "nil")
	}
	if t.mem.Addr() == 0 {
		return 0, nil, argErr(op, "team", "not made by NewTeamResource")
	}
	if !t.multimem {
		return 0, nil, fmt.Errorf("nccl: %s: the team requirement was made without multimem: %w", op, ErrInvalidUsage)
	}
	d, err := t.lockServed(op, "Teams")
	if err != nil {
		return 0, nil, err
	}
	defer d.c.mu.Unlock()
	return t.mem.MultimemBase(), d.c, nil
}

// PutKernelArg writes the ncclMultimemHandle_t (8 bytes) as a kernel
// parameter passed by value. It implements [cuda.KernelArg].
func (t *TeamResource) PutKernelArg(dst []byte) (int, error) {
	p, err := t.MultimemHandle()
	if err != nil {
		return 0, err
	}
	if len(dst) < 8 {
		return 0, fmt.Errorf("nccl: TeamResource.PutKernelArg: %d bytes of room, the handle has 8: %w", len(dst), cuda.ErrArgumentSpace)
	}
	binary.LittleEndian.PutUint64(dst, uint64(p))
	return 8, nil
}

// String reads "nccl.TeamResource({NRanks:2 Rank:0 Stride:1}, multimem)".
func (t *TeamResource) String() string {
	if t == nil {
		return "nccl.TeamResource(nil)"
	}
	m := "no multimem"
	if t.multimem {
		m = "multimem"
	}
	return fmt.Sprintf("nccl.TeamResource(%+v, %s)", t.team, m)
}

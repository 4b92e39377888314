package nccl

import (
	"context"
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
// allocates for kernels, made by [LSABarrierResource], [LLA2AResource] or
// [Communicator.GINBarrierResource] and listed in
// [DevCommRequirements.Resources] (the ncclDevResourceRequirements_t
// list). NCCL's helper fills the requirement and the resource's handle in
// C memory at fixed addresses; ncclDevCommCreate copies the requirement
// during the call and writes the handle (a buffer handle, or a GIN
// barrier's first signal) when the device communicator is made (at a
// group's end, or later on a non-blocking communicator). A resource serves
// one device communicator: [Communicator.CreateDevComm] refuses one that
// another call already passed to NCCL. Its handle is readable while that
// device communicator is ready ([DevResource.Handle], or
// [DevResource.GINSignal] for a GIN barrier). Safe for concurrent use.
type DevResource struct {
	served
	mem   capi.DevResource
	owner *Communicator // a GIN barrier's communicator (nil: any)
}

// The kinds of DevResource.
const (
	kindLSABarrier = "LSA barrier"
	kindLLA2A      = "LLA2A"
	kindGINBarrier = "GIN barrier"
)

// served is what a requirement handed to ncclDevCommCreate shares: which
// device communicator it serves.
type served struct {
	kind    string                  // "LSA barrier", "LLA2A", "GIN barrier", "team"
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
// barrier", "an LLA2A", "a GIN barrier", "a team".
func (s *served) article() string {
	if s.kind == "team" || s.kind == kindGINBarrier {
		return "a"
	}
	return "an"
}

func newDevResource(kind string) *DevResource {
	r := &DevResource{served: served{kind: kind}, mem: capi.NewDevResource()}
	runtime.AddCleanup(r, func(m capi.DevResource) { m.Free() }, r.mem)
	return r
}

// notATeam is the error of a resource's team that is not one (valid's
// rules).
func notATeam(op string, team Team) error {
	return argErr(op, "team", "%+v: not a team (NRanks and Stride at least 1, Rank in [0, NRanks), (NRanks-1)×Stride below 2^31-1)", team)
}

// checkBarriers checks a barrier resource's arguments: a valid team, at
// least one barrier, and nBarriers × perBarrier (words or signals) within
// NCCL's int (tooMany says what is past it).
func checkBarriers(op string, team Team, nBarriers, perBarrier int, tooMany string) error {
	switch {
	case !team.valid():
		return notATeam(op, team)
	case nBarriers < 1:
		return argErr(op, "nBarriers", "%d: at least 1", nBarriers)
	case nBarriers > 1<<31-1 || uint64(nBarriers)*uint64(perBarrier) > 1<<31-1: // the first bound keeps the product from wrapping
		return argErr(op, "nBarriers", "%d barriers of %d ranks: %s", nBarriers, team.NRanks, tooMany)
	}
	return nil
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
	if err := checkBarriers(op, team, nBarriers, 3+team.NRanks, "past NCCL's int"); err != nil {
		return nil, err
	}
	r := newDevResource(kindLSABarrier)
	t := team.raw()
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
	case nBlocks > 1<<31-1: // keeps the product below from wrapping
		return nil, argErr(op, "nBlocks", "%d: past NCCL's int", nBlocks)
	case nSlots > 1<<30 || uint64(nBlocks)*uint64(1+2*nSlots)*16 > 1<<31-1:
		return nil, argErr(op, "nSlots", "%d blocks of %d slots: past NCCL's int", nBlocks, nSlots)
	}
	r := newDevResource(kindLLA2A)
	if st := capi.LLA2ARequirement(int32(nBlocks), int32(nSlots), r.mem); st != 0 {
		return nil, statusErr(op, "ncclLLA2ACreateRequirement", capi.Status{Code: st})
	}
	return r, nil
}

// GINBarrierResource is ncclGinBarrierCreateRequirement: nBarriers GIN
// (network) barriers over team, a team of this rank on c such as
// [Communicator.TeamWorld]'s or [Communicator.TeamRail]'s (for kernels'
// ncclGinBarrierSession). From NCCL 2.29.7 they take nBarriers ×
// team.NRanks GIN signals and no buffer; NCCL 2.28.7 to 2.29.3 gave them
// nBarriers signals and a buffer of nBarriers × 16 bytes. Its handle is
// its first signal ([DevResource.GINSignal]); [DevResource.PutKernelArg]
// writes the ncclGinBarrierHandle_t. It serves a device communicator of
// c only. NCCL counts a device communicator's GIN signals in an int:
// [Communicator.CreateDevComm] refuses resources whose signals, with
// [DevCommRequirements.GINSignalCount], add up past it (an [*ArgError]).
//
// GIN barriers need GPU-initiated networking. The device communicator
// must ask for a GIN connection: [DevCommRequirements.GINConnectionType]
// [GINConnectionFull] or [GINConnectionRail] (NCCL 2.29.7 and later), or
// [DevCommRequirements.GINForceEnable] (before, where NCCL makes no GIN
// for a resource alone); [Communicator.CreateDevComm] refuses a GIN
// barrier without either (an [*ArgError]). And the communicator must have
// GIN ([Properties.GINType], or [Properties.RailedGINType] for a RAIL
// connection, not [GINNone]): where it has none, as on a single H200
// without a GIN-capable network, CreateDevComm refuses with an error
// wrapping [ErrUnsupported] (NCCL itself would fail with
// ncclInvalidArgument). Local: not collective. NCCL 2.28.7.
func (c *Communicator) GINBarrierResource(team Team, nBarriers int) (*DevResource, error) {
	const op = "GINBarrierResource"
	if _, err := require(capi.SymGinBarrierCreateRequirement); err != nil {
		return nil, err
	}
	if err := checkBarriers(op, team, nBarriers, team.NRanks, "their GIN signals are past NCCL's int"); err != nil {
		return nil, err
	}
	n, rank, _, err := c.ident(op)
	if err != nil {
		return nil, err
	}
	// The team's members are world ranks rank + (i - team.Rank) × Stride.
	first := int64(rank) - int64(team.Rank)*int64(team.Stride)
	last := first + int64(team.NRanks-1)*int64(team.Stride)
	if first < 0 || last >= int64(n) {
		return nil, argErr(op, "team", "%v: its members would be world ranks %d to %d, outside this communicator's %d ranks: not a team of this rank on this communicator", team, first, last, n)
	}
	r := newDevResource(kindGINBarrier)
	r.owner = c
	t := team.raw()
	err = c.call(context.Background(), completed, op, "ncclGinBarrierCreateRequirement", takeLive, nil, func(ptr uintptr) (capi.Status, error) {
		return capi.Status{Code: capi.GINBarrierRequirement(ptr, t, int32(nBarriers), r.mem)}, nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Handle returns the handle of an LSA barrier or LLA2A resource: the
// buffer handle NCCL assigned (the resource's offset in the device
// communicator's resource window, in units of 128 bytes) and the count it
// was made with (barriers or slots). Before the device communicator is
// made, or after it is closed, it is an error. A GIN barrier's handle is
// its first signal, which [DevResource.GINSignal] reads: Handle refuses it
// with an error wrapping [ErrInvalidUsage].
func (r *DevResource) Handle() (bufHandle uint32, count int, err error) {
	const op = "DevResource.Handle"
	if r != nil && r.kind == kindGINBarrier {
		return 0, 0, fmt.Errorf("nccl: %s: a GIN barrier's handle is its first GIN signal, not a buffer and a count: use GINSignal: %w", op, ErrInvalidUsage)
	}
	h, err := r.readHandle(op)
	return h[0], int(h[1]), err
}

// GINSignal is the first of the GIN signals NCCL gave a GIN barrier made by
// [Communicator.GINBarrierResource] (ncclGinBarrierHandle_t.signal0): its
// barriers use the signals from there on, after the
// [DevCommRequirements.GINSignalCount] signals (ids from 0) and those of
// the barriers NCCL makes itself and of the resources listed before it.
// Before the device communicator is made, or after it is closed, it is an
// error; for another kind of resource, an error wrapping
// [ErrInvalidUsage].
func (r *DevResource) GINSignal() (uint32, error) {
	const op = "DevResource.GINSignal"
	if r != nil && r.mem.Addr() != 0 && r.kind != kindGINBarrier {
		return 0, fmt.Errorf("nccl: %s: %s %s resource has no GIN signals (its handle is a buffer: use Handle): %w", op, r.article(), r.kind, ErrInvalidUsage)
	}
	h, err := r.readHandle(op)
	return h[0], err
}

// PutKernelArg writes the handle as a kernel parameter passed by value:
// the 8 bytes of an ncclLsaBarrierHandle_t {bufHandle, nBarriers},
// ncclLLA2AHandle_t {bufHandle, nSlots} or ncclGinBarrierHandle_t
// {signal0, then bufHandle up to NCCL 2.29.3, unused from 2.29.7}. It
// implements [cuda.KernelArg].
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
		return [2]uint32{}, argErr(op, "resource", "not made by LSABarrierResource, LLA2AResource or GINBarrierResource")
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

// linkRequirements claims q's resources and teams for a device
// communicator of c and links each kind into its C list; the heads are the
// lists' addresses (0: none).
func (q *DevCommRequirements) linkRequirements(op string, c *Communicator) (resHead, teamHead uintptr, release func(), err error) {
	if q == nil {
		return 0, 0, func() {}, nil
	}
	rs := make([]*served, len(q.Resources))
	for i, r := range q.Resources {
		if r != nil {
			arg := fmt.Sprintf("DevCommRequirements.Resources[%d]", i)
			if r.mem.Addr() == 0 {
				return 0, 0, nil, argErr(op, arg, "a DevResource not made by LSABarrierResource, LLA2AResource or GINBarrierResource")
			}
			if r.owner != nil && r.owner != c {
				return 0, 0, nil, argErr(op, arg, "a GIN barrier made by another communicator's GINBarrierResource: its team is that communicator's")
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
		return nil, notATeam("NewTeamResource", team)
	}
	t := &TeamResource{served: served{kind: "team"}, team: team, multimem: multimem,
		mem: capi.NewTeamResource(team.raw(), multimem)}
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

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
	case maxElts > 1<<31-1 || maxEltSize > 1<<31-8 || uint64(maxElts)*uint64((maxEltSize+7)/8) > 1<<31-1:
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
	kind    string // "LSA barrier" or "LLA2A"
	mem     capi.DevResource
	claimed atomic.Bool             // passed to a CreateDevComm
	dc      atomic.Pointer[DevComm] // the device communicator it serves
}

func newDevResource(kind string) *DevResource {
	r := &DevResource{kind: kind, mem: capi.NewDevResource()}
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
	case team.NRanks < 1 || team.Rank < 0 || team.Rank >= team.NRanks || team.Stride < 1:
		return nil, argErr(op, "team", "%+v: not a team (NRanks at least 1, Rank in [0, NRanks), Stride at least 1)", team)
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
	d := r.dc.Load()
	if d == nil {
		return [2]uint32{}, fmt.Errorf("nccl: %s: the %s resource serves no device communicator yet (pass it in DevCommRequirements.Resources to CreateDevComm): %w",
			op, r.kind, ErrInvalidUsage)
	}
	if err := d.lock(op); err != nil {
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

// claimResources links rs into one C list and claims each for one device
// communicator; release gives the claims back (the call did not reach
// NCCL). head is the list's address, 0 for none.
func claimResources(op string, rs []*DevResource) (head uintptr, release func(), err error) {
	var got []*DevResource
	release = func() {
		for _, r := range got {
			r.claimed.Store(false)
		}
	}
	for i, r := range rs {
		if r == nil {
			release()
			return 0, nil, argErr(op, fmt.Sprintf("DevCommRequirements.Resources[%d]", i), "nil")
		}
		if !r.claimed.CompareAndSwap(false, true) {
			release()
			return 0, nil, argErr(op, fmt.Sprintf("DevCommRequirements.Resources[%d]", i),
				"%s: already passed to a CreateDevComm (a resource serves one device communicator: make another)", r)
		}
		got = append(got, r)
	}
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].mem.SetNext(head)
		head = rs[i].mem.Addr()
	}
	return head, release, nil
}

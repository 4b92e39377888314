//go:build !linux || !cgo

package capi

func LLA2ACalcSlots(maxElts, maxEltSize int32) (int32, int32) { return 0, NotLoaded }

// DevResource is a capi_dev_resource in C memory (none without cgo).
type DevResource struct{}

func NewDevResource() DevResource                                           { return DevResource{} }
func (r DevResource) Free()                                                 {}
func (r DevResource) Addr() uintptr                                         { return 0 }
func (r DevResource) SetNext(next uintptr)                                  {}
func (r DevResource) Handle() [2]uint32                                     { return [2]uint32{} }
func LSABarrierRequirement(team Team, nBarriers int32, r DevResource) int32 { return NotLoaded }
func LLA2ARequirement(nBlocks, nSlots int32, r DevResource) int32           { return NotLoaded }

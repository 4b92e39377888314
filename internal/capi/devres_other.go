//go:build !linux || !cgo

package capi

func LLA2ACalcSlots(maxElts, maxEltSize int32) (int32, int32) { return 0, NotLoaded }

// LiveResources is how many resource nodes are allocated (none without cgo).
func LiveResources() int64 { return 0 }

// DevResource is a capi_dev_resource in C memory (none without cgo).
type DevResource struct{}

func NewDevResource() DevResource                                           { return DevResource{} }
func (r DevResource) Free()                                                 {}
func (r DevResource) Addr() uintptr                                         { return 0 }
func (r DevResource) SetNext(next uintptr)                                  {}
func (r DevResource) Handle() [2]uint32                                     { return [2]uint32{} }
func LSABarrierRequirement(team Team, nBarriers int32, r DevResource) int32 { return NotLoaded }
func LLA2ARequirement(nBlocks, nSlots int32, r DevResource) int32           { return NotLoaded }
func GINBarrierRequirement(comm uintptr, team Team, nBarriers int32, r DevResource) int32 {
	return NotLoaded
}
func (r DevResource) Requirement() (bufferSize uint64, ginSignalCount int32) { return 0, 0 }

// TeamResource is a capi_team_resource in C memory (none without cgo).
type TeamResource struct{}

func NewTeamResource(team Team, multimem bool) TeamResource { return TeamResource{} }
func (r TeamResource) Free()                                {}
func (r TeamResource) Addr() uintptr                        { return 0 }
func (r TeamResource) SetNext(next uintptr)                 {}
func (r TeamResource) MultimemBase() uintptr                { return 0 }
func GetMultimemDevicePointer(win uintptr, offset uint64, mcBasePtr uintptr) (uintptr, Status) {
	return 0, Status{Code: NotLoaded}
}

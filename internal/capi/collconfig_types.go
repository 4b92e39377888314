package capi

// CollIn is what CollConfigCall passes for one ncclCollConfig_t: its
// values, flat (the shim's capi_coll_in; collconfig.go checks the layout).
// A string is an offset and a length in the call's string block; AlgLen -1
// is a NULL algSelection.
type CollIn struct {
	Size, Version                              uint32 // bytes of ncclCollConfig_t to send, the declared version
	MinCTAs, MaxCTAs, NVLSCTAs, CGAClusterSize int32
	AlgOff, AlgLen                             int32
	ForceAlgSelection, CTAPolicy               int32
	UserProfilerTag                            uint64
	LaunchCompletionEvent                      uintptr
	NExt                                       int32 // entries of the ext list
}

// ExtIn is one ncclConfigExt_t entry (the shim's capi_ext_in): Kind says
// which member of NCCL's union is set.
type ExtIn struct {
	VendorID, OptionID, Kind, IntVal int32
	PtrVal                           uintptr
	StrOff, StrLen                   int32
}

// The members of ncclConfigExt_t's value (ExtIn.Kind), and the most entries
// and string bytes one call passes (they live on the shim's stack).
const (
	ExtInt      = 0
	ExtStr      = 1
	ExtPtr      = 2
	ExtMax      = 64
	CollStrMax  = 16384
	CollKindMax = 8 // the collectives of CollConfigCall, AllReduce to Scatter
)

// The collectives of CollConfigCall (the shim's CAPI_COLL_ values).
const (
	CollAllReduce = iota
	CollBroadcast
	CollReduce
	CollAllGather
	CollReduceScatter
	CollAllToAll
	CollGather
	CollScatter
)

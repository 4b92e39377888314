//go:generate go run gen_syms.go
//go:generate go run gen_stub.go

package capi

import "strconv"

// The shim's status codes (negative; library results are 0 or positive).
const (
	Missing   int32 = -1 // the loaded library lacks the symbol
	NotLoaded int32 = -2 // no library is loaded (or no cgo in this build)
	Pending   int32 = -3 // the communicator's previous operation is still in progress: not called
	Held      int32 = -4 // another thread's open group holds the communicator's work: not called
	Orphaned  int32 = -5 // a thread ended inside a group holding the communicator's work: not called
)

// Magic numbers and sizes of NCCL's structs.
const (
	APIMagic     = 0xcafebeef // NCCL_API_MAGIC: config, properties, requirements
	SimInfoMagic = 0x74685283 // ncclSimInfo_t
	// UndefInt is NCCL_CONFIG_UNDEF_INT: "not set, use NCCL's default".
	UndefInt = -2147483648
	// DevCommSize is the storage given to ncclDevCommCreate.
	DevCommSize = 256
)

// Status is the result of an NCCL call: NCCL's ncclResult_t, or one of the
// shim's codes; Detail is ncclGetLastError, copied inside the failing call.
type Status struct {
	Code   int32
	Detail string
}

// Sym names one NCCL function of the shim's list (shim.h): the constants,
// SymName and SymSince are in zsyms.go, generated from that list.
type Sym int

// String is the C name of the function.
func (s Sym) String() string {
	if uint(s) < NumSyms {
		return SymName[s]
	}
	return "Sym(" + strconv.Itoa(int(s)) + ")"
}

// SymInfo describes one NCCL function of the shim's list.
type SymInfo struct {
	Name    string
	Since   int // first NCCL release that has it, as MMmmpp
	Present bool
}

// WaitSignalDesc is ncclWaitSignalDesc_t.
type WaitSignalDesc struct {
	OpCnt, Peer, SigIdx, Ctx int32
}

// Config mirrors ncclConfig_t as of 2.32.3. Int fields hold UndefInt when
// unset; empty strings are NULL. A config declaring a version older than
// [ConfigV23203] is sent without NvlsHostMode (112 bytes).
type Config struct {
	Version             uint32
	Blocking            int32
	CGAClusterSize      int32
	MinCTAs             int32
	MaxCTAs             int32
	NetName             string
	SplitShare          int32
	TrafficClass        int32
	CommName            string
	CollnetEnable       int32
	CTAPolicy           int32
	ShrinkShare         int32
	NvlsCTAs            int32
	NChannelsPerNetPeer int32
	NvlinkCentricSched  int32
	GraphUsageMode      int32
	NumRmaCtx           int32
	MaxP2pPeers         int32
	GraphStreamOrdering int32
	LaunchOrderImplicit int32
	NumRmaSig           int32
	RmaEagerInit        int32
	HostCftMode         int32
	NvlsHostMode        int32
}

// ConfigV23203 is the first declared version whose ncclConfig_t the shim
// sends in full (120 bytes, with nvlsHostMode): NCCL 2.32.3.
const ConfigV23203 = 23203

// NewConfig returns a config with every field unset, as NCCL's
// NCCL_CONFIG_INITIALIZER makes it, declaring version.
func NewConfig(version uint32) Config {
	u := int32(UndefInt)
	return Config{
		Version: version, Blocking: u, CGAClusterSize: u, MinCTAs: u, MaxCTAs: u, SplitShare: u,
		TrafficClass: u, CollnetEnable: u, CTAPolicy: u, ShrinkShare: u, NvlsCTAs: u,
		NChannelsPerNetPeer: u, NvlinkCentricSched: u, GraphUsageMode: u, NumRmaCtx: u,
		MaxP2pPeers: u, GraphStreamOrdering: u, LaunchOrderImplicit: u, NumRmaSig: u, RmaEagerInit: u,
		HostCftMode: u, NvlsHostMode: u,
	}
}

// Props is ncclCommProperties_t decoded from either layout.
type Props struct {
	Rank, NRanks, CUDADev, NVMLDev    int32
	DeviceAPISupport, MultimemSupport bool
	GINType                           int32
	NLsaTeams                         int32
	HostRMASupport                    bool
	RailedGINType                     int32
	// 2.31 (PropsV23100).
	CommHash                  uint64
	GINMinStride              int32
	GINConnectionType         int32
	GINSupport                [64]bool
	DevCommRuntimeVersionSize uint64
}

// DevCommReqs holds every field of ncclDevCommRequirements_t up to 2.31.2.
type DevCommReqs struct {
	LsaMultimem              bool
	BarrierCount             int32
	LsaBarrierCount          int32
	RailGinBarrierCount      int32
	LsaLLA2ABlockCount       int32
	LsaLLA2ASlotCount        int32
	GinForceEnable           bool
	GinContextCount          int32
	GinSignalCount           int32
	GinCounterCount          int32
	GinConnectionType        int32
	GinExclusiveContexts     bool
	GinQueueDepth            int32
	GinTrafficClass          int32
	WorldGinBarrierCount     int32
	GinStrongSignalsRequired bool
	GinVaSignalsRequired     bool
	GinCustomStride          int32 // 2.31.0
	GinType                  int32 // 2.31.0
	UseRuntimeVersion        bool  // 2.31.0
	CftCaps                  int32 // 2.31.2
	CftBarrierCount          int32 // 2.31.2
}

// ncclCommProperties_t layout families.
const (
	PropsV22902 = iota // 2.29.2-2.29.3: 40 bytes, a 1-byte ginType
	PropsV22907        // 2.29.7-2.30.7: 56 bytes
	PropsV23100        // 2.31.0 onwards (declared): 144 bytes
)

// Requirement layout families.
const (
	ReqsV22803    = iota // 2.28.3: 24 bytes, no header
	ReqsV22807           // 2.28.7-2.28.9: 56 bytes, no header
	ReqsVersioned        // 2.29.2 onwards: header, size by version
)

// Layout is the size and field offsets of one C struct as the shim declares
// it, for the tests that pin them against NCCL's releases.
type Layout struct {
	Size    uintptr
	Offsets map[string]uintptr
}

// What WaitStreams returns: every stream done, the time slice used up, a
// stream query failed, a communicator reported an error (the shim's
// CAPI_WAIT_ values; 0 is none of them).
const (
	WaitDone  = 1
	WaitSlice = 2
	WaitCUDA  = 3
	WaitNCCL  = 4
)

// ParamKind selects a typed getter of ParamGetInt.
type ParamKind int

// The typed getters: ncclParamGetI8 ... ncclParamGetU64.
const (
	ParamI8 ParamKind = iota
	ParamI16
	ParamI32
	ParamI64
	ParamU8
	ParamU16
	ParamU32
	ParamU64
)

// LaunchConfig is capi_launch_cfg.
type LaunchConfig struct {
	Grid        [3]uint32
	Block       [3]uint32
	SharedMem   uint32
	Cluster     [3]uint32
	Cooperative int32
}

// Package versions is the binding's table of NCCL version facts: for each
// thing of NCCL's that the binding uses and that not every supported release
// has (a field of a versioned struct, a flag value, a data type, a
// behaviour), its name and first release, one row each; beside it, the
// struct layouts that change with the release ([DevCommLayouts],
// [PropsLayouts], [CollConfigLayouts]); and (declare.go) the version the
// binding declares in each versioned struct to a loaded release
// ([ConfigVersion], [CollConfigDeclared], [PropsVersion],
// [DevCommDeclared]), from which [Feature.UseWith] says whether the binding
// uses a feature the release has.
//
// NCCL functions are not here: internal/capi's generated symbol table
// (capi.SymName, capi.SymSince, from shim.h's list) has them, and whether
// the loaded library exports one (capi.Present), not its release, is what
// callers ask.
//
// A release is an NCCL_VERSION_CODE number, major*10000+minor*100+patch
// (2.28.3 is 22803). The root package turns a missing feature into its
// *UnsupportedError ("requires NCCL x.y.z, loaded a.b.c"); the other
// packages ask [Feature.In] with the loaded release.
//
// A release's new field of ncclConfig_t, ncclDevCommRequirements_t or
// ncclCommProperties_t is a constant and a row here (with the Go field it
// gates), the Go field documented with the release, the shim's C field with
// the same release in a comment, and the line that encodes (or decodes) it;
// a new struct layout is a row of its layout table. The root package's
// versions_test.go fails for each part left out, for a row that cannot fail
// (not newer than what already gates the struct) and for a row newer than
// the ABI the binding declares (nccl.ABIRelease).
package versions

import (
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
)

// Feature is one row of [Table].
type Feature uint8

// The features, grouped by kind; struct fields in the struct's order.
const (
	// ncclConfig_t fields newer than the oldest supported release. The
	// fields every supported release has (blocking to splitShare) need
	// no row.
	ConfigTrafficClass Feature = iota
	ConfigCommName
	ConfigCollNetEnable
	ConfigCTAPolicy
	ConfigShrinkShare
	ConfigNVLSCTAs
	ConfigNChannelsPerNetPeer
	ConfigNVLinkCentricSched
	ConfigGraphUsageMode
	ConfigNumRMACtx
	ConfigMaxP2PPeers
	ConfigGraphStreamOrdering
	ConfigLaunchOrderImplicit
	ConfigNumRMASig
	ConfigRMAEagerInit
	ConfigHostCFTMode
	ConfigNVLSHostMode

	// ncclDevCommRequirements_t fields newer than ncclDevCommCreate (the
	// first layout's lsaMultimem and lsaBarrierCount need no row).
	ReqsBarrierCount
	ReqsRailGINBarrierCount
	ReqsLSALLA2ABlockCount
	ReqsLSALLA2ASlotCount
	ReqsGINForceEnable
	ReqsGINContextCount
	ReqsGINSignalCount
	ReqsGINCounterCount
	ReqsGINConnectionType
	ReqsGINExclusiveContexts
	ReqsGINQueueDepth
	ReqsGINTrafficClass
	ReqsWorldGINBarrierCount
	ReqsGINStrongSignalsRequired
	ReqsGINVASignalsRequired
	ReqsGINCustomStride
	ReqsGINType
	ReqsUseRuntimeVersion
	ReqsCFTCaps
	ReqsCFTBarrierCount

	// ncclCommProperties_t fields newer than ncclCommQueryProperties.
	PropsNumLSATeams
	PropsHostRMASupport
	PropsRailedGINType
	PropsCommHash
	PropsGINMinStride
	PropsGINConnectionType
	PropsGINSupport
	PropsDevCommRuntimeVersionSize

	// ncclCollConfig_t fields newer than the nccl*Config functions (the
	// first layout's ext, minCTAs, maxCTAs, nvlsCTAs and cgaClusterSize
	// need no row).
	CollAlgSelection
	CollForceAlgSelection
	CollCTAPolicy
	CollUserProfilerTag
	CollLaunchCompletionEvent

	// Flag values and data types.
	CTAPolicyZero             // NCCL_CTA_POLICY_ZERO
	CTAPolicyCombined         // both CTA policy flags at once
	WindowStrictOrdering      // NCCL_WIN_STRICT_ORDERING
	WindowGINOnly             // NCCL_WIN_GIN_ONLY
	WindowCFTCounted          // NCCL_WIN_CFT_COUNTED
	Float8E4M3                // ncclFloat8e4m3
	Float8E5M2                // ncclFloat8e5m2
	GINTypeEFAGDA             // NCCL_GIN_TYPE_EFA_GDA
	GINConnectionCustomStride // NCCL_GIN_CONNECTION_CUSTOM_STRIDE

	// Behaviours of the library.
	MaxChannels64              // MAXCHANNELS is 64 (32 before)
	WindowAlignment            // NCCL_WIN_REQUIRED_ALIGNMENT: a window starts 4096-aligned in its allocation
	SymmetricMemoryOneRank     // symmetric memory for a communicator of one rank
	GINResourcesNeedConnection // ncclDevCommCreate refuses GIN resources without a GIN connection
	MultiRankGPU               // several ranks of one process on one GPU (with NCCL_MULTI_RANK_GPU_ENABLE=1)

	NumFeatures
)

// Row is what the table knows of a feature.
type Row struct {
	// Name is the feature as NCCL spells it: "ncclConfig_t.commName",
	// "NCCL_CTA_POLICY_ZERO", or a phrase for a behaviour.
	Name string
	// Since is the first release that has it.
	Since int
	// Field is, for a struct field, the field of the binding's struct that
	// carries it ("CommName" of nccl.Config); "" for anything else.
	Field string
}

// Table is every feature's row.
var Table = [NumFeatures]Row{
	ConfigTrafficClass:        {"ncclConfig_t.trafficClass", 22602, "TrafficClass"},
	ConfigCommName:            {"ncclConfig_t.commName", 22703, "CommName"},
	ConfigCollNetEnable:       {"ncclConfig_t.collnetEnable", 22703, "CollNetEnable"},
	ConfigCTAPolicy:           {"ncclConfig_t.CTAPolicy", 22703, "CTAPolicy"},
	ConfigShrinkShare:         {"ncclConfig_t.shrinkShare", 22703, "ShrinkShare"},
	ConfigNVLSCTAs:            {"ncclConfig_t.nvlsCTAs", 22703, "NVLSCTAs"},
	ConfigNChannelsPerNetPeer: {"ncclConfig_t.nChannelsPerNetPeer", 22803, "NChannelsPerNetPeer"},
	ConfigNVLinkCentricSched:  {"ncclConfig_t.nvlinkCentricSched", 22803, "NVLinkCentricSched"},
	ConfigGraphUsageMode:      {"ncclConfig_t.graphUsageMode", 22902, "GraphUsageMode"},
	ConfigNumRMACtx:           {"ncclConfig_t.numRmaCtx", 22902, "NumRMACtx"},
	ConfigMaxP2PPeers:         {"ncclConfig_t.maxP2pPeers", 23003, "MaxP2PPeers"},
	ConfigGraphStreamOrdering: {"ncclConfig_t.graphStreamOrdering", 23007, "GraphStreamOrdering"},
	// 2.31 (ABI-2.31-2.32.md §4): honoured from config version 2.31.0
	// (STyGIANet/nccl 2.31.0a16 src/init.cc, which reports 23100), laid out
	// as nccl4py's bindings of 2.31.2 declare. hostCftMode is in 2.31.2's
	// struct only; whatever config version NCCL honours it from, it is at
	// most 2.31.2's own (NCCL_CONFIG_INITIALIZER stamps it), and the binding
	// declares min(loaded, ABIRelease).
	ConfigLaunchOrderImplicit: {"ncclConfig_t.launchOrderImplicit", 23100, "LaunchOrderImplicit"},
	ConfigNumRMASig:           {"ncclConfig_t.numRmaSig", 23100, "NumRMASig"},
	ConfigRMAEagerInit:        {"ncclConfig_t.rmaEagerInit", 23100, "RMAEagerInit"},
	ConfigHostCFTMode:         {"ncclConfig_t.hostCftMode", 23102, "HostCFTMode"},
	// 2.32.3 (ABI-2.31-2.32.md §4): appended at 112 (120 bytes); the config
	// version NCCL honours it from is at most 2.32.3's own, which the
	// binding declares to a 2.32.3 library.
	ConfigNVLSHostMode: {"ncclConfig_t.nvlsHostMode", 23203, "NVLSHostMode"},

	ReqsBarrierCount:             {"ncclDevCommRequirements_t.barrierCount", 22807, "BarrierCount"},
	ReqsRailGINBarrierCount:      {"ncclDevCommRequirements_t.railGinBarrierCount", 22807, "RailGINBarrierCount"},
	ReqsLSALLA2ABlockCount:       {"ncclDevCommRequirements_t.lsaLLA2ABlockCount", 22807, "LSALLA2ABlockCount"},
	ReqsLSALLA2ASlotCount:        {"ncclDevCommRequirements_t.lsaLLA2ASlotCount", 22807, "LSALLA2ASlotCount"},
	ReqsGINForceEnable:           {"ncclDevCommRequirements_t.ginForceEnable", 22807, "GINForceEnable"},
	ReqsGINContextCount:          {"ncclDevCommRequirements_t.ginContextCount", 22807, "GINContextCount"},
	ReqsGINSignalCount:           {"ncclDevCommRequirements_t.ginSignalCount", 22807, "GINSignalCount"},
	ReqsGINCounterCount:          {"ncclDevCommRequirements_t.ginCounterCount", 22807, "GINCounterCount"},
	ReqsGINConnectionType:        {"ncclDevCommRequirements_t.ginConnectionType", 22907, "GINConnectionType"},
	ReqsGINExclusiveContexts:     {"ncclDevCommRequirements_t.ginExclusiveContexts", 22907, "GINExclusiveContexts"},
	ReqsGINQueueDepth:            {"ncclDevCommRequirements_t.ginQueueDepth", 22907, "GINQueueDepth"},
	ReqsGINTrafficClass:          {"ncclDevCommRequirements_t.ginTrafficClass", 23003, "GINTrafficClass"},
	ReqsWorldGINBarrierCount:     {"ncclDevCommRequirements_t.worldGinBarrierCount", 23003, "WorldGINBarrierCount"},
	ReqsGINStrongSignalsRequired: {"ncclDevCommRequirements_t.ginStrongSignalsRequired", 23007, "GINStrongSignalsRequired"},
	ReqsGINVASignalsRequired:     {"ncclDevCommRequirements_t.ginVaSignalsRequired", 23007, "GINVASignalsRequired"},
	// 2.31: STyGIANet/nccl 2.31.0a16 (NCCL's own "NCCL 2.31.0a16-1"
	// commit) src/include/nccl_device/core.h and nccl4py's bindings of
	// 2.31.2; the CFT fields only in 2.31.2 (nccl4py's bindings, NVIDIA's
	// 2.31.2 core.h and device API documentation). the reference notes on 2.31 (nccl-abi.md's sequel).
	ReqsGINCustomStride:   {"ncclDevCommRequirements_t.ginCustomStride", 23100, "GINCustomStride"},
	ReqsGINType:           {"ncclDevCommRequirements_t.ginType", 23100, "GINType"},
	ReqsUseRuntimeVersion: {"ncclDevCommRequirements_t.useRuntimeVersion", 23100, "UseRuntimeVersion"},
	ReqsCFTCaps:           {"ncclDevCommRequirements_t.cftCaps", 23102, "CFTCaps"},
	ReqsCFTBarrierCount:   {"ncclDevCommRequirements_t.cftBarrierCount", 23102, "CFTBarrierCount"},

	PropsNumLSATeams:    {"ncclCommProperties_t.nLsaTeams", 22907, "NumLSATeams"},
	PropsHostRMASupport: {"ncclCommProperties_t.hostRmaSupport", 22907, "HostRMASupport"},
	PropsRailedGINType:  {"ncclCommProperties_t.railedGinType", 22907, "RailedGINType"},
	// 2.31: filled for callers declaring 2.31.0 or later
	// (ABI-2.31-2.32.md §5).
	PropsCommHash:                  {"ncclCommProperties_t.commHash", 23100, "CommHash"},
	PropsGINMinStride:              {"ncclCommProperties_t.ginMinStride", 23100, "GINMinStride"},
	PropsGINConnectionType:         {"ncclCommProperties_t.ginConnectionType", 23100, "GINConnectionType"},
	PropsGINSupport:                {"ncclCommProperties_t.ginSupport", 23100, "GINSupport"},
	PropsDevCommRuntimeVersionSize: {"ncclCommProperties_t.devCommRuntimeVersionSize", 23100, "DevCommRuntimeVersionSize"},

	// ncclCollConfig_t (ABI-2.31-2.32.md §3): 2.31.0a16 has the first 40 bytes;
	// nccl4py's bindings of 2.31.2 add these four, NCCL 2.32.3 the event.
	CollAlgSelection:          {"ncclCollConfig_t.algSelection", 23102, "AlgSelection"},
	CollForceAlgSelection:     {"ncclCollConfig_t.forceAlgSelection", 23102, "ForceAlgSelection"},
	CollCTAPolicy:             {"ncclCollConfig_t.CTAPolicy", 23102, "CTAPolicy"},
	CollUserProfilerTag:       {"ncclCollConfig_t.userProfilerTag", 23102, "UserProfilerTag"},
	CollLaunchCompletionEvent: {"ncclCollConfig_t.launchCompletionEvent", 23203, "LaunchCompletionEvent"},

	CTAPolicyZero:        {Name: "NCCL_CTA_POLICY_ZERO", Since: 22803},
	CTAPolicyCombined:    {Name: "combined CTA policies", Since: 22902},
	WindowStrictOrdering: {Name: "NCCL_WIN_STRICT_ORDERING", Since: 22907},
	// 2.32.3 (ABI-2.31-2.32.md §9): values from nccl4py's WindowFlag.
	WindowGINOnly:             {Name: "NCCL_WIN_GIN_ONLY", Since: 23203},
	WindowCFTCounted:          {Name: "NCCL_WIN_CFT_COUNTED", Since: 23203},
	Float8E4M3:                {Name: "ncclFloat8e4m3", Since: 22403},
	Float8E5M2:                {Name: "ncclFloat8e5m2", Since: 22403},
	GINTypeEFAGDA:             {Name: "NCCL_GIN_TYPE_EFA_GDA", Since: 23100},
	GINConnectionCustomStride: {Name: "NCCL_GIN_CONNECTION_CUSTOM_STRIDE", Since: 23100},

	MaxChannels64:              {Name: "64 channels (MAXCHANNELS)", Since: 22501},
	WindowAlignment:            {Name: "NCCL_WIN_REQUIRED_ALIGNMENT", Since: 22803},
	SymmetricMemoryOneRank:     {Name: "symmetric memory on a communicator of one rank", Since: 22807},
	GINResourcesNeedConnection: {Name: "ncclDevCommCreate's check that GIN resources have a GIN connection", Since: 22907},
	MultiRankGPU:               {Name: "several ranks of one process on one GPU", Since: 23003},
}

// Name is the feature as NCCL spells it.
func (f Feature) Name() string { return Table[f].Name }

// Since is the feature's first release.
func (f Feature) Since() int { return Table[f].Since }

// Field is the Go struct field the feature gates, or "".
func (f Feature) Field() string { return Table[f].Field }

// In reports whether release r has the feature.
func (f Feature) In(r int) bool { return r >= Table[f].Since }

// Struct is the C struct of a field row ("ncclConfig_t"), or "".
func (r Row) Struct() string {
	if s, _, ok := strings.Cut(r.Name, "."); ok && r.Field != "" {
		return s
	}
	return ""
}

// Fields lists, in table order, the field rows of C struct name.
func Fields(name string) []Feature {
	var out []Feature
	for f := range NumFeatures {
		if Table[f].Struct() == name {
			out = append(out, f)
		}
	}
	return out
}

// DevCommLayout is how the releases from From on lay out
// ncclDevCommRequirements_t, and how many bytes of ncclDevComm_t they write
// (NCCL's nccl_device headers).
type DevCommLayout struct {
	From int // the first release (for the versioned family: declared version) with the layout
	// Family is capi.ReqsV22803, capi.ReqsV22807 (fixed structs without a
	// header) or capi.ReqsVersioned (a header, then every field of the
	// declared version).
	Family   int
	ReqsSize int // bytes of the requirements struct
	DevComm  int // bytes of ncclDevComm_t NCCL writes
}

// DevCommLayouts are the layouts, oldest first; a release uses the last
// whose From it has reached.
var DevCommLayouts = [...]DevCommLayout{
	{From: 22803, Family: capi.ReqsV22803, ReqsSize: 24, DevComm: 88},
	{From: 22807, Family: capi.ReqsV22807, ReqsSize: 56, DevComm: 200},
	{From: 22902, Family: capi.ReqsVersioned, ReqsSize: 72, DevComm: 200},
	{From: 22905, Family: capi.ReqsVersioned, ReqsSize: 88, DevComm: 224},
	{From: 23000, Family: capi.ReqsVersioned, ReqsSize: 96, DevComm: 240},
	// 2.31: the requirements are established (2.31.0a16: ginCustomStride,
	// ginType, useRuntimeVersion, 112 bytes; 2.31.2 adds cftCaps and
	// cftBarrierCount, 120 bytes), the ncclDevComm_t size is not: 0 says
	// the library reports it (ncclCommProperties_t.devCommRuntimeVersionSize,
	// the size of its own layout, which a caller declaring the library's
	// own release gets).
	{From: 23100, Family: capi.ReqsVersioned, ReqsSize: 112, DevComm: 0},
	{From: 23102, Family: capi.ReqsVersioned, ReqsSize: 120, DevComm: 0},
}

// DevCommLayoutFor is the layout of release (or declared version) r; ok is
// false before the first (no ncclDevCommCreate).
func DevCommLayoutFor(r int) (DevCommLayout, bool) { return layoutFor(DevCommLayouts[:], r) }

// PropsLayout is how the declared versions from From on lay out
// ncclCommProperties_t.
type PropsLayout struct {
	From   int
	Family int // capi.PropsV22902 or capi.PropsV22907
	Size   int // bytes of the struct
}

// PropsLayouts are the layouts, oldest first; a declared version uses the
// last whose From it has reached. The fields each adds have rows in
// [Table] (PropsNumLSATeams...).
var PropsLayouts = [...]PropsLayout{
	{From: 22902, Family: capi.PropsV22902, Size: 40},
	{From: 22907, Family: capi.PropsV22907, Size: 56},
	{From: 23100, Family: capi.PropsV23100, Size: 144},
}

// DevCommCompat is the declared version whose ncclDevComm_t the binding
// asks for where the table cannot know the size of a 2.31 one: a library
// newer than the newest layout (2.31.2), unless the caller asks for the
// library's own layout (useRuntimeVersion). 2.31.0a16 keeps a [2.30.0,
// 2.30.7] compat entry with the 240-byte 2.30 ncclDevComm_t
// (src/devcomm/devcomm_v23000.cc).
const DevCommCompat = 23007

// CollConfigLayout is how the releases from From on lay out
// ncclCollConfig_t.
type CollConfigLayout struct {
	From int
	Size int // bytes of the struct
}

// CollConfigLayouts are the layouts of ncclCollConfig_t, oldest first
// (ABI-2.31-2.32.md §3): a release uses the last whose From it has reached,
// and the binding declares that From with exactly that size, so NCCL (which
// copies config->size bytes, unclamped, for a version not newer than its
// own) never reads past its own struct.
var CollConfigLayouts = [...]CollConfigLayout{
	{From: 23100, Size: 40}, // 2.31.0a16 (STyGIANet/nccl)
	{From: 23102, Size: 64}, // 2.31.2 (nccl4py's bindings)
	{From: 23203, Size: 72}, // 2.32.3 (NCCL's documentation and release notes)
}

// CollConfigLayoutFor is the layout of release r; ok is false before the
// first (no nccl*Config functions).
func CollConfigLayoutFor(r int) (CollConfigLayout, bool) { return layoutFor(CollConfigLayouts[:], r) }

// PropsLayoutFor is the layout of declared version v; ok is false before
// the first (no ncclCommQueryProperties).
func PropsLayoutFor(v int) (PropsLayout, bool) { return layoutFor(PropsLayouts[:], v) }

// layoutFor is the last of rows whose From r has reached.
func layoutFor[L interface{ from() int }](rows []L, r int) (l L, ok bool) {
	for _, row := range rows {
		if r >= row.from() {
			l, ok = row, true
		}
	}
	return l, ok
}

func (l DevCommLayout) from() int    { return l.From }
func (l PropsLayout) from() int      { return l.From }
func (l CollConfigLayout) from() int { return l.From }

package nccl

import (
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// Version facts, in one place: the first NCCL release of everything the
// binding uses that not every loadable release has.
//
//   - NCCL functions: the shim's list in internal/capi/shim.h, from which
//     capi.SymName and capi.SymSince are generated; whether the loaded
//     library has one is capi.Present, an array index filled at load.
//   - ncclConfig_t and ncclDevCommRequirements_t fields, flag values and
//     other features: the table below. Config's field documentation and
//     shim.h's struct comments name the same releases, and versions_test.go
//     checks all three agree.

// feature is something of NCCL's that is not a function.
type feature uint8

// ncclConfig_t fields, in the struct's order.
const (
	cfgBlocking feature = iota
	cfgCGAClusterSize
	cfgMinCTAs
	cfgMaxCTAs
	cfgNetName
	cfgSplitShare
	cfgTrafficClass
	cfgCommName
	cfgCollNetEnable
	cfgCTAPolicy
	cfgShrinkShare
	cfgNVLSCTAs
	cfgNChannelsPerNetPeer
	cfgNVLinkCentricSched
	cfgGraphUsageMode
	cfgNumRMACtx
	cfgMaxP2PPeers
	cfgGraphStreamOrdering

	// ncclDevCommRequirements_t fields, in the struct's order.
	reqLSAMultimem
	reqBarrierCount
	reqLSABarrierCount
	reqRailGINBarrierCount
	reqLSALLA2ABlockCount
	reqLSALLA2ASlotCount
	reqGINForceEnable
	reqGINContextCount
	reqGINSignalCount
	reqGINCounterCount
	reqGINConnectionType
	reqGINExclusiveContexts
	reqGINQueueDepth
	reqGINTrafficClass
	reqWorldGINBarrierCount
	reqGINStrongSignalsRequired
	reqGINVASignalsRequired

	// Flag values and layouts.
	flagCTAPolicyZero        // NCCL_CTA_POLICY_ZERO
	flagCTAPolicyCombined    // several CTA policy flags at once
	flagWindowStrictOrdering // NCCL_WIN_STRICT_ORDERING
	layoutPropertiesWide     // ncclCommProperties_t of 56 bytes (nLsaTeams, hostRmaSupport, railedGinType)
	numFeatures
)

// features names each feature as NCCL spells it and gives its first release.
var features = [numFeatures]struct {
	name  string
	since Release
}{
	cfgBlocking:            {"ncclConfig_t.blocking", 21403},
	cfgCGAClusterSize:      {"ncclConfig_t.cgaClusterSize", 21701},
	cfgMinCTAs:             {"ncclConfig_t.minCTAs", 21701},
	cfgMaxCTAs:             {"ncclConfig_t.maxCTAs", 21701},
	cfgNetName:             {"ncclConfig_t.netName", 21701},
	cfgSplitShare:          {"ncclConfig_t.splitShare", 21801},
	cfgTrafficClass:        {"ncclConfig_t.trafficClass", 22602},
	cfgCommName:            {"ncclConfig_t.commName", 22703},
	cfgCollNetEnable:       {"ncclConfig_t.collnetEnable", 22703},
	cfgCTAPolicy:           {"ncclConfig_t.CTAPolicy", 22703},
	cfgShrinkShare:         {"ncclConfig_t.shrinkShare", 22703},
	cfgNVLSCTAs:            {"ncclConfig_t.nvlsCTAs", 22703},
	cfgNChannelsPerNetPeer: {"ncclConfig_t.nChannelsPerNetPeer", 22803},
	cfgNVLinkCentricSched:  {"ncclConfig_t.nvlinkCentricSched", 22803},
	cfgGraphUsageMode:      {"ncclConfig_t.graphUsageMode", 22902},
	cfgNumRMACtx:           {"ncclConfig_t.numRmaCtx", 22902},
	cfgMaxP2PPeers:         {"ncclConfig_t.maxP2pPeers", 23003},
	cfgGraphStreamOrdering: {"ncclConfig_t.graphStreamOrdering", 23007},

	reqLSAMultimem:              {"ncclDevCommRequirements_t.lsaMultimem", 22803},
	reqBarrierCount:             {"ncclDevCommRequirements_t.barrierCount", 22807},
	reqLSABarrierCount:          {"ncclDevCommRequirements_t.lsaBarrierCount", 22803},
	reqRailGINBarrierCount:      {"ncclDevCommRequirements_t.railGinBarrierCount", 22807},
	reqLSALLA2ABlockCount:       {"ncclDevCommRequirements_t.lsaLLA2ABlockCount", 22807},
	reqLSALLA2ASlotCount:        {"ncclDevCommRequirements_t.lsaLLA2ASlotCount", 22807},
	reqGINForceEnable:           {"ncclDevCommRequirements_t.ginForceEnable", 22807},
	reqGINContextCount:          {"ncclDevCommRequirements_t.ginContextCount", 22807},
	reqGINSignalCount:           {"ncclDevCommRequirements_t.ginSignalCount", 22807},
	reqGINCounterCount:          {"ncclDevCommRequirements_t.ginCounterCount", 22807},
	reqGINConnectionType:        {"ncclDevCommRequirements_t.ginConnectionType", 22907},
	reqGINExclusiveContexts:     {"ncclDevCommRequirements_t.ginExclusiveContexts", 22907},
	reqGINQueueDepth:            {"ncclDevCommRequirements_t.ginQueueDepth", 22907},
	reqGINTrafficClass:          {"ncclDevCommRequirements_t.ginTrafficClass", 23003},
	reqWorldGINBarrierCount:     {"ncclDevCommRequirements_t.worldGinBarrierCount", 23003},
	reqGINStrongSignalsRequired: {"ncclDevCommRequirements_t.ginStrongSignalsRequired", 23007},
	reqGINVASignalsRequired:     {"ncclDevCommRequirements_t.ginVaSignalsRequired", 23007},

	flagCTAPolicyZero:        {"NCCL_CTA_POLICY_ZERO", 22803},
	flagCTAPolicyCombined:    {"combined CTA policies", 22902},
	flagWindowStrictOrdering: {"NCCL_WIN_STRICT_ORDERING", 22907},
	layoutPropertiesWide:     {"ncclCommProperties_t.nLsaTeams", 22907},
}

// since is the feature's first release.
func (f feature) since() Release { return features[f].since }

// check returns an *UnsupportedError when release r predates the feature.
func (f feature) check(r Release) error {
	if r < features[f].since {
		return &UnsupportedError{Feature: features[f].name, Since: features[f].since, Loaded: r}
	}
	return nil
}

// symSince is the first release of an NCCL function of the shim's list.
func symSince(s capi.Sym) Release { return releaseFromCode(capi.SymSince[s]) }

// unsupported is the error for an NCCL function the loaded library lacks.
func unsupported(s capi.Sym) error {
	r, _ := loaded()
	return &UnsupportedError{Feature: capi.SymName[s], Since: symSince(s), Loaded: r}
}

// require loads NCCL and returns its release, or the unsupported error when
// the library lacks function s (an array index, no search).
func require(s capi.Sym) (Release, error) {
	r, err := loaded()
	if err != nil {
		return 0, err
	}
	if !capi.Present(s) {
		return r, unsupported(s)
	}
	return r, nil
}

// symByName maps a function name of the shim's list to its Sym, for
// statusErr's missing-function case (an error path), built once.
var symByName = sync.OnceValue(func() map[string]capi.Sym {
	m := make(map[string]capi.Sym, capi.NumSyms)
	for i, name := range capi.SymName {
		m[name] = capi.Sym(i)
	}
	return m
})

// unsupportedFunc is unsupported for a function named fn.
func unsupportedFunc(fn string) error {
	if s, ok := symByName()[fn]; ok {
		return unsupported(s)
	}
	r, _ := loaded()
	return &UnsupportedError{Feature: fn, Loaded: r}
}

//go:build linux && cgo

package capi

/*
#include <stdlib.h>
#include "shim.h"
#include "collconfig.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// Strings handed to NCCL in a config: netName is copied by NCCL, but
// commName is kept as the caller's pointer for the life of the communicator
// and its children. Each distinct string is copied to C once and kept.
var cstrings struct {
	sync.Mutex
	m map[string]*C.char
}

func internCString(s string) *C.char {
	if s == "" {
		return nil
	}
	cstrings.Lock()
	defer cstrings.Unlock()
	if p, ok := cstrings.m[s]; ok {
		return p
	}
	if cstrings.m == nil {
		cstrings.m = make(map[string]*C.char)
	}
	p := C.CString(s)
	cstrings.m[s] = p
	return p
}

// ConfigSize is the size of ncclConfig_t the binding sends with a config
// declaring version: 120 bytes (nvlsHostMode's layout) from 2.32.3, else 112
// (up to hostCftMode), which older libraries clamp to their own size.
func ConfigSize(version uint32) int {
	if version >= ConfigV23203 {
		return C.sizeof_capi_config_v23203
	}
	return C.CAPI_CONFIG_SIZE_V23102
}

// c builds the C struct NCCL reads during the call (it copies what it keeps).
func (c *Config) c() *C.capi_config_v23203 {
	if c == nil {
		return nil
	}
	return &C.capi_config_v23203{
		size:                C.size_t(ConfigSize(c.Version)),
		magic:               APIMagic,
		version:             C.uint(c.Version),
		blocking:            C.int(c.Blocking),
		cgaClusterSize:      C.int(c.CGAClusterSize),
		minCTAs:             C.int(c.MinCTAs),
		maxCTAs:             C.int(c.MaxCTAs),
		netName:             internCString(c.NetName),
		splitShare:          C.int(c.SplitShare),
		trafficClass:        C.int(c.TrafficClass),
		commName:            internCString(c.CommName),
		collnetEnable:       C.int(c.CollnetEnable),
		CTAPolicy:           C.int(c.CTAPolicy),
		shrinkShare:         C.int(c.ShrinkShare),
		nvlsCTAs:            C.int(c.NvlsCTAs),
		nChannelsPerNetPeer: C.int(c.NChannelsPerNetPeer),
		nvlinkCentricSched:  C.int(c.NvlinkCentricSched),
		graphUsageMode:      C.int(c.GraphUsageMode),
		numRmaCtx:           C.int(c.NumRmaCtx),
		maxP2pPeers:         C.int(c.MaxP2pPeers),
		graphStreamOrdering: C.int(c.GraphStreamOrdering),
		launchOrderImplicit: C.int(c.LaunchOrderImplicit),
		numRmaSig:           C.int(c.NumRmaSig),
		rmaEagerInit:        C.int(c.RmaEagerInit),
		hostCftMode:         C.int(c.HostCftMode),
		nvlsHostMode:        C.int(c.NvlsHostMode),
	}
}

// CommQueryProperties calls ncclCommQueryProperties declaring version, with
// the layout of family: PropsV22902 (40 bytes), PropsV22907 (56 bytes) or
// PropsV23100 (144 bytes).
func CommQueryProperties(comm uintptr, version uint32, family int) (Props, Status) {
	if family == PropsV22902 {
		raw := C.capi_props_v22902{size: C.sizeof_capi_props_v22902, magic: APIMagic, version: C.uint(version)}
		st := QueryProperties(comm, unsafe.Pointer(&raw))
		return Props{
			Rank: int32(raw.rank), NRanks: int32(raw.nRanks), CUDADev: int32(raw.cudaDev), NVMLDev: int32(raw.nvmlDev),
			DeviceAPISupport: raw.deviceApiSupport != 0, MultimemSupport: raw.multimemSupport != 0,
			GINType: int32(raw.ginType),
		}, st
	}
	// 2.29.7's layout is the prefix of 2.31.0's up to railedGinType.
	raw := C.capi_props_v23100{magic: APIMagic, version: C.uint(version)}
	raw.size = C.size_t(unsafe.Offsetof(raw.commHash))
	if family == PropsV23100 {
		raw.size = C.sizeof_capi_props_v23100
	}
	st := QueryProperties(comm, unsafe.Pointer(&raw))
	p := Props{
		Rank: int32(raw.rank), NRanks: int32(raw.nRanks), CUDADev: int32(raw.cudaDev), NVMLDev: int32(raw.nvmlDev),
		DeviceAPISupport: raw.deviceApiSupport != 0, MultimemSupport: raw.multimemSupport != 0,
		GINType: int32(raw.ginType), NLsaTeams: int32(raw.nLsaTeams), HostRMASupport: raw.hostRmaSupport != 0,
		RailedGINType: int32(raw.railedGinType),
	}
	if family == PropsV23100 {
		p.CommHash = uint64(raw.commHash)
		p.GINMinStride, p.GINConnectionType = int32(raw.ginMinStride), int32(raw.ginConnectionType)
		p.DevCommRuntimeVersionSize = uint64(raw.devCommRuntimeVersionSize)
		for i := range p.GINSupport {
			p.GINSupport[i] = raw.ginSupport[i] != 0
		}
	}
	return p, st
}

func b2u(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

// EncodeDevCommReqs lays r out in the given family. For the versioned family
// it declares version and returns size bytes (72, 88, 96, 112 or 120).
func EncodeDevCommReqs(r DevCommReqs, family int, version uint32, size int) []byte {
	switch family {
	case ReqsV22803:
		raw := C.capi_devcomm_reqs_v22803{lsaMultimem: b2u(r.LsaMultimem), lsaBarrierCount: C.int(r.LsaBarrierCount)}
		return C.GoBytes(unsafe.Pointer(&raw), C.sizeof_capi_devcomm_reqs_v22803)
	case ReqsV22807:
		raw := C.capi_devcomm_reqs_v22807{
			lsaMultimem: b2u(r.LsaMultimem), barrierCount: C.int(r.BarrierCount),
			lsaBarrierCount: C.int(r.LsaBarrierCount), railGinBarrierCount: C.int(r.RailGinBarrierCount),
			lsaLLA2ABlockCount: C.int(r.LsaLLA2ABlockCount), lsaLLA2ASlotCount: C.int(r.LsaLLA2ASlotCount),
			ginForceEnable: b2u(r.GinForceEnable), ginContextCount: C.int(r.GinContextCount),
			ginSignalCount: C.int(r.GinSignalCount), ginCounterCount: C.int(r.GinCounterCount),
		}
		return C.GoBytes(unsafe.Pointer(&raw), C.sizeof_capi_devcomm_reqs_v22807)
	}
	raw := C.capi_devcomm_reqs_v23102{
		size: C.size_t(size), magic: APIMagic, version: C.uint(version),
		lsaMultimem: b2u(r.LsaMultimem), barrierCount: C.int(r.BarrierCount),
		lsaBarrierCount: C.int(r.LsaBarrierCount), railGinBarrierCount: C.int(r.RailGinBarrierCount),
		lsaLLA2ABlockCount: C.int(r.LsaLLA2ABlockCount), lsaLLA2ASlotCount: C.int(r.LsaLLA2ASlotCount),
		ginForceEnable: b2u(r.GinForceEnable), ginContextCount: C.int(r.GinContextCount),
		ginSignalCount: C.int(r.GinSignalCount), ginCounterCount: C.int(r.GinCounterCount),
		ginConnectionType: C.int(r.GinConnectionType), ginExclusiveContexts: b2u(r.GinExclusiveContexts),
		ginQueueDepth: C.int(r.GinQueueDepth), ginTrafficClass: C.int(r.GinTrafficClass),
		worldGinBarrierCount:     C.int(r.WorldGinBarrierCount),
		ginStrongSignalsRequired: b2u(r.GinStrongSignalsRequired), ginVaSignalsRequired: b2u(r.GinVaSignalsRequired),
		ginCustomStride: C.int(r.GinCustomStride), ginType: C.int(r.GinType),
		useRuntimeVersion: b2u(r.UseRuntimeVersion), cftCaps: C.int(r.CftCaps),
		cftBarrierCount: C.int(r.CftBarrierCount),
	}
	if size > C.sizeof_capi_devcomm_reqs_v23102 {
		size = C.sizeof_capi_devcomm_reqs_v23102
	}
	return C.GoBytes(unsafe.Pointer(&raw), C.int(size))
}

// ResourceListOffset is where a requirements struct of family keeps
// resourceRequirementsList.
func ResourceListOffset(family int) int {
	switch family {
	case ReqsV22803:
		var r C.capi_devcomm_reqs_v22803
		return int(unsafe.Offsetof(r.resourceRequirementsList))
	case ReqsV22807:
		var r C.capi_devcomm_reqs_v22807
		return int(unsafe.Offsetof(r.resourceRequirementsList))
	}
	var r C.capi_devcomm_reqs_v23102
	return int(unsafe.Offsetof(r.resourceRequirementsList))
}

// TeamListOffset is where a requirements struct of family keeps
// teamRequirementsList.
func TeamListOffset(family int) int {
	switch family {
	case ReqsV22803:
		var r C.capi_devcomm_reqs_v22803
		return int(unsafe.Offsetof(r.teamRequirementsList))
	case ReqsV22807:
		var r C.capi_devcomm_reqs_v22807
		return int(unsafe.Offsetof(r.teamRequirementsList))
	}
	var r C.capi_devcomm_reqs_v23102
	return int(unsafe.Offsetof(r.teamRequirementsList))
}

// Layouts returns the layout of every versioned struct of the shim.
func Layouts() map[string]Layout {
	var cfg C.capi_config_v23203
	var p1 C.capi_props_v22902
	var p3 C.capi_props_v23100
	var cc C.capi_coll_config_v23203
	var ext C.capi_config_ext
	var sim C.capi_sim_info
	var wsd C.capi_wait_signal_desc
	var r1 C.capi_devcomm_reqs_v22803
	var r2 C.capi_devcomm_reqs_v22807
	var r3 C.capi_devcomm_reqs_v23102
	var uid C.capi_unique_id
	var dc C.capi_devcomm
	return map[string]Layout{
		"ncclUniqueId":  {unsafe.Sizeof(uid), map[string]uintptr{"internal": unsafe.Offsetof(uid.internal)}},
		"ncclDevComm_t": {unsafe.Sizeof(dc), map[string]uintptr{}},
		"ncclConfig_t/v23203": {unsafe.Sizeof(cfg), map[string]uintptr{
			"size": unsafe.Offsetof(cfg.size), "magic": unsafe.Offsetof(cfg.magic),
			"version": unsafe.Offsetof(cfg.version), "blocking": unsafe.Offsetof(cfg.blocking),
			"cgaClusterSize": unsafe.Offsetof(cfg.cgaClusterSize), "minCTAs": unsafe.Offsetof(cfg.minCTAs),
			"maxCTAs": unsafe.Offsetof(cfg.maxCTAs), "netName": unsafe.Offsetof(cfg.netName),
			"splitShare": unsafe.Offsetof(cfg.splitShare), "trafficClass": unsafe.Offsetof(cfg.trafficClass),
			"commName": unsafe.Offsetof(cfg.commName), "collnetEnable": unsafe.Offsetof(cfg.collnetEnable),
			"CTAPolicy": unsafe.Offsetof(cfg.CTAPolicy), "shrinkShare": unsafe.Offsetof(cfg.shrinkShare),
			"nvlsCTAs": unsafe.Offsetof(cfg.nvlsCTAs), "nChannelsPerNetPeer": unsafe.Offsetof(cfg.nChannelsPerNetPeer),
			"nvlinkCentricSched": unsafe.Offsetof(cfg.nvlinkCentricSched),
			"graphUsageMode":     unsafe.Offsetof(cfg.graphUsageMode), "numRmaCtx": unsafe.Offsetof(cfg.numRmaCtx),
			"maxP2pPeers": unsafe.Offsetof(cfg.maxP2pPeers), "graphStreamOrdering": unsafe.Offsetof(cfg.graphStreamOrdering),
			"launchOrderImplicit": unsafe.Offsetof(cfg.launchOrderImplicit), "numRmaSig": unsafe.Offsetof(cfg.numRmaSig),
			"rmaEagerInit": unsafe.Offsetof(cfg.rmaEagerInit), "hostCftMode": unsafe.Offsetof(cfg.hostCftMode),
			"nvlsHostMode": unsafe.Offsetof(cfg.nvlsHostMode),
		}},
		"ncclCommProperties_t/v23100": {unsafe.Sizeof(p3), map[string]uintptr{
			"size": unsafe.Offsetof(p3.size), "magic": unsafe.Offsetof(p3.magic), "version": unsafe.Offsetof(p3.version),
			"rank": unsafe.Offsetof(p3.rank), "nRanks": unsafe.Offsetof(p3.nRanks), "cudaDev": unsafe.Offsetof(p3.cudaDev),
			"nvmlDev": unsafe.Offsetof(p3.nvmlDev), "deviceApiSupport": unsafe.Offsetof(p3.deviceApiSupport),
			"multimemSupport": unsafe.Offsetof(p3.multimemSupport), "ginType": unsafe.Offsetof(p3.ginType),
			"nLsaTeams": unsafe.Offsetof(p3.nLsaTeams), "hostRmaSupport": unsafe.Offsetof(p3.hostRmaSupport),
			"railedGinType": unsafe.Offsetof(p3.railedGinType), "commHash": unsafe.Offsetof(p3.commHash),
			"ginMinStride": unsafe.Offsetof(p3.ginMinStride), "ginConnectionType": unsafe.Offsetof(p3.ginConnectionType),
			"ginSupport": unsafe.Offsetof(p3.ginSupport), "devCommRuntimeVersionSize": unsafe.Offsetof(p3.devCommRuntimeVersionSize),
		}},
		"ncclCollConfig_t/v23203": {unsafe.Sizeof(cc), map[string]uintptr{
			"size": unsafe.Offsetof(cc.size), "magic": unsafe.Offsetof(cc.magic), "version": unsafe.Offsetof(cc.version),
			"ext": unsafe.Offsetof(cc.ext), "minCTAs": unsafe.Offsetof(cc.minCTAs), "maxCTAs": unsafe.Offsetof(cc.maxCTAs),
			"nvlsCTAs": unsafe.Offsetof(cc.nvlsCTAs), "cgaClusterSize": unsafe.Offsetof(cc.cgaClusterSize),
			"algSelection": unsafe.Offsetof(cc.algSelection), "forceAlgSelection": unsafe.Offsetof(cc.forceAlgSelection),
			"CTAPolicy": unsafe.Offsetof(cc.CTAPolicy), "userProfilerTag": unsafe.Offsetof(cc.userProfilerTag),
			"launchCompletionEvent": unsafe.Offsetof(cc.launchCompletionEvent),
		}},
		"ncclConfigExt_t": {unsafe.Sizeof(ext), map[string]uintptr{
			"next": unsafe.Offsetof(ext.next), "vendorId": unsafe.Offsetof(ext.vendorId),
			"optionId": unsafe.Offsetof(ext.optionId), "val": unsafe.Offsetof(ext.val),
		}},
		"ncclCommProperties_t/v22902": {unsafe.Sizeof(p1), map[string]uintptr{
			"size": unsafe.Offsetof(p1.size), "magic": unsafe.Offsetof(p1.magic), "version": unsafe.Offsetof(p1.version),
			"rank": unsafe.Offsetof(p1.rank), "nRanks": unsafe.Offsetof(p1.nRanks), "cudaDev": unsafe.Offsetof(p1.cudaDev),
			"nvmlDev": unsafe.Offsetof(p1.nvmlDev), "deviceApiSupport": unsafe.Offsetof(p1.deviceApiSupport),
			"multimemSupport": unsafe.Offsetof(p1.multimemSupport), "ginType": unsafe.Offsetof(p1.ginType),
		}},
		// 2.29.7's layout: capi_props_v23100 up to railedGinType.
		"ncclCommProperties_t/v22907": {unsafe.Offsetof(p3.commHash), map[string]uintptr{
			"size": unsafe.Offsetof(p3.size), "magic": unsafe.Offsetof(p3.magic), "version": unsafe.Offsetof(p3.version),
			"rank": unsafe.Offsetof(p3.rank), "nRanks": unsafe.Offsetof(p3.nRanks), "cudaDev": unsafe.Offsetof(p3.cudaDev),
			"nvmlDev": unsafe.Offsetof(p3.nvmlDev), "deviceApiSupport": unsafe.Offsetof(p3.deviceApiSupport),
			"multimemSupport": unsafe.Offsetof(p3.multimemSupport), "ginType": unsafe.Offsetof(p3.ginType),
			"nLsaTeams": unsafe.Offsetof(p3.nLsaTeams), "hostRmaSupport": unsafe.Offsetof(p3.hostRmaSupport),
			"railedGinType": unsafe.Offsetof(p3.railedGinType),
		}},
		"ncclSimInfo_t": {unsafe.Sizeof(sim), map[string]uintptr{
			"size": unsafe.Offsetof(sim.size), "magic": unsafe.Offsetof(sim.magic), "version": unsafe.Offsetof(sim.version),
			"estimatedTime": unsafe.Offsetof(sim.estimatedTime),
		}},
		"ncclWaitSignalDesc_t": {unsafe.Sizeof(wsd), map[string]uintptr{
			"opCnt": unsafe.Offsetof(wsd.opCnt), "peer": unsafe.Offsetof(wsd.peer),
			"sigIdx": unsafe.Offsetof(wsd.sigIdx), "ctx": unsafe.Offsetof(wsd.ctx),
		}},
		"ncclDevCommRequirements_t/v22803": {unsafe.Sizeof(r1), map[string]uintptr{
			"resourceRequirementsList": unsafe.Offsetof(r1.resourceRequirementsList),
			"teamRequirementsList":     unsafe.Offsetof(r1.teamRequirementsList),
			"lsaMultimem":              unsafe.Offsetof(r1.lsaMultimem), "lsaBarrierCount": unsafe.Offsetof(r1.lsaBarrierCount),
		}},
		"ncclDevCommRequirements_t/v22807": {unsafe.Sizeof(r2), map[string]uintptr{
			"resourceRequirementsList": unsafe.Offsetof(r2.resourceRequirementsList),
			"teamRequirementsList":     unsafe.Offsetof(r2.teamRequirementsList),
			"lsaMultimem":              unsafe.Offsetof(r2.lsaMultimem), "barrierCount": unsafe.Offsetof(r2.barrierCount),
			"lsaBarrierCount": unsafe.Offsetof(r2.lsaBarrierCount), "railGinBarrierCount": unsafe.Offsetof(r2.railGinBarrierCount),
			"lsaLLA2ABlockCount": unsafe.Offsetof(r2.lsaLLA2ABlockCount), "lsaLLA2ASlotCount": unsafe.Offsetof(r2.lsaLLA2ASlotCount),
			"ginForceEnable": unsafe.Offsetof(r2.ginForceEnable), "ginContextCount": unsafe.Offsetof(r2.ginContextCount),
			"ginSignalCount": unsafe.Offsetof(r2.ginSignalCount), "ginCounterCount": unsafe.Offsetof(r2.ginCounterCount),
		}},
		"ncclDevCommRequirements_t/v23102": {unsafe.Sizeof(r3), map[string]uintptr{
			"size": unsafe.Offsetof(r3.size), "magic": unsafe.Offsetof(r3.magic), "version": unsafe.Offsetof(r3.version),
			"resourceRequirementsList": unsafe.Offsetof(r3.resourceRequirementsList),
			"teamRequirementsList":     unsafe.Offsetof(r3.teamRequirementsList),
			"lsaMultimem":              unsafe.Offsetof(r3.lsaMultimem), "barrierCount": unsafe.Offsetof(r3.barrierCount),
			"lsaBarrierCount": unsafe.Offsetof(r3.lsaBarrierCount), "railGinBarrierCount": unsafe.Offsetof(r3.railGinBarrierCount),
			"lsaLLA2ABlockCount": unsafe.Offsetof(r3.lsaLLA2ABlockCount), "lsaLLA2ASlotCount": unsafe.Offsetof(r3.lsaLLA2ASlotCount),
			"ginForceEnable": unsafe.Offsetof(r3.ginForceEnable), "ginContextCount": unsafe.Offsetof(r3.ginContextCount),
			"ginSignalCount": unsafe.Offsetof(r3.ginSignalCount), "ginCounterCount": unsafe.Offsetof(r3.ginCounterCount),
			"ginConnectionType": unsafe.Offsetof(r3.ginConnectionType), "ginExclusiveContexts": unsafe.Offsetof(r3.ginExclusiveContexts),
			"ginQueueDepth": unsafe.Offsetof(r3.ginQueueDepth), "ginTrafficClass": unsafe.Offsetof(r3.ginTrafficClass),
			"worldGinBarrierCount":     unsafe.Offsetof(r3.worldGinBarrierCount),
			"ginStrongSignalsRequired": unsafe.Offsetof(r3.ginStrongSignalsRequired),
			"ginVaSignalsRequired":     unsafe.Offsetof(r3.ginVaSignalsRequired),
			"ginCustomStride":          unsafe.Offsetof(r3.ginCustomStride), "ginType": unsafe.Offsetof(r3.ginType),
			"useRuntimeVersion": unsafe.Offsetof(r3.useRuntimeVersion), "cftCaps": unsafe.Offsetof(r3.cftCaps),
			"cftBarrierCount": unsafe.Offsetof(r3.cftBarrierCount),
		}},
	}
}

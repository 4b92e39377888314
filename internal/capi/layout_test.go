//go:build linux && cgo

package capi_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
)

// The layouts below are measured from NCCL's nccl.h of each release
// (x86-64), as the project's reference notes on NCCL's ABI list them
// (§3.1-§3.8).

type layoutWant struct {
	size    uintptr
	offsets map[string]uintptr
}

var wantLayouts = map[string]layoutWant{
	// §3.1: 128 opaque bytes.
	"ncclUniqueId": {128, map[string]uintptr{"internal": 0}},
	// §3.8: 256 bytes cover every release's ncclDevComm_t (88 to 240).
	"ncclDevComm_t": {256, map[string]uintptr{}},
	// §3.2: ncclConfig_t as of 2.30.7 (96 bytes), then 2.31.2's fields
	// (112 bytes) and 2.32.3's nvlsHostMode (120 bytes)
	// (internal/versions/ABI-2.31-2.32.md §4).
	"ncclConfig_t/v23203": {120, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "blocking": 16, "cgaClusterSize": 20, "minCTAs": 24, "maxCTAs": 28,
		"netName": 32, "splitShare": 40, "trafficClass": 44, "commName": 48, "collnetEnable": 56, "CTAPolicy": 60,
		"shrinkShare": 64, "nvlsCTAs": 68, "nChannelsPerNetPeer": 72, "nvlinkCentricSched": 76,
		"graphUsageMode": 80, "numRmaCtx": 84, "maxP2pPeers": 88, "graphStreamOrdering": 92,
		"launchOrderImplicit": 96, "numRmaSig": 100, "rmaEagerInit": 104, "hostCftMode": 108, "nvlsHostMode": 112,
	}},
	// ABI-2.31-2.32.md §5: ncclCommProperties_t of 2.31.0a16 and 2.31.2.
	"ncclCommProperties_t/v23100": {144, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "rank": 16, "nRanks": 20, "cudaDev": 24, "nvmlDev": 28,
		"deviceApiSupport": 32, "multimemSupport": 33, "ginType": 36, "nLsaTeams": 40, "hostRmaSupport": 44,
		"railedGinType": 48, "commHash": 56, "ginMinStride": 64, "ginConnectionType": 68, "ginSupport": 72,
		"devCommRuntimeVersionSize": 136,
	}},
	// ABI-2.31-2.32.md §3: ncclCollConfig_t of 2.32.3 (40 bytes in 2.31.0a16, 64
	// in 2.31.2), and ncclConfigExt_t.
	"ncclCollConfig_t/v23203": {72, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "ext": 16, "minCTAs": 24, "maxCTAs": 28, "nvlsCTAs": 32,
		"cgaClusterSize": 36, "algSelection": 40, "forceAlgSelection": 48, "CTAPolicy": 52, "userProfilerTag": 56,
		"launchCompletionEvent": 64,
	}},
	"ncclConfigExt_t": {24, map[string]uintptr{"next": 0, "vendorId": 8, "optionId": 12, "val": 16}},
	// §3.5: ncclCommProperties_t of 2.29.2-2.29.3 (1-byte ginType at 34).
	"ncclCommProperties_t/v22902": {40, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "rank": 16, "nRanks": 20, "cudaDev": 24, "nvmlDev": 28,
		"deviceApiSupport": 32, "multimemSupport": 33, "ginType": 34,
	}},
	// §3.5: 2.29.7-2.30.7.
	"ncclCommProperties_t/v22907": {56, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "rank": 16, "nRanks": 20, "cudaDev": 24, "nvmlDev": 28,
		"deviceApiSupport": 32, "multimemSupport": 33, "ginType": 36, "nLsaTeams": 40, "hostRmaSupport": 44,
		"railedGinType": 48,
	}},
	// §3.3.
	"ncclSimInfo_t": {24, map[string]uintptr{"size": 0, "magic": 8, "version": 12, "estimatedTime": 16}},
	// §3.4.
	"ncclWaitSignalDesc_t": {16, map[string]uintptr{"opCnt": 0, "peer": 4, "sigIdx": 8, "ctx": 12}},
	// §3.6: 2.28.3, no header.
	"ncclDevCommRequirements_t/v22803": {24, map[string]uintptr{
		"resourceRequirementsList": 0, "teamRequirementsList": 8, "lsaMultimem": 16, "lsaBarrierCount": 20,
	}},
	// §3.6: 2.28.7-2.28.9, no header.
	"ncclDevCommRequirements_t/v22807": {56, map[string]uintptr{
		"resourceRequirementsList": 0, "teamRequirementsList": 8, "lsaMultimem": 16, "barrierCount": 20,
		"lsaBarrierCount": 24, "railGinBarrierCount": 28, "lsaLLA2ABlockCount": 32, "lsaLLA2ASlotCount": 36,
		"ginForceEnable": 40, "ginContextCount": 44, "ginSignalCount": 48, "ginCounterCount": 52,
	}},
	// §3.6: 2.29.2 onwards, every field up to 2.30.7; then 2.31.0
	// (STyGIANet/nccl 2.31.0a16 core.h) and 2.31.2 (nccl4py's bindings of
	// 2.31.2, NVIDIA's 2.31.2 nccl_device/core.h): 120 bytes.
	"ncclDevCommRequirements_t/v23102": {120, map[string]uintptr{
		"size": 0, "magic": 8, "version": 12, "resourceRequirementsList": 16, "teamRequirementsList": 24,
		"lsaMultimem": 32, "barrierCount": 36, "lsaBarrierCount": 40, "railGinBarrierCount": 44,
		"lsaLLA2ABlockCount": 48, "lsaLLA2ASlotCount": 52, "ginForceEnable": 56, "ginContextCount": 60,
		"ginSignalCount": 64, "ginCounterCount": 68, "ginConnectionType": 72, "ginExclusiveContexts": 76,
		"ginQueueDepth": 80, "ginTrafficClass": 84, "worldGinBarrierCount": 88, "ginStrongSignalsRequired": 92,
		"ginVaSignalsRequired": 93, "ginCustomStride": 96, "ginType": 100, "useRuntimeVersion": 104,
		"cftCaps": 108, "cftBarrierCount": 112,
	}},
}

func TestLayouts(t *testing.T) {
	got := capi.Layouts()
	for name, want := range wantLayouts {
		l, ok := got[name]
		if !ok {
			t.Errorf("%s: missing from capi.Layouts()", name)
			continue
		}
		if l.Size != want.size {
			t.Errorf("%s: size %d, want %d", name, l.Size, want.size)
		}
		for field, off := range want.offsets {
			if g, ok := l.Offsets[field]; !ok {
				t.Errorf("%s.%s: missing", name, field)
			} else if g != off {
				t.Errorf("%s.%s: offset %d, want %d", name, field, g, off)
			}
		}
		for field := range l.Offsets {
			if _, ok := want.offsets[field]; !ok {
				t.Errorf("%s.%s: not pinned by this test", name, field)
			}
		}
	}
	for name := range got {
		if _, ok := wantLayouts[name]; !ok {
			t.Errorf("%s: a layout this test does not pin", name)
		}
	}
}

// The binding sends ncclConfig_t's 120 bytes only with a config declaring
// 2.32.3 or later, the 112 bytes up to hostCftMode (2.31's ncclConfig_t)
// otherwise: a 2.31 library never gets a struct larger than its own.
func TestConfigSize(t *testing.T) {
	l := capi.Layouts()["ncclConfig_t/v23203"]
	for _, tc := range []struct {
		version uint32
		size    int
	}{{21901, 112}, {23007, 112}, {23100, 112}, {23102, 112}, {23199, 112}, {23203, 120}, {23300, 120}} {
		if got := capi.ConfigSize(tc.version); got != tc.size {
			t.Errorf("ConfigSize(%d) = %d, want %d", tc.version, got, tc.size)
		}
	}
	if capi.ConfigV23203 != 23203 || uintptr(capi.ConfigSize(capi.ConfigV23203)) != l.Size {
		t.Errorf("the full struct (%d bytes) goes from %d", l.Size, capi.ConfigV23203)
	}
	if end := l.Offsets["hostCftMode"] + 4; uintptr(capi.ConfigSize(23102)) != end || l.Offsets["nvlsHostMode"] != end {
		t.Errorf("the 2.31 size %d does not end at hostCftMode's end %d, where nvlsHostMode (%d) starts",
			capi.ConfigSize(23102), end, l.Offsets["nvlsHostMode"])
	}
}

// A caller declaring an older device-API version passes a prefix of the
// v23102 requirements: 72 bytes for 2.29.2-2.29.3, 88 for 2.29.7, 96 for
// 2.30.3-2.30.7 (§3.6, §4.4), 112 for 2.31.0 (its useRuntimeVersion, then
// padding where 2.31.2 put cftCaps), 120 for 2.31.2. Each prefix holds the fields of its release and
// the next release's fields start after it, except ginTrafficClass (2.30.3),
// which 2.30.3 put at 84, in the tail padding of 2.29.7's 88 bytes.
func TestRequirementPrefixes(t *testing.T) {
	l := capi.Layouts()["ncclDevCommRequirements_t/v23102"]
	fieldSize := map[string]uintptr{
		"size": 8, "resourceRequirementsList": 8, "teamRequirementsList": 8,
		"lsaMultimem": 1, "ginForceEnable": 1, "ginExclusiveContexts": 1,
		"ginStrongSignalsRequired": 1, "ginVaSignalsRequired": 1, "useRuntimeVersion": 1,
	}
	sizeOf := func(f string) uintptr {
		if s, ok := fieldSize[f]; ok {
			return s
		}
		return 4
	}
	prefixes := []struct {
		size   uintptr
		last   string // the last field of the release
		next   string // the first field of the next release
		fields int    // fields in the prefix
	}{
		{72, "ginCounterCount", "ginConnectionType", 15},
		{88, "ginQueueDepth", "worldGinBarrierCount", 19}, // with ginTrafficClass in the padding
		{96, "ginVaSignalsRequired", "ginCustomStride", 22},
		{112, "useRuntimeVersion", "cftBarrierCount", 26}, // with 2.31.2's cftCaps in the padding
		{120, "cftBarrierCount", "", 27},
	}
	for _, p := range prefixes {
		if end := l.Offsets[p.last] + sizeOf(p.last); end > p.size {
			t.Errorf("prefix %d: %s ends at %d", p.size, p.last, end)
		}
		if p.next != "" && l.Offsets[p.next] < p.size {
			t.Errorf("prefix %d: %s of the next release starts at %d", p.size, p.next, l.Offsets[p.next])
		}
		n := 0
		for f, off := range l.Offsets {
			if off+sizeOf(f) <= p.size {
				n++
			}
		}
		if n != p.fields {
			t.Errorf("prefix %d holds %d fields, want %d", p.size, n, p.fields)
		}
	}
	// The sizes EncodeDevCommReqs produces are those prefixes.
	for _, size := range []int{72, 88, 96, 112, 120} {
		b := capi.EncodeDevCommReqs(capi.DevCommReqs{GinVaSignalsRequired: true}, capi.ReqsVersioned, 22902, size)
		if len(b) != size {
			t.Errorf("EncodeDevCommReqs(size %d) gave %d bytes", size, len(b))
		}
	}
	if b := capi.EncodeDevCommReqs(capi.DevCommReqs{}, capi.ReqsV22803, 0, 0); len(b) != 24 {
		t.Errorf("2.28.3 requirements: %d bytes, want 24", len(b))
	}
	if b := capi.EncodeDevCommReqs(capi.DevCommReqs{}, capi.ReqsV22807, 0, 0); len(b) != 56 {
		t.Errorf("2.28.7 requirements: %d bytes, want 56", len(b))
	}
}

// EncodeDevCommReqs writes each field at its offset.
func TestEncodeDevCommReqs(t *testing.T) {
	r := capi.DevCommReqs{
		LsaMultimem: true, BarrierCount: 2, LsaBarrierCount: 3, RailGinBarrierCount: 4, LsaLLA2ABlockCount: 5,
		LsaLLA2ASlotCount: 6, GinForceEnable: true, GinContextCount: 7, GinSignalCount: 8, GinCounterCount: 9,
		GinConnectionType: 1, GinExclusiveContexts: true, GinQueueDepth: 10, GinTrafficClass: 11,
		WorldGinBarrierCount: 12, GinStrongSignalsRequired: true, GinVaSignalsRequired: true,
		GinCustomStride: 13, GinType: 5, UseRuntimeVersion: true, CftCaps: 3, CftBarrierCount: 14,
	}
	i32 := func(b []byte, off int) int32 {
		return int32(uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24)
	}
	b := capi.EncodeDevCommReqs(r, capi.ReqsVersioned, 23102, 120)
	if got := uint64(i32(b, 0)); got != 120 {
		t.Errorf("size field %d", got)
	}
	if uint32(i32(b, 8)) != capi.APIMagic || i32(b, 12) != 23102 {
		t.Errorf("header magic %#x version %d", uint32(i32(b, 8)), i32(b, 12))
	}
	for off, want := range map[int]int32{36: 2, 40: 3, 44: 4, 48: 5, 52: 6, 60: 7, 64: 8, 68: 9, 72: 1, 80: 10, 84: 11, 88: 12,
		96: 13, 100: 5, 108: 3, 112: 14} {
		if got := i32(b, off); got != want {
			t.Errorf("v23102 offset %d = %d, want %d", off, got, want)
		}
	}
	for _, off := range []int{32, 56, 76, 92, 93, 104} {
		if b[off] != 1 {
			t.Errorf("v23102 bool at %d = %d, want 1", off, b[off])
		}
	}
	b = capi.EncodeDevCommReqs(r, capi.ReqsV22803, 0, 0)
	if b[16] != 1 || i32(b, 20) != 3 {
		t.Errorf("v22803: lsaMultimem %d lsaBarrierCount %d", b[16], i32(b, 20))
	}
	b = capi.EncodeDevCommReqs(r, capi.ReqsV22807, 0, 0)
	for off, want := range map[int]int32{20: 2, 24: 3, 28: 4, 32: 5, 36: 6, 44: 7, 48: 8, 52: 9} {
		if got := i32(b, off); got != want {
			t.Errorf("v22807 offset %d = %d, want %d", off, got, want)
		}
	}
	if b[16] != 1 || b[40] != 1 {
		t.Errorf("v22807 bools %d %d", b[16], b[40])
	}
}

// The first release of a handful of functions, from NCCL's nccl.h per
// release (the reference notes on NCCL's ABI, §1).
func TestSymbolReleases(t *testing.T) {
	want := map[string]int{
		"ncclGetVersion": 20305, "ncclGetUniqueId": 20305, "ncclGetErrorString": 20305, "ncclGetLastError": 21304,
		"ncclCommInitRank": 20305, "ncclCommInitRankConfig": 21403, "ncclCommInitRankScalable": 22304,
		"ncclCommSplit": 21801, "ncclCommShrink": 22703, "ncclCommGetUniqueId": 22902,
		"ncclCommGrow": 22902, "ncclCommFinalize": 21403, "ncclCommDestroy": 20305, "ncclCommAbort": 20402,
		"ncclCommRevoke": 22807, "ncclCommSuspend": 22907, "ncclCommResume": 22907, "ncclCommGetAsyncError": 20402,
		"ncclCommMemStats": 22907, "ncclCommQueryProperties": 22902, "ncclMemAlloc": 21901, "ncclMemFree": 21901,
		"ncclCommRegister": 21901, "ncclCommWindowRegister": 22703, "ncclWinGetUserPtr": 22902,
		"ncclRedOpCreatePreMulSum": 21104, "ncclRedOpDestroy": 21104, "ncclAllReduce": 20305, "ncclAlltoAll": 22803,
		"ncclGather": 22803, "ncclScatter": 22803, "ncclSend": 20703, "ncclRecv": 20703, "ncclPutSignal": 22902,
		"ncclSignal": 22902, "ncclWaitSignal": 22902, "ncclGroupSimulateEnd": 22203, "ncclDevCommCreate": 22803,
		"ncclDevCommDestroy": 22803, "ncclGetLsaDevicePointer": 22902, "ncclGetPeerDevicePointer": 22902,
		"ncclSetEncryption":   23203,
		"ncclAllReduceConfig": 23100, "ncclBroadcastConfig": 23100, "ncclReduceConfig": 23100,
		"ncclAllGatherConfig": 23100, "ncclReduceScatterConfig": 23100, "ncclAlltoAllConfig": 23100,
		"ncclGatherConfig": 23100, "ncclScatterConfig": 23100,
		// NVIDIA/nccl: in src/nccl_device/gin_barrier.cc from v2.28.7-1, not
		// in v2.28.3-1; the CFT functions are in 2.31.2's core.h, not in
		// the 2.31.0a16 fork.
		"ncclGinBarrierCreateRequirement": 22807, "ncclTeamCft": 23102, "ncclTeamCftMultimem": 23102,
		"ncclGetCftDeviceLeInfo": 23102, "ncclGetPeerDeviceLeInfo": 23102, "ncclGetMultimemDeviceLeInfo": 23102,
	}
	seen := map[string]bool{}
	for _, s := range capi.NCCLSymbols() {
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Present && !capiLoaded() {
			t.Errorf("%s present with no library loaded", s.Name)
		}
		if w, ok := want[s.Name]; ok && s.Since != w {
			t.Errorf("%s: first release %d, want %d", s.Name, s.Since, w)
		}
		// 2.32.3: ncclSetEncryption, resolved only to report its presence.
		if s.Since < 20305 || s.Since > 23203 {
			t.Errorf("%s: first release %d out of range", s.Name, s.Since)
		}
	}
	var missing []string
	for name := range want {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("not in the shim's list: %v", missing)
	}
}

func capiLoaded() bool { return capi.NCCLPath() != "" }

// zcapi_other.go is what gen_stub.go generates from capi.go and abi.go.
func TestStubIsGenerated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	out := filepath.Join(t.TempDir(), "zcapi_other.go")
	cmd := exec.Command(goTool, "run", "gen_stub.go", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_stub.go: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("zcapi_other.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, have) {
		t.Fatal("zcapi_other.go is out of date: run `go generate ./internal/capi` (go run gen_stub.go)")
	}
}

// zsyms.go numbers the functions as the shim's C enum does.
func TestSymOrderMatchesC(t *testing.T) {
	syms := capi.NCCLSymbols()
	if len(syms) != capi.NumSyms {
		t.Fatalf("%d symbols in C, %d in zsyms.go", len(syms), capi.NumSyms)
	}
	for i, s := range syms {
		if s.Name != capi.SymName[i] {
			t.Errorf("symbol %d: C names it %q, zsyms.go %q", i, s.Name, capi.SymName[i])
		}
	}
}

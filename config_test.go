package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

const undef = int32(capi.UndefInt)

// unsetConfig is what an empty Config encodes to for release r: every field
// NCCL_CONFIG_UNDEF_INT or NULL, as NCCL_CONFIG_INITIALIZER leaves it.
func unsetConfig(r nccl.Release) capi.Config {
	return capi.Config{
		Version: uint32(min(r, nccl.ABIRelease)), Blocking: undef, CGAClusterSize: undef, MinCTAs: undef, MaxCTAs: undef,
		SplitShare: undef, TrafficClass: undef, CollnetEnable: undef, CTAPolicy: undef, ShrinkShare: undef,
		NvlsCTAs: undef, NChannelsPerNetPeer: undef, NvlinkCentricSched: undef, GraphUsageMode: undef,
		NumRmaCtx: undef, MaxP2pPeers: undef, GraphStreamOrdering: undef, LaunchOrderImplicit: undef, NumRmaSig: undef,
		RmaEagerInit: undef, HostCftMode: undef, NvlsHostMode: undef,
	}
}

func encodeConfig(t *testing.T, cfg *nccl.Config, r nccl.Release) (capi.Config, bool) {
	t.Helper()
	c, blocking, err := nccl.EncodeConfigForTest(cfg, "Init", r)
	if err != nil {
		t.Fatalf("encode for %s: %v", r, err)
	}
	return *c, blocking
}

func TestConfigUnset(t *testing.T) {
	for _, r := range []nccl.Release{21901, 22803, 23007, 23105} {
		for _, cfg := range []*nccl.Config{nil, {}, {Device: nccl.Ptr(1)}} {
			got, blocking := encodeConfig(t, cfg, r)
			if want := unsetConfig(r); got != want {
				t.Errorf("%s, %+v: encoded %+v, want %+v", r, cfg, got, want)
			}
			if !blocking {
				t.Errorf("%s: an unset config is not blocking", r)
			}
		}
	}
	got, blocking := encodeConfig(t, &nccl.Config{Blocking: nccl.Ptr(false)}, 23007)
	if blocking || got.Blocking != 0 {
		t.Errorf("Blocking false: blocking %v, sent %d", blocking, got.Blocking)
	}
	got, blocking = encodeConfig(t, &nccl.Config{Blocking: nccl.Ptr(true)}, 23007)
	if !blocking || got.Blocking != 1 {
		t.Errorf("Blocking true: blocking %v, sent %d", blocking, got.Blocking)
	}
}

// Every field set lands in its own slot.
func TestConfigEveryField(t *testing.T) {
	policy := nccl.CTAPolicyEfficiency | nccl.CTAPolicyZero
	mode := nccl.GraphUsageOne
	cfg := &nccl.Config{
		CGAClusterSize: nccl.Ptr(2), MinCTAs: nccl.Ptr(3), MaxCTAs: nccl.Ptr(30), NetName: "Socket",
		SplitShare: nccl.Ptr(true), TrafficClass: nccl.Ptr(105), CommName: "world", CollNetEnable: nccl.Ptr(false),
		CTAPolicy: &policy, ShrinkShare: nccl.Ptr(true), NVLSCTAs: nccl.Ptr(16), NChannelsPerNetPeer: nccl.Ptr(4),
		NVLinkCentricSched: nccl.Ptr(true), GraphUsageMode: &mode, NumRMACtx: nccl.Ptr(2), MaxP2PPeers: nccl.Ptr(8),
		GraphStreamOrdering: nccl.Ptr(false),
	}
	got, blocking := encodeConfig(t, cfg, 23007)
	want := capi.Config{
		Version: 23007, Blocking: undef, CGAClusterSize: 2, MinCTAs: 3, MaxCTAs: 30, NetName: "Socket", SplitShare: 1,
		TrafficClass: 105, CommName: "world", CollnetEnable: 0, CTAPolicy: 3, ShrinkShare: 1, NvlsCTAs: 16,
		NChannelsPerNetPeer: 4, NvlinkCentricSched: 1, GraphUsageMode: 1, NumRmaCtx: 2, MaxP2pPeers: 8,
		GraphStreamOrdering: 0, LaunchOrderImplicit: undef, NumRmaSig: undef, RmaEagerInit: undef, HostCftMode: undef,
		NvlsHostMode: undef,
	}
	if got != want || !blocking {
		t.Errorf("encoded %+v (blocking %v), want %+v", got, blocking, want)
	}
	// A newer library gets the binding's newest version.
	if got, _ := encodeConfig(t, cfg, 23105); got.Version != 23105 {
		t.Errorf("version for 2.31.5: %d", got.Version)
	}
}

func wantConfigArg(t *testing.T, cfg *nccl.Config, r nccl.Release, field string) {
	t.Helper()
	_, _, err := nccl.EncodeConfigForTest(cfg, "Init", r)
	var ae *nccl.ArgError
	if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != "Config."+field || ae.Op != "Init" {
		t.Errorf("%s on %s: %v, want an ArgError for Config.%s", field, r, err, field)
	}
}

func TestConfigRanges(t *testing.T) {
	bad := map[string][]*nccl.Config{
		"CGAClusterSize":      {{CGAClusterSize: nccl.Ptr(-1)}, {CGAClusterSize: nccl.Ptr(9)}},
		"MinCTAs":             {{MinCTAs: nccl.Ptr(0)}, {MinCTAs: nccl.Ptr(-3)}, {MinCTAs: nccl.Ptr(9), MaxCTAs: nccl.Ptr(8)}},
		"MaxCTAs":             {{MaxCTAs: nccl.Ptr(0)}, {MinCTAs: nccl.Ptr(1), MaxCTAs: nccl.Ptr(-1)}},
		"TrafficClass":        {{TrafficClass: nccl.Ptr(-1)}},
		"NVLSCTAs":            {{NVLSCTAs: nccl.Ptr(0)}},
		"NChannelsPerNetPeer": {{NChannelsPerNetPeer: nccl.Ptr(0)}, {NChannelsPerNetPeer: nccl.Ptr(65)}},
		"NumRMACtx":           {{NumRMACtx: nccl.Ptr(-1)}},
		"MaxP2PPeers":         {{MaxP2PPeers: nccl.Ptr(0)}},
		"CTAPolicy":           {{CTAPolicy: ptrPolicy(4)}, {CTAPolicy: ptrPolicy(-1)}},
		"GraphUsageMode":      {{GraphUsageMode: ptrMode(3)}, {GraphUsageMode: ptrMode(-1)}},
		"GraphStreamOrdering": {{GraphStreamOrdering: nccl.Ptr(false)}, {GraphStreamOrdering: nccl.Ptr(false), GraphUsageMode: ptrMode(2)}},
	}
	for field, cfgs := range bad {
		for _, cfg := range cfgs {
			wantConfigArg(t, cfg, 23007, field)
		}
	}
	good := []*nccl.Config{
		{CGAClusterSize: nccl.Ptr(0)}, {CGAClusterSize: nccl.Ptr(8)}, {MinCTAs: nccl.Ptr(4), MaxCTAs: nccl.Ptr(4)},
		{MaxCTAs: nccl.Ptr(1)}, {TrafficClass: nccl.Ptr(0)}, {NChannelsPerNetPeer: nccl.Ptr(64)}, {NumRMACtx: nccl.Ptr(0)},
		{GraphUsageMode: ptrMode(0)}, {GraphUsageMode: ptrMode(2)}, {CTAPolicy: ptrPolicy(0)},
		{GraphStreamOrdering: nccl.Ptr(true)}, {GraphStreamOrdering: nccl.Ptr(false), GraphUsageMode: ptrMode(0)},
		{GraphStreamOrdering: nccl.Ptr(false), GraphUsageMode: ptrMode(1)},
	}
	for _, cfg := range good {
		if _, _, err := nccl.EncodeConfigForTest(cfg, "Init", 23007); err != nil {
			t.Errorf("%+v: %v", *cfg, err)
		}
	}
}

func ptrPolicy(p nccl.CTAPolicy) *nccl.CTAPolicy { return &p }

func ptrCFT(m nccl.HostCFTMode) *nccl.HostCFTMode { return &m }

// The 2.31 fields land in their slots of the 112-byte struct, declaring the
// loaded release; bad values fail before NCCL.
func TestConfig231Fields(t *testing.T) {
	cfg := &nccl.Config{LaunchOrderImplicit: nccl.Ptr(true), NumRMASig: nccl.Ptr(0), RMAEagerInit: nccl.Ptr(false),
		HostCFTMode: ptrCFT(nccl.HostCFTDisable)}
	got, _ := encodeConfig(t, cfg, 23102)
	want := unsetConfig(23102)
	want.LaunchOrderImplicit, want.NumRmaSig, want.RmaEagerInit, want.HostCftMode = 1, 0, 0, 2
	if got != want {
		t.Errorf("encoded %+v, want %+v", got, want)
	}
	// 2.32.3 is declared as itself.
	if got, _ := encodeConfig(t, cfg, 23203); got.Version != 23203 {
		t.Errorf("version for 2.32.3: %d", got.Version)
	}
	wantConfigArg(t, &nccl.Config{NumRMASig: nccl.Ptr(-1)}, 23102, "NumRMASig")
	wantConfigArg(t, &nccl.Config{HostCFTMode: ptrCFT(0)}, 23102, "HostCFTMode")
	wantConfigArg(t, &nccl.Config{HostCFTMode: ptrCFT(4)}, 23102, "HostCFTMode")
}

// End to end on the fakes of 2.31.0a16, 2.31.2 and 2.32.3: the library
// reads the 2.31 fields (it rejects what NCCL's parseCommConfig rejects, so
// a field landing in the wrong slot fails there) and accepts the binding's
// struct declaring each release (112 bytes; 120 for 2.32.3).
func TestConfig231AcceptedByLibrary(t *testing.T) {
	for _, release := range []int{23100, 23102, 23203} {
		faketest.Run(t, faketest.Env{Release: release}, func(t *testing.T) {
			cfg := &nccl.Config{LaunchOrderImplicit: nccl.Ptr(true), NumRMASig: nccl.Ptr(3), RMAEagerInit: nccl.Ptr(true)}
			if release >= 23102 {
				cfg.HostCFTMode = ptrCFT(nccl.HostCFTFallback)
			}
			id := newFakeID(t)
			c, err := nccl.Init(1, 0, id, cfg)
			if err != nil {
				t.Fatalf("Init on %d: %v", release, err)
			}
			if err := c.Destroy(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func ptrMode(m nccl.GraphUsageMode) *nccl.GraphUsageMode { return &m }

// NCCL compares minCTAs with maxCTAs even when maxCTAs is unset (INT_MIN),
// so MinCTAs alone sends NCCL's default maximum: MAXCHANNELS, 32 before
// 2.25.1 and 64 from it.
func TestConfigMinCTAsAlone(t *testing.T) {
	for r, maxCTAs := range map[nccl.Release]int32{21901: 32, 22403: 32, 22501: 64, 23007: 64} {
		got, _ := encodeConfig(t, &nccl.Config{MinCTAs: nccl.Ptr(4)}, r)
		if got.MinCTAs != 4 || got.MaxCTAs != maxCTAs {
			t.Errorf("%s: minCTAs %d maxCTAs %d, want 4 and %d", r, got.MinCTAs, got.MaxCTAs, maxCTAs)
		}
	}
	wantConfigArg(t, &nccl.Config{MinCTAs: nccl.Ptr(33)}, 22403, "MinCTAs")
	if _, _, err := nccl.EncodeConfigForTest(&nccl.Config{MinCTAs: nccl.Ptr(33)}, "Init", 22501); err != nil {
		t.Errorf("MinCTAs 33 on 2.25.1: %v", err)
	}
}

// A field newer than the loaded release is an error, never dropped.
func TestConfigFieldNewerThanLibrary(t *testing.T) {
	zero, both := nccl.CTAPolicyZero, nccl.CTAPolicyEfficiency|nccl.CTAPolicyZero
	eff := nccl.CTAPolicyEfficiency
	mode := nccl.GraphUsageNone
	cases := []struct {
		cfg   *nccl.Config
		r     nccl.Release
		name  string
		since nccl.Release
	}{
		{&nccl.Config{TrafficClass: nccl.Ptr(1)}, 22503, "ncclConfig_t.trafficClass", 22602},
		{&nccl.Config{CommName: "x"}, 22602, "ncclConfig_t.commName", 22703},
		{&nccl.Config{CollNetEnable: nccl.Ptr(true)}, 22602, "ncclConfig_t.collnetEnable", 22703},
		{&nccl.Config{CTAPolicy: &eff}, 22602, "ncclConfig_t.CTAPolicy", 22703},
		{&nccl.Config{ShrinkShare: nccl.Ptr(true)}, 22602, "ncclConfig_t.shrinkShare", 22703},
		{&nccl.Config{NVLSCTAs: nccl.Ptr(2)}, 22602, "ncclConfig_t.nvlsCTAs", 22703},
		{&nccl.Config{NChannelsPerNetPeer: nccl.Ptr(2)}, 22703, "ncclConfig_t.nChannelsPerNetPeer", 22803},
		{&nccl.Config{NVLinkCentricSched: nccl.Ptr(true)}, 22703, "ncclConfig_t.nvlinkCentricSched", 22803},
		{&nccl.Config{GraphUsageMode: &mode}, 22809, "ncclConfig_t.graphUsageMode", 22902},
		{&nccl.Config{NumRMACtx: nccl.Ptr(1)}, 22809, "ncclConfig_t.numRmaCtx", 22902},
		{&nccl.Config{MaxP2PPeers: nccl.Ptr(1)}, 22907, "ncclConfig_t.maxP2pPeers", 23003},
		{&nccl.Config{GraphStreamOrdering: nccl.Ptr(true)}, 23004, "ncclConfig_t.graphStreamOrdering", 23007},
		{&nccl.Config{LaunchOrderImplicit: nccl.Ptr(true)}, 23007, "ncclConfig_t.launchOrderImplicit", 23100},
		{&nccl.Config{NumRMASig: nccl.Ptr(4)}, 23007, "ncclConfig_t.numRmaSig", 23100},
		{&nccl.Config{RMAEagerInit: nccl.Ptr(true)}, 23007, "ncclConfig_t.rmaEagerInit", 23100},
		{&nccl.Config{HostCFTMode: ptrCFT(nccl.HostCFTFallback)}, 23100, "ncclConfig_t.hostCftMode", 23102},
		{&nccl.Config{NVLSHostMode: ptrNVLS(nccl.NVLSHostEnable)}, 23102, "ncclConfig_t.nvlsHostMode", 23203},
		{&nccl.Config{CTAPolicy: &zero}, 22703, "NCCL_CTA_POLICY_ZERO", 22803},
		{&nccl.Config{CTAPolicy: &both}, 22803, "combined CTA policies", 22902},
	}
	for _, c := range cases {
		_, _, err := nccl.EncodeConfigForTest(c.cfg, "Init", c.r)
		var ue *nccl.UnsupportedError
		if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ue) {
			t.Errorf("%s on %s: %v, want an UnsupportedError", c.name, c.r, err)
			continue
		}
		if ue.Feature != c.name || ue.Since != c.since || ue.Loaded != c.r {
			t.Errorf("%s on %s: %+v, want Func %q Since %s", c.name, c.r, *ue, c.name, c.since)
		}
		if !strings.Contains(err.Error(), c.since.String()) {
			t.Errorf("%q does not name release %s", err, c.since)
		}
		// On the release that introduced it, the field is accepted.
		if _, _, err := nccl.EncodeConfigForTest(c.cfg, "Init", c.since); err != nil {
			t.Errorf("%s on %s: %v", c.name, c.since, err)
		}
	}
}

// End to end: the fake NCCL parses configs as NCCL's parseCommConfig does
// (it rejects minCTAs > maxCTAs with maxCTAs unset, a bad magic, values out
// of range), and accepts what the binding sends.
func TestConfigAcceptedByLibrary(t *testing.T) {
	policy := nccl.CTAPolicyEfficiency
	mode := nccl.GraphUsageNone
	full := &nccl.Config{
		Device: nccl.Ptr(1), CGAClusterSize: nccl.Ptr(2), MinCTAs: nccl.Ptr(2), MaxCTAs: nccl.Ptr(16), NetName: "Socket",
		SplitShare: nccl.Ptr(true), TrafficClass: nccl.Ptr(3), CommName: "all-fields", CollNetEnable: nccl.Ptr(true),
		CTAPolicy: &policy, ShrinkShare: nccl.Ptr(false), NVLSCTAs: nccl.Ptr(4), NChannelsPerNetPeer: nccl.Ptr(64),
		NVLinkCentricSched: nccl.Ptr(false), GraphUsageMode: &mode, NumRMACtx: nccl.Ptr(0), MaxP2PPeers: nccl.Ptr(1),
		GraphStreamOrdering: nccl.Ptr(false),
	}
	for _, tc := range []struct {
		release int
		cfg     *nccl.Config
	}{
		{23007, full},
		{23007, &nccl.Config{MinCTAs: nccl.Ptr(64)}},
		{21901, &nccl.Config{MinCTAs: nccl.Ptr(32), CGAClusterSize: nccl.Ptr(1), NetName: "IB"}},
		{22803, &nccl.Config{CTAPolicy: ptrPolicy(nccl.CTAPolicyZero), NChannelsPerNetPeer: nccl.Ptr(64)}},
	} {
		faketest.Run(t, faketest.Env{Release: tc.release}, func(t *testing.T) {
			id := newFakeID(t)
			c, err := nccl.Init(1, 0, id, tc.cfg)
			if err != nil {
				t.Fatalf("Init with %+v: %v", *tc.cfg, err)
			}
			defer c.Destroy()
			want := 0
			if tc.cfg.Device != nil {
				want = *tc.cfg.Device
			}
			if d, err := c.Device(); err != nil || int(d) != want {
				t.Errorf("Device = %s, %v; want cuda:%d", d, err, want)
			}
		})
	}
}

package nccl

import (
	"fmt"
	"math"
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Config sets up a communicator (ncclConfig_t, every field up to NCCL
// 2.32.3). Unlike [CollConfig], ncclConfig_t has no vendor extension list
// (no ext member in any release). A nil field keeps NCCL's default, as NCCL_CONFIG_INITIALIZER
// leaves it; the binding never sends a zero NCCL did not ask for. Set fields
// with new(v) (Go 1.26) or [Ptr](v).
//
// Each field newer than the oldest supported release ([MinRelease]) names
// its first release; the others are in every supported release. A field the
// loaded NCCL does not know makes the call fail with an [*UnsupportedError]
// (wrapping [ErrUnsupported]) instead of being dropped. Values NCCL would reject,
// or that contradict each other, fail with [ErrInvalidArgument] before NCCL
// is called. Environment variables (NCCL_COMM_BLOCKING, NCCL_MIN_CTAS, ...)
// still override the config, as in NCCL.
type Config struct {
	// Device is the CUDA device of the new rank. It is the binding's, not
	// NCCL's: nil means device 0 for [Init], the parent's device for Split,
	// Shrink and Grow on existing ranks (where another device is an error).
	Device *int

	// Blocking false makes the communicator non-blocking: calls return
	// before NCCL has finished, and the communicator's next call, or Wait,
	// waits for them. Only a non-blocking communicator's init, split,
	// finalize... can be cut short by a context: a blocking call waits inside
	// NCCL, where nothing can interrupt it safely. NCCL runs each group of a
	// non-blocking communicator with work on a thread of its own, which
	// costs microseconds per collective. Default true.
	Blocking *bool
	// CGAClusterSize is the CUDA thread block cluster size, 0 to 8.
	CGAClusterSize *int
	// MinCTAs and MaxCTAs bound the number of CTAs (channels) NCCL uses.
	// NCCL compares them even when MaxCTAs is unset, so MinCTAs alone sets
	// MaxCTAs to NCCL's default maximum.
	MinCTAs, MaxCTAs *int
	// NetName selects the network module, e.g. "IB" or "Socket" (NCCL copies
	// it). Empty: automatic.
	NetName string
	// SplitShare shares resources between a parent and its
	// [Communicator.Split] children.
	SplitShare *bool
	// TrafficClass is passed to the network; its meaning depends on the
	// network. NCCL 2.26.2.
	TrafficClass *int
	// CommName names the communicator in NCCL's logs and profiler. The
	// binding keeps the string alive for the process's life, as NCCL keeps
	// the pointer. NCCL 2.27.3.
	CommName string
	// CollNetEnable enables CollNet (for example IB SHARP). NCCL 2.27.3.
	CollNetEnable *bool
	// CTAPolicy: [CTAPolicyDefault], [CTAPolicyEfficiency] (2.27.3),
	// [CTAPolicyZero] (2.28.3), or both flags (2.29.2). NCCL 2.27.3.
	CTAPolicy *CTAPolicy
	// ShrinkShare shares resources with Shrink children (default flag
	// only). NCCL 2.27.3.
	ShrinkShare *bool
	// NVLSCTAs is the number of CTAs of NVLS kernels, > 0. NCCL 2.27.3.
	NVLSCTAs *int
	// NChannelsPerNetPeer, > 0, rounded up to a power of two. NCCL 2.28.3.
	NChannelsPerNetPeer *int
	// NVLinkCentricSched schedules NVLink first. NCCL 2.28.3.
	NVLinkCentricSched *bool
	// GraphUsageMode says how the communicator is used in CUDA graphs.
	// NCCL 2.29.2.
	GraphUsageMode *GraphUsageMode
	// NumRMACtx is the number of RMA contexts, >= 0. NCCL 2.29.2.
	NumRMACtx *int
	// MaxP2PPeers bounds the peers a rank talks to at once over P2P, > 0.
	// NCCL 2.30.3.
	MaxP2PPeers *int
	// GraphStreamOrdering overrides NCCL_GRAPH_STREAM_ORDERING; false is
	// incompatible with [GraphUsageMultiple] (NCCL's default mode). NCCL 2.30.7.
	GraphStreamOrdering *bool
	// LaunchOrderImplicit true orders this communicator's operations with
	// those of other communicators on the same device by the host's launch
	// order (NCCL_LAUNCH_ORDER_IMPLICIT for this communicator; the
	// environment variable overrides it): every device must then see the
	// same host launch order. Unset behaves as false. NCCL 2.31.0.
	LaunchOrderImplicit *bool
	// NumRMASig is the number of one-sided signal indexes per RMA context,
	// >= 0 (NCCL's default 1): the signal index of NCCL's one-sided calls
	// lies in [0, NumRMASig). NCCL 2.31.0.
	NumRMASig *int
	// RMAEagerInit true sets up the one-sided signals at init instead of
	// at the first window registration (NCCL_RMA_EAGER_INIT, which
	// overrides it); Signal and WaitSignal without a registered window need
	// it. Default false. NCCL 2.31.0.
	RMAEagerInit *bool
	// HostCFTMode is ncclConfig_t.hostCftMode, whether NCCL's host side
	// uses CFT, which needs Blackwell GPUs and CUDA 13.3 (NCCL's release
	// notes of 2.31.2): [HostCFTEnable], [HostCFTDisable] or
	// [HostCFTFallback]. Unset is NCCL's default. NCCL 2.31.2.
	HostCFTMode *HostCFTMode
	// NVLSHostMode is ncclConfig_t.nvlsHostMode, which parts of NVLink
	// SHARP (NVLS) NCCL's host side uses for this communicator:
	// [NVLSHostEnable], [NVLSHostDisableTransport] and
	// [NVLSHostDisableSymmetricMultimem] (combined with |), or
	// [NVLSHostDisable]; any other value fails with [ErrInvalidArgument]
	// naming the field, before NCCL is called. Unset is NCCL's default
	// (NVIDIA's documentation: currently as NVLSHostEnable). The binding
	// sends it in NCCL 2.32.3's 120-byte ncclConfig_t, and sends an older
	// library its 112-byte layout. NCCL 2.32.3.
	NVLSHostMode *NVLSHostMode
}

// HostCFTMode is ncclHostCftMode_t ([Config.HostCFTMode], NCCL 2.31.2).
type HostCFTMode int32

// Host CFT modes (nccl4py's bindings of NCCL 2.31.2; unset is NCCL's
// default, NCCL_CONFIG_UNDEF_INT).
const (
	HostCFTEnable   HostCFTMode = 1 // ncclHostCftEnable
	HostCFTDisable  HostCFTMode = 2 // ncclHostCftDisable
	HostCFTFallback HostCFTMode = 3 // ncclHostCftFallback
)

// String is the C name, e.g. "ncclHostCftEnable"; other values print as
// "ncclHostCftMode_t(N)".
func (m HostCFTMode) String() string {
	switch m {
	case HostCFTEnable:
		return "ncclHostCftEnable"
	case HostCFTDisable:
		return "ncclHostCftDisable"
	case HostCFTFallback:
		return "ncclHostCftFallback"
	}
	return fmt.Sprintf("ncclHostCftMode_t(%d)", int32(m))
}

// NVLSHostMode is ncclNvlsHostMode_t ([Config.NVLSHostMode], NCCL 2.32.3):
// a bitmask of host NVLS parts to turn off. NVIDIA's documentation: the
// flags do not change the communicator's reported multimem support
// ([Communicator.MultimemSupport]) nor stop device-API calls from
// allocating multimem resources.
type NVLSHostMode int32

// Host NVLS modes (the values of nccl4py's NcclNvlsHostMode, NVIDIA's
// documentation of NCCL 2.32; unset is NCCL's default,
// NCCL_CONFIG_UNDEF_INT).
const (
	// NVLSHostEnable uses every host NVLS part (ncclNvlsHostModeEnable).
	NVLSHostEnable NVLSHostMode = 0
	// NVLSHostDisableTransport turns off the NVLS collective transport and
	// its registered-buffer optimization: no NVLS, NVLS_TREE or multi-RPN
	// PAT algorithm (ncclNvlsHostModeDisableTransport).
	NVLSHostDisableTransport NVLSHostMode = 1
	// NVLSHostDisableSymmetricMultimem turns off multimem in NCCL's
	// symmetric kernels and copy-engine collectives
	// (ncclNvlsHostModeDisableSymmetricMultimem).
	NVLSHostDisableSymmetricMultimem NVLSHostMode = 2
	// NVLSHostDisable turns off every host NVLS part, present and future:
	// all non-reserved bits (ncclNvlsHostModeDisable, INT_MAX).
	NVLSHostDisable NVLSHostMode = math.MaxInt32
)

// String is the C name, e.g. "ncclNvlsHostModeDisableTransport", or the
// names of the flags joined by "|"
// ("ncclNvlsHostModeDisableTransport|ncclNvlsHostModeDisableSymmetricMultimem");
// other values print as "ncclNvlsHostMode_t(N)".
func (m NVLSHostMode) String() string {
	switch m {
	case NVLSHostEnable:
		return "ncclNvlsHostModeEnable"
	case NVLSHostDisable:
		return "ncclNvlsHostModeDisable"
	case NVLSHostDisableTransport:
		return "ncclNvlsHostModeDisableTransport"
	case NVLSHostDisableSymmetricMultimem:
		return "ncclNvlsHostModeDisableSymmetricMultimem"
	case NVLSHostDisableTransport | NVLSHostDisableSymmetricMultimem:
		return "ncclNvlsHostModeDisableTransport|ncclNvlsHostModeDisableSymmetricMultimem"
	}
	return fmt.Sprintf("ncclNvlsHostMode_t(%d)", int32(m))
}

// maxInt32 bounds what a C int argument can hold.
const maxInt32 = int(^uint32(0) >> 1)

// commName is CommName, or "" for a nil config.
func (cfg *Config) commName() string {
	if cfg == nil {
		return ""
	}
	return cfg.CommName
}

// Ptr returns a pointer to v, for [Config] fields: nccl.Ptr(false).
func Ptr[T any](v T) *T { return &v }

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// maxChannels is MAXCHANNELS, NCCL's default for maxCTAs.
func maxChannels(r Release) int {
	if has(r, versions.MaxChannels64) {
		return 64
	}
	return 32
}

// encode validates cfg against the loaded release and builds the C config.
// blocking reports whether the communicator is blocking (the default).
func (cfg *Config) encode(op string, r Release) (c *capi.Config, blocking bool, err error) {
	out := capi.NewConfig(uint32(versions.ConfigVersion(int(r))))
	if cfg == nil {
		return &out, true, nil
	}
	if err := checkFields(cfg, r); err != nil {
		return nil, false, err
	}
	bad := func(field, format string, a ...any) error {
		return argErr(op, "Config."+field, format, a...)
	}
	intField := func(p *int, field string, lo, hi int) (int32, error) { return cInt(p, field, lo, hi, bad) }
	boolField := func(p *bool) int32 {
		if p == nil {
			return capi.UndefInt
		}
		return b2i(*p)
	}
	blocking = cfg.Blocking == nil || *cfg.Blocking
	if cfg.Blocking != nil {
		out.Blocking = b2i(*cfg.Blocking)
	}
	if out.CGAClusterSize, err = intField(cfg.CGAClusterSize, "CGAClusterSize", 0, 8); err != nil {
		return nil, false, err
	}
	if out.MinCTAs, err = intField(cfg.MinCTAs, "MinCTAs", 1, maxInt32); err != nil {
		return nil, false, err
	}
	if out.MaxCTAs, err = intField(cfg.MaxCTAs, "MaxCTAs", 1, maxInt32); err != nil {
		return nil, false, err
	}
	switch {
	case cfg.MinCTAs != nil && cfg.MaxCTAs != nil && *cfg.MinCTAs > *cfg.MaxCTAs:
		return nil, false, bad("MinCTAs", "%d exceeds MaxCTAs %d", *cfg.MinCTAs, *cfg.MaxCTAs)
	case cfg.MinCTAs != nil && cfg.MaxCTAs == nil:
		if *cfg.MinCTAs > maxChannels(r) {
			return nil, false, bad("MinCTAs", "%d exceeds NCCL %s's maximum of %d", *cfg.MinCTAs, r, maxChannels(r))
		}
		out.MaxCTAs = int32(maxChannels(r))
	}
	for _, f := range [...]struct{ name, s string }{{"NetName", cfg.NetName}, {"CommName", cfg.CommName}} {
		if strings.IndexByte(f.s, 0) >= 0 {
			return nil, false, bad(f.name, "%q holds a NUL byte: NCCL reads a NUL-terminated C string", f.s)
		}
	}
	out.NetName = cfg.NetName
	out.SplitShare = boolField(cfg.SplitShare)
	if out.TrafficClass, err = intField(cfg.TrafficClass, "TrafficClass", 0, maxInt32); err != nil {
		return nil, false, err
	}
	out.CommName = cfg.CommName
	out.CollnetEnable = boolField(cfg.CollNetEnable)
	if cfg.CTAPolicy != nil {
		p := *cfg.CTAPolicy
		switch {
		case p < 0 || p > CTAPolicyEfficiency|CTAPolicyZero:
			return nil, false, bad("CTAPolicy", "%#x: not a combination of CTAPolicyEfficiency and CTAPolicyZero", int32(p))
		case p&CTAPolicyZero != 0 && !has(r, versions.CTAPolicyZero):
			return nil, false, unsupportedFeature(versions.CTAPolicyZero, r)
		case p == CTAPolicyEfficiency|CTAPolicyZero && !has(r, versions.CTAPolicyCombined):
			return nil, false, unsupportedFeature(versions.CTAPolicyCombined, r)
		}
		out.CTAPolicy = int32(p)
	}
	out.ShrinkShare = boolField(cfg.ShrinkShare)
	if out.NvlsCTAs, err = intField(cfg.NVLSCTAs, "NVLSCTAs", 1, maxInt32); err != nil {
		return nil, false, err
	}
	if out.NChannelsPerNetPeer, err = intField(cfg.NChannelsPerNetPeer, "NChannelsPerNetPeer", 1, maxChannels(r)); err != nil {
		return nil, false, err
	}
	out.NvlinkCentricSched = boolField(cfg.NVLinkCentricSched)
	if cfg.GraphUsageMode != nil {
		m := *cfg.GraphUsageMode
		if m < GraphUsageNone || m > GraphUsageMultiple {
			return nil, false, bad("GraphUsageMode", "%d: must be 0, 1 or 2", int32(m))
		}
		out.GraphUsageMode = int32(m)
	}
	if out.NumRmaCtx, err = intField(cfg.NumRMACtx, "NumRMACtx", 0, maxInt32); err != nil {
		return nil, false, err
	}
	if out.MaxP2pPeers, err = intField(cfg.MaxP2PPeers, "MaxP2PPeers", 1, maxInt32); err != nil {
		return nil, false, err
	}
	if cfg.GraphStreamOrdering != nil {
		if !*cfg.GraphStreamOrdering && (cfg.GraphUsageMode == nil || *cfg.GraphUsageMode == GraphUsageMultiple) {
			return nil, false, bad("GraphStreamOrdering", "false conflicts with GraphUsageMode %s: set GraphUsageMode to GraphUsageNone or GraphUsageOne",
				graphModeName(cfg.GraphUsageMode))
		}
		out.GraphStreamOrdering = b2i(*cfg.GraphStreamOrdering)
	}
	out.LaunchOrderImplicit = boolField(cfg.LaunchOrderImplicit)
	if out.NumRmaSig, err = intField(cfg.NumRMASig, "NumRMASig", 0, maxInt32); err != nil {
		return nil, false, err
	}
	out.RmaEagerInit = boolField(cfg.RMAEagerInit)
	if cfg.HostCFTMode != nil {
		m := *cfg.HostCFTMode
		if m < HostCFTEnable || m > HostCFTFallback {
			return nil, false, bad("HostCFTMode", "%d: not HostCFTEnable (1), HostCFTDisable (2) or HostCFTFallback (3)", int32(m))
		}
		out.HostCftMode = int32(m)
	}
	if cfg.NVLSHostMode != nil {
		m := *cfg.NVLSHostMode
		if m != NVLSHostDisable && m&^(NVLSHostDisableTransport|NVLSHostDisableSymmetricMultimem) != 0 {
			return nil, false, bad("NVLSHostMode", "%#x: not NVLSHostDisable nor a combination of NVLSHostDisableTransport (1) and NVLSHostDisableSymmetricMultimem (2)", int32(m))
		}
		out.NvlsHostMode = int32(m)
	}
	return &out, blocking, nil
}

func graphModeName(m *GraphUsageMode) string {
	if m == nil {
		return "unset (NCCL's default, multiple)"
	}
	return fmt.Sprint(int32(*m))
}

// device is the Config's device, or def.
func (cfg *Config) device(def int) int {
	if cfg == nil || cfg.Device == nil {
		return def
	}
	return *cfg.Device
}

// cInt is *p as a C int for a config field: capi.UndefInt (NCCL's
// default) for nil, else *p checked against [lo, hi], bad making the error
// that names the field.
func cInt(p *int, field string, lo, hi int, bad func(field, format string, a ...any) error) (int32, error) {
	if p == nil {
		return capi.UndefInt, nil
	}
	if *p < lo || *p > hi {
		if hi == maxInt32 && *p < lo {
			return 0, bad(field, "%d: must be at least %d", *p, lo)
		}
		if hi == maxInt32 {
			return 0, bad(field, "%d: must be at least %d and at most %d (C's int)", *p, lo, hi)
		}
		return 0, bad(field, "%d: must be in [%d, %d]", *p, lo, hi)
	}
	return int32(*p), nil
}

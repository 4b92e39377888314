package nccl

import (
	"strings"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/cudabridge"
	"github.com/nccl4go/nccl/internal/versions"
)

// Per-collective configuration (NCCL 2.31): each collective has a variant
// named ...With that takes a *CollConfig first, as the ...Context variants
// take their context first, and calls NCCL's nccl<Collective>Config. The
// variant is a method of its own rather than an option of the plain call or
// a configured view of the communicator, so that the plain collectives keep
// their exact signature and host path: their call carries a zero variant
// byte and pays one comparison (measured: no change in
// BenchmarkAllReduceHostPath). A nil *CollConfig makes a ...With call the
// plain collective (the plain C function, any release).
//
// NCCL reads a config only during the call (its documentation: the caller
// keeps the pointers valid "for the duration of each call"). The binding
// passes its values, flat, to the shim, which lays out ncclCollConfig_t, the
// ext list and NUL-terminated copies of the strings on its own stack for
// the call; inside a [Group], in C memory the group frees when its
// outermost level ends, since a group's work is planned then
// (TestCollConfigInGroup). NCCL never sees Go memory, so a CollConfig may
// be reused or changed as soon as the call returns. A configured call also makes one cgo call and, given
// a CollConfig built once and reused with at most 4 Ext entries and 256
// bytes of strings, allocates nothing (the binding keeps no reference to
// it, but Go's escape analysis cannot tell: a config built in the call's
// argument list is allocated by the caller).

// CollConfig configures one collective call (ncclCollConfig_t; NCCL
// 2.31.0). A nil field keeps the communicator's setting ([Config]) or
// NCCL's default; environment variables still override both, as in NCCL.
// The binding sends the struct in the layout of the loaded release (40
// bytes for 2.31.0, 64 for 2.31.2, 72 for 2.32.3) and refuses, with an
// [*UnsupportedError], a field that the loaded release does not have.
// Values that cannot be right fail with [ErrInvalidArgument] before NCCL is
// called. NCCL's own rule that every rank configures a collective alike
// (for example [CollConfig.LaunchCompletionEvent]'s presence) is the
// caller's to keep.
//
// A CollConfig is only read during a call: it can be reused, and shared by
// goroutines that do not change it.
type CollConfig struct {
	// MinCTAs and MaxCTAs bound the CTAs (channels) of this call, >= 1;
	// NCCL clamps MaxCTAs to the communicator's.
	MinCTAs, MaxCTAs *int
	// NVLSCTAs is the number of CTAs of NVLS kernels for this call, >= 1.
	NVLSCTAs *int
	// CGAClusterSize is the CUDA thread block cluster size, 0 to 8.
	CGAClusterSize *int
	// Ext is the vendor extension list (ncclConfigExt_t), passed through
	// as given, in order; NVIDIA's library does not read it. At most 64
	// entries.
	Ext []ConfigExt
	// AlgSelection restricts the algorithm and protocol NCCL may pick, as
	// a case-insensitive prefix expression: "ring", "tree+ll128" (AND),
	// "ring,tree" (OR), "^nvls" (NOT). Empty: no restriction. NCCL 2.31.2.
	AlgSelection string
	// ForceAlgSelection: true (NCCL's default) makes a selection NCCL
	// cannot satisfy an error; false lets NCCL fall back to its own
	// choice. NCCL 2.31.2.
	ForceAlgSelection *bool
	// CTAPolicy for this call: [CTAPolicyDefault], [CTAPolicyEfficiency],
	// [CTAPolicyZero] or both flags. NCCL 2.31.2.
	CTAPolicy *CTAPolicy
	// UserProfilerTag is handed to NCCL's profiler plugin with the
	// operation; 0 is none. The most significant bit is NCCL's. NCCL 2.31.2.
	UserProfilerTag uint64
	// LaunchCompletionEvent, when set, is recorded by NCCL once the
	// collective's kernel has launched. It must be an event of the
	// communicator's device made with [cuda.EventDisableTiming] and
	// without [cuda.EventInterprocess]; every rank sets one or none, and a
	// group uses at most one per communicator. NCCL 2.32.3.
	LaunchCompletionEvent *cuda.Event
}

// ConfigExt is one entry of a [CollConfig]'s vendor extension list
// (ncclConfigExt_t, NCCL 2.31.0): a key and a value that only the vendor's
// library interprets. The value is one member of a C union: set at most
// one of Int, String (copied for the call) and Pointer (passed as is).
type ConfigExt struct {
	VendorID, OptionID int32
	Int                int32
	String             string
	Pointer            uintptr
}

// collStrBuf and collExtBuf are the sizes of the stack buffers of a
// configured call: more strings or entries allocate.
const (
	collStrBuf = 256
	collExtBuf = 4
)

// withOf is a ...With call's collCall.with.
func withOf(cfg *CollConfig) uint8 {
	if cfg == nil {
		return withNil
	}
	return withConfig
}

// resolveEvent is an event's CUevent, device and creation flags.
var resolveEvent = cudabridge.EventResolve.(func(*cuda.Event) (handle uintptr, dev int, flags uint32, err error))

// sizes are the ext entries and string bytes cfg needs.
func (cfg *CollConfig) sizes() (ext, strs int) {
	strs = len(cfg.AlgSelection)
	for _, x := range cfg.Ext {
		strs += len(x.String)
	}
	return len(cfg.Ext), strs
}

// encode checks cfg for release r on device dev and fills in, ext (the
// list's entries) and strs (the string block); ext and strs hold at least
// sizes() (when within the limits), and n and m are how much of them it
// used.
func (cfg *CollConfig) encode(op string, r Release, dev int, in *capi.CollIn, ext []capi.ExtIn, strs []byte) (n, m int, err error) {
	if err := checkFields(cfg, r); err != nil {
		return 0, 0, err
	}
	bad := func(field, format string, a ...any) error {
		return argErr(op, "CollConfig."+field, format, a...)
	}
	l, v := versions.CollConfigDeclared(int(r))
	in.Size, in.Version = uint32(l.Size), uint32(v)
	intField := func(p *int, field string, lo, hi int) (int32, error) { return cInt(p, field, lo, hi, bad) }
	if in.MinCTAs, err = intField(cfg.MinCTAs, "MinCTAs", 1, maxInt32); err != nil {
		return 0, 0, err
	}
	if in.MaxCTAs, err = intField(cfg.MaxCTAs, "MaxCTAs", 1, maxInt32); err != nil {
		return 0, 0, err
	}
	if cfg.MinCTAs != nil && cfg.MaxCTAs != nil && *cfg.MinCTAs > *cfg.MaxCTAs {
		return 0, 0, bad("MinCTAs", "%d exceeds MaxCTAs %d", *cfg.MinCTAs, *cfg.MaxCTAs)
	}
	if in.NVLSCTAs, err = intField(cfg.NVLSCTAs, "NVLSCTAs", 1, maxInt32); err != nil {
		return 0, 0, err
	}
	if in.CGAClusterSize, err = intField(cfg.CGAClusterSize, "CGAClusterSize", 0, 8); err != nil {
		return 0, 0, err
	}
	text := func(field, s string) (off, n int32, err error) {
		if strings.IndexByte(s, 0) >= 0 {
			return 0, 0, bad(field, "%q holds a NUL byte", s)
		}
		if m+len(s) > capi.CollStrMax || m+len(s) > len(strs) {
			return 0, 0, bad(field, "the config's strings exceed %d bytes", capi.CollStrMax)
		}
		off = int32(m)
		m += copy(strs[m:], s)
		return off, int32(len(s)), nil
	}
	in.AlgOff, in.AlgLen = 0, -1
	if cfg.AlgSelection != "" {
		if in.AlgOff, in.AlgLen, err = text("AlgSelection", cfg.AlgSelection); err != nil {
			return 0, 0, err
		}
	}
	in.ForceAlgSelection = 1 // NCCL_COLLCONFIG_INITIALIZER
	if cfg.ForceAlgSelection != nil {
		in.ForceAlgSelection = b2i(*cfg.ForceAlgSelection)
	}
	in.CTAPolicy = capi.UndefInt
	if cfg.CTAPolicy != nil {
		p := *cfg.CTAPolicy
		if p < 0 || p > CTAPolicyEfficiency|CTAPolicyZero {
			return 0, 0, bad("CTAPolicy", "%#x: not a combination of CTAPolicyEfficiency and CTAPolicyZero", int32(p))
		}
		in.CTAPolicy = int32(p)
	}
	if cfg.UserProfilerTag>>63 != 0 {
		return 0, 0, bad("UserProfilerTag", "%#x: the most significant bit is reserved for NCCL", cfg.UserProfilerTag)
	}
	in.UserProfilerTag = cfg.UserProfilerTag
	in.LaunchCompletionEvent = 0
	if e := cfg.LaunchCompletionEvent; e != nil {
		h, edev, flags, err := resolveEvent(e)
		switch {
		case err != nil:
			return 0, 0, &ArgError{Op: op, Arg: "CollConfig.LaunchCompletionEvent", Reason: "destroyed", Err: err}
		case h == 0:
			return 0, 0, bad("LaunchCompletionEvent", "a zero cuda.Event: make one with Device.NewEventFlags(cuda.EventDisableTiming)")
		case edev != dev:
			return 0, 0, bad("LaunchCompletionEvent", "an event of cuda:%d, but the communicator is on cuda:%d", edev, dev)
		case cuda.EventFlag(flags)&cuda.EventDisableTiming == 0:
			return 0, 0, bad("LaunchCompletionEvent", "made without cuda.EventDisableTiming: NCCL needs a timing-disabled event")
		case cuda.EventFlag(flags)&cuda.EventInterprocess != 0:
			return 0, 0, bad("LaunchCompletionEvent", "made with cuda.EventInterprocess: NCCL needs an event that is not shared between processes")
		}
		in.LaunchCompletionEvent = h
	}
	if len(cfg.Ext) > capi.ExtMax {
		return 0, 0, bad("Ext", "%d entries, at most %d", len(cfg.Ext), capi.ExtMax)
	}
	in.NExt = int32(len(cfg.Ext))
	for i, x := range cfg.Ext {
		set := 0
		for _, nonzero := range [...]bool{x.Int != 0, x.String != "", x.Pointer != 0} {
			if nonzero {
				set++
			}
		}
		if set > 1 {
			return 0, 0, argErr(op, "CollConfig.Ext", "entry %d (vendor %d, option %d): Int, String and Pointer are one C union: set at most one", i, x.VendorID, x.OptionID)
		}
		e := capi.ExtIn{VendorID: x.VendorID, OptionID: x.OptionID, Kind: capi.ExtInt, IntVal: x.Int}
		switch {
		case x.String != "":
			e.Kind = capi.ExtStr
			if e.StrOff, e.StrLen, err = text("Ext", x.String); err != nil {
				return 0, 0, err
			}
		case x.Pointer != 0:
			e.Kind, e.PtrVal = capi.ExtPtr, x.Pointer
		}
		ext[n] = e
		n++
	}
	return n, m, nil
}

// callConfigLocked is the C call of a configured collective (mu held, the
// arguments checked): kept out of run so that the plain calls' frame does
// not carry the config's buffers.
//
//go:noinline
func (c *Communicator) callConfigLocked(a *collCall, k *collInfo, send, recv uintptr, count uint64, dt DataType, ptr, h uintptr) (capi.Status, error) {
	if !capi.Present(k.cfgSym) {
		return capi.Status{}, unsupported(k.cfgSym)
	}
	var in capi.CollIn
	var extBuf [collExtBuf]capi.ExtIn
	var strBuf [collStrBuf]byte
	ext, strs := extBuf[:], strBuf[:]
	if ne, ns := a.cfg.sizes(); ne > len(ext) || ns > len(strs) { // within the limits: encode checks them
		ext, strs = make([]capi.ExtIn, min(ne, capi.ExtMax)), make([]byte, min(ns, capi.CollStrMax))
	}
	n, m, err := a.cfg.encode(k.name, c.coll.release, c.dev, &in, ext, strs)
	if err != nil {
		return capi.Status{}, err
	}
	return capi.CollConfigCall(k.cfgKind, send, recv, count, int32(dt), int32(a.op), a.root, ptr, h, &in, ext[:n], strs[:m]), nil
}

// AllReduceWith is [Communicator.AllReduce] configured by cfg
// (ncclAllReduceConfig); a nil cfg is the plain AllReduce. Collective.
// NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) AllReduceWith(cfg *CollConfig, send, recv Buffer, op RedOp, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllReduce, send: send, recv: recv, op: op, stream: s, cfg: cfg, with: withOf(cfg)})
}

// BroadcastWith is [Communicator.Broadcast] configured by cfg
// (ncclBroadcastConfig); a nil cfg is the plain Broadcast. Collective.
// NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) BroadcastWith(cfg *CollConfig, send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kBroadcast, send: send, recv: recv, root: root, stream: s, cfg: cfg, with: withOf(cfg)})
}

// ReduceWith is [Communicator.Reduce] configured by cfg (ncclReduceConfig);
// a nil cfg is the plain Reduce. Collective. NCCL 2.31.0 for a non-nil cfg
// ([ErrUnsupported] before).
func (c *Communicator) ReduceWith(cfg *CollConfig, send, recv Buffer, op RedOp, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kReduce, send: send, recv: recv, op: op, root: root, stream: s, cfg: cfg, with: withOf(cfg)})
}

// AllGatherWith is [Communicator.AllGather] configured by cfg
// (ncclAllGatherConfig); a nil cfg is the plain AllGather. Collective.
// NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) AllGatherWith(cfg *CollConfig, send, recv Buffer, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllGather, send: send, recv: recv, stream: s, cfg: cfg, with: withOf(cfg)})
}

// ReduceScatterWith is [Communicator.ReduceScatter] configured by cfg
// (ncclReduceScatterConfig); a nil cfg is the plain ReduceScatter.
// Collective. NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) ReduceScatterWith(cfg *CollConfig, send, recv Buffer, op RedOp, s cuda.Stream) error {
	return c.run(&collCall{kind: kReduceScatter, send: send, recv: recv, op: op, stream: s, cfg: cfg, with: withOf(cfg)})
}

// AllToAllWith is [Communicator.AllToAll] configured by cfg
// (ncclAlltoAllConfig); a nil cfg is the plain AllToAll. Collective.
// NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) AllToAllWith(cfg *CollConfig, send, recv Buffer, s cuda.Stream) error {
	return c.run(&collCall{kind: kAllToAll, send: send, recv: recv, stream: s, cfg: cfg, with: withOf(cfg)})
}

// GatherWith is [Communicator.Gather] configured by cfg (ncclGatherConfig);
// a nil cfg is the plain Gather. Collective. NCCL 2.31.0 for a non-nil cfg
// ([ErrUnsupported] before).
func (c *Communicator) GatherWith(cfg *CollConfig, send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kGather, send: send, recv: recv, root: root, stream: s, cfg: cfg, with: withOf(cfg)})
}

// ScatterWith is [Communicator.Scatter] configured by cfg
// (ncclScatterConfig); a nil cfg is the plain Scatter. Collective.
// NCCL 2.31.0 for a non-nil cfg ([ErrUnsupported] before).
func (c *Communicator) ScatterWith(cfg *CollConfig, send, recv Buffer, root int, s cuda.Stream) error {
	return c.run(&collCall{kind: kScatter, send: send, recv: recv, root: root, stream: s, cfg: cfg, with: withOf(cfg)})
}

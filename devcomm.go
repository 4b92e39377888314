package nccl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// DevCommRequirements says what a device communicator needs
// (ncclDevCommRequirements_t, every field up to NCCL 2.31.2). A nil field
// keeps NCCL's initializer value: GINContextCount 4, GINTrafficClass unset
// (INT_MIN), GINStrongSignalsRequired and GINVASignalsRequired true,
// GINCustomStride 1, GINType [GINNone], CFTCaps [CFTNone], every other
// count 0 and flag false. A field the loaded NCCL does not know makes
// CreateDevComm fail with an error wrapping [ErrUnsupported] that names it;
// so does, with an [*UnknownLayoutError], a field it knows but the binding
// does not send to it (the 2.31 fields, and [GINConnectionCustomStride]
// whose stride is one of them, to a library newer than 2.31.2: the
// ncclDevComm_t such a library writes for them is not established;
// nccl4go info lists them).
type DevCommRequirements struct {
	// Resources are the resources the device communicator allocates for
	// kernels (the resourceRequirementsList), made by [LSABarrierResource],
	// [LLA2AResource] and [Communicator.GINBarrierResource] (which needs a
	// GIN connection: GINConnectionType, or GINForceEnable before NCCL
	// 2.29.7); NCCL writes their handles when it makes the device
	// communicator. NCCL 2.28.3.
	Resources []*DevResource
	// Teams are the teams the device communicator sets up (the
	// teamRequirementsList), made by [NewTeamResource]; NCCL writes their
	// multimem handles when it makes the device communicator. NCCL 2.28.3.
	Teams []*TeamResource
	// LSAMultimem requests multimem on the load/store-accessible team.
	// NCCL 2.28.3.
	LSAMultimem *bool
	// LSABarrierCount is the number of LSA memory barriers. NCCL 2.28.3.
	LSABarrierCount *int
	// BarrierCount is the number of hybrid (LSA and network) barriers; from
	// NCCL 2.29.4 these are GIN barriers, which need a GIN connection type.
	// NCCL 2.28.7.
	BarrierCount *int
	// RailGINBarrierCount is the number of railed GIN barriers. NCCL 2.28.7.
	RailGINBarrierCount *int
	// LSALLA2ABlockCount and LSALLA2ASlotCount size the LSA low-latency
	// all-to-all. NCCL 2.28.7.
	LSALLA2ABlockCount, LSALLA2ASlotCount *int
	// GINForceEnable forces GIN on (deprecated since 2.29.7, where it means
	// [GINConnectionFull], whatever GINConnectionType says). NCCL 2.28.7.
	GINForceEnable *bool
	// GINContextCount is a hint for the number of GIN contexts (default 4).
	// NCCL 2.28.7.
	GINContextCount *int
	// GINSignalCount and GINCounterCount are the numbers of GIN signals and
	// counters (their ids start at 0). NCCL 2.28.7.
	GINSignalCount, GINCounterCount *int
	// GINConnectionType enables GIN: GIN resources need FULL or RAIL.
	// NCCL 2.29.7.
	GINConnectionType *GINConnectionType
	// GINExclusiveContexts gives the device communicator its own GIN
	// contexts. NCCL 2.29.7.
	GINExclusiveContexts *bool
	// GINQueueDepth is the depth of the GIN queues (0: NCCL's). NCCL 2.29.7.
	GINQueueDepth *int
	// GINTrafficClass is the network traffic class of GIN traffic.
	// NCCL 2.30.3.
	GINTrafficClass *int
	// WorldGINBarrierCount is the number of world network barriers.
	// NCCL 2.30.3.
	WorldGINBarrierCount *int
	// GINStrongSignalsRequired and GINVASignalsRequired (default true): if
	// false, kernels must not use strong (or VA) signals. NCCL 2.30.7.
	GINStrongSignalsRequired, GINVASignalsRequired *bool
	// GINCustomStride is the rank stride of a [GINConnectionCustomStride]
	// connection: each rank connects to the ranks this far apart. At least
	// 1 (the default); NCCL also wants at least the communicator's
	// minimum (ncclCommProperties_t.ginMinStride). NCCL 2.31.0.
	GINCustomStride *int
	// GINType picks the GIN backend of this device communicator ([GINNone],
	// the default, takes any the communicator has). NCCL 2.31.0.
	GINType *GINType
	// UseRuntimeVersion makes NCCL write the ncclDevComm_t in the loaded
	// library's own layout (for kernels compiled against the loaded
	// release's headers, as package devapi does), whose size NCCL reports
	// ([DevComm.Size]). Where the binding cannot read that size (a library
	// newer than 2.31.2, whose ncclCommProperties_t layout is not
	// established), CreateDevComm refuses it with an
	// [*UnknownLayoutError]. NCCL 2.31.0.
	UseRuntimeVersion *bool
	// CFTCaps asks for CUDA fabric (CFT) logical endpoints ([CFTUnicast],
	// [CFTMultimem]; Blackwell with CUDA 13.3). NCCL 2.31.2.
	CFTCaps *CFTCap
	// CFTBarrierCount is the number of CFT barriers (for kernels'
	// ncclCftBarrierSession). NCCL 2.31.2.
	CFTBarrierCount *int
}

// devCommLayout is the requirements layout and the device communicator
// size of a loaded release, with the version the binding declares.
type devCommLayout struct {
	versions.DevCommLayout
	declared Release // versions.DevCommDeclared's
}

// layoutFor is the layout the binding sends to loaded release r and the
// version it declares (internal/versions.DevCommDeclared: the rule lives
// there, beside the layouts); runtime asks for NCCL's own ncclDevComm_t.
func layoutFor(r Release, runtime bool) devCommLayout {
	l, v := versions.DevCommDeclared(int(r), runtime)
	return devCommLayout{DevCommLayout: l, declared: Release(v)}
}

// runtimeSize reports whether NCCL writes the ncclDevComm_t in its own
// layout, whose size it reports: a declared 2.31 layout (the table knows no
// size) that is the library's own, or UseRuntimeVersion.
func (l devCommLayout) runtimeSize() bool { return l.DevComm == 0 }

// unusedField names the first field of q that loaded release r has but
// that the binding does not send to it, with why (versions.Feature.UseWith),
// or "": useRuntimeVersion where the binding cannot read the size of the
// ncclDevComm_t NCCL writes, and any field the declared layout l lacks.
// UseRuntimeVersion false asks for nothing and is never refused.
func (q *DevCommRequirements) unusedField(r Release, l devCommLayout) (field, why string) {
	for _, f := range versions.Fields("ncclDevCommRequirements_t") {
		v := reflect.ValueOf(q).Elem().FieldByName(f.Field())
		if v.IsZero() || (f == versions.ReqsUseRuntimeVersion && !v.Elem().Bool()) {
			continue
		}
		if u := f.UseWith(int(r)); u.Has && !u.Used && (f == versions.ReqsUseRuntimeVersion || !has(l.declared, f)) {
			return f.Field(), u.Why
		}
	}
	return "", ""
}

// encode validates q for loaded release r and lays it out.
func (q *DevCommRequirements) encode(op string, r Release) ([]byte, devCommLayout, error) {
	var z DevCommRequirements
	if q == nil {
		q = &z
	}
	runtime := q.UseRuntimeVersion != nil && *q.UseRuntimeVersion
	l := layoutFor(r, runtime)
	if err := checkFields(q, r); err != nil {
		return nil, l, err
	}
	if f, why := q.unusedField(r, l); f != "" {
		return nil, l, &UnknownLayoutError{Op: op, Struct: "ncclDevComm_t", Loaded: r,
			Reason: "DevCommRequirements." + f + " is not sent to it: " + why}
	}
	var err error
	count := func(p *int, field string) int32 {
		if p == nil || err != nil {
			return 0
		}
		if *p < 0 || *p > 1<<31-1 {
			err = argErr(op, "DevCommRequirements."+field, "%d: must be in [0, 2^31)", *p)
			return 0
		}
		return int32(*p)
	}
	flag := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	raw := capi.DevCommReqs{
		LsaMultimem:          flag(q.LSAMultimem, false),
		BarrierCount:         count(q.BarrierCount, "BarrierCount"),
		LsaBarrierCount:      count(q.LSABarrierCount, "LSABarrierCount"),
		RailGinBarrierCount:  count(q.RailGINBarrierCount, "RailGINBarrierCount"),
		LsaLLA2ABlockCount:   count(q.LSALLA2ABlockCount, "LSALLA2ABlockCount"),
		LsaLLA2ASlotCount:    count(q.LSALLA2ASlotCount, "LSALLA2ASlotCount"),
		GinForceEnable:       flag(q.GINForceEnable, false),
		GinContextCount:      4,
		GinSignalCount:       count(q.GINSignalCount, "GINSignalCount"),
		GinCounterCount:      count(q.GINCounterCount, "GINCounterCount"),
		GinExclusiveContexts: flag(q.GINExclusiveContexts, false),
		GinQueueDepth:        count(q.GINQueueDepth, "GINQueueDepth"),
		WorldGinBarrierCount: count(q.WorldGINBarrierCount, "WorldGINBarrierCount"),
	}
	if q.GINContextCount != nil {
		raw.GinContextCount = count(q.GINContextCount, "GINContextCount")
	}
	if err != nil {
		return nil, l, err
	}
	// NCCL numbers GIN signals in an int (ncclDevrCommCreateInternal's
	// ginSignalTotal): GINSignalCount, then its own barriers', then each
	// resource's. Signals that add up past it would wrap that total.
	signals := int64(raw.GinSignalCount)
	for i, res := range q.Resources {
		if res == nil || res.mem.Addr() == 0 {
			continue // linkRequirements names it
		}
		_, n := res.mem.Requirement()
		if signals += int64(n); signals > int64(maxInt32) {
			return nil, l, argErr(op, fmt.Sprintf("DevCommRequirements.Resources[%d]", i),
				"its %d GIN signals bring the device communicator's past NCCL's int (%d with GINSignalCount and the resources before it)", n, signals)
		}
	}
	if q.GINConnectionType != nil {
		t := *q.GINConnectionType
		if t < GINConnectionNone || t > GINConnectionCustomStride {
			return nil, l, argErr(op, "DevCommRequirements.GINConnectionType", "%d: not NCCL_GIN_CONNECTION_NONE, FULL, RAIL or CUSTOM_STRIDE", int32(t))
		}
		if t == GINConnectionCustomStride {
			if err := need(r, versions.GINConnectionCustomStride); err != nil {
				return nil, l, err
			}
			// Its stride goes in ginCustomStride: without that field
			// (a 2.30.7 declaration) NCCL would take stride 1.
			if u := versions.GINConnectionCustomStride.UseWith(int(r)); !has(l.declared, versions.ReqsGINCustomStride) {
				return nil, l, &UnknownLayoutError{Op: op, Struct: "ncclDevComm_t", Loaded: r,
					Reason: "DevCommRequirements.GINConnectionType NCCL_GIN_CONNECTION_CUSTOM_STRIDE is not sent to it: " + u.Why}
			}
		}
		raw.GinConnectionType = int32(t)
	}
	// Fields past the declared layout stay as NCCL's own struct has them:
	// ginTrafficClass is padding before 2.30.3, the two flags before 2.30.7.
	if has(l.declared, versions.ReqsGINTrafficClass) {
		raw.GinTrafficClass = capi.UndefInt
		if q.GINTrafficClass != nil {
			if *q.GINTrafficClass < 0 || *q.GINTrafficClass > 1<<31-1 {
				return nil, l, argErr(op, "DevCommRequirements.GINTrafficClass", "%d: must be in [0, 2^31)", *q.GINTrafficClass)
			}
			raw.GinTrafficClass = int32(*q.GINTrafficClass)
		}
	}
	if has(l.declared, versions.ReqsGINStrongSignalsRequired) {
		raw.GinStrongSignalsRequired = flag(q.GINStrongSignalsRequired, true)
		raw.GinVaSignalsRequired = flag(q.GINVASignalsRequired, true)
	}
	if has(l.declared, versions.ReqsGINCustomStride) {
		raw.GinCustomStride = 1
		if p := q.GINCustomStride; p != nil {
			if *p < 1 || *p > 1<<31-1 {
				return nil, l, argErr(op, "DevCommRequirements.GINCustomStride", "%d: a rank stride must be in [1, 2^31)", *p)
			}
			raw.GinCustomStride = int32(*p)
		}
		if p := q.GINType; p != nil {
			if _, ok := ginTypeNames[*p]; !ok {
				return nil, l, argErr(op, "DevCommRequirements.GINType", "%d: not an ncclGinType_t (NCCL_GIN_TYPE_NONE, PROXY, GDAKI, GPI or EFA_GDA)", int32(*p))
			}
			raw.GinType = int32(*p)
		}
		raw.UseRuntimeVersion = runtime
	}
	if has(l.declared, versions.ReqsCFTCaps) {
		if p := q.CFTCaps; p != nil {
			if *p&^(CFTUnicast|CFTMultimem) != 0 {
				return nil, l, argErr(op, "DevCommRequirements.CFTCaps", "%#x: not a set of NCCL_CFT (0x1) and NCCL_CFT_MULTIMEM (0x2)", int32(*p))
			}
			raw.CftCaps = int32(*p)
		}
		raw.CftBarrierCount = count(q.CFTBarrierCount, "CFTBarrierCount")
		if err != nil {
			return nil, l, err
		}
	}
	// A GIN barrier resource needs GIN enabled: from 2.29.7 NCCL refuses it
	// without (ncclGinResourcesRequested); before, NCCL makes no GIN for a
	// resource alone, and the barrier's signals would not exist.
	if i := q.ginBarrier(); i >= 0 && raw.GinConnectionType == int32(GINConnectionNone) && !raw.GinForceEnable {
		if has(r, versions.ReqsGINConnectionType) {
			return nil, l, argErr(op, "DevCommRequirements.GINConnectionType",
				"Resources[%d] is a GIN barrier, which needs a GIN connection: set GINConnectionFull or GINConnectionRail", i)
		}
		return nil, l, argErr(op, "DevCommRequirements.GINForceEnable",
			"Resources[%d] is a GIN barrier, which needs GIN: set GINForceEnable (NCCL %s has no GINConnectionType)", i, r)
	}
	// NCCL rejects GIN resources without GIN enabled
	// (ncclDevrCommCreateInternal): say which field is missing first.
	if has(r, versions.GINResourcesNeedConnection) {
		gin := raw.GinSignalCount > 0 || raw.GinCounterCount > 0 || raw.BarrierCount > 0 ||
			raw.RailGinBarrierCount > 0 || raw.WorldGinBarrierCount > 0
		if gin && raw.GinConnectionType == int32(GINConnectionNone) && !raw.GinForceEnable {
			return nil, l, argErr(op, "DevCommRequirements.GINConnectionType",
				"GIN resources (signals, counters, BarrierCount, RailGINBarrierCount or WorldGINBarrierCount) need a GIN connection: set GINConnectionFull or GINConnectionRail (for LSA-only barriers use LSABarrierCount)")
		}
	}
	return capi.EncodeDevCommReqs(raw, l.Family, uint32(l.declared), l.ReqsSize), l, nil
}

// ginBarrier is the index of the first GIN barrier among q's resources, or
// -1.
func (q *DevCommRequirements) ginBarrier() int {
	for i, r := range q.Resources {
		if r != nil && r.kind == kindGINBarrier {
			return i
		}
	}
	return -1
}

// needsGIN reports whether q asks for GIN (a connection type, or resources).
func (q *DevCommRequirements) needsGIN() (bool, GINConnectionType) {
	if q == nil {
		return false, GINConnectionNone
	}
	conn := GINConnectionNone
	if q.GINConnectionType != nil {
		conn = *q.GINConnectionType
	}
	if q.forcesGIN() {
		// NCCL (2.29.7 and later): "ginForceEnable set to true,
		// defaulting ginConnectionType to NCCL_GIN_CONNECTION_FULL",
		// whatever GINConnectionType says.
		conn = GINConnectionFull
	}
	return conn != GINConnectionNone, conn
}

// forcesGIN reports whether q sets GINForceEnable.
func (q *DevCommRequirements) forcesGIN() bool { return q.GINForceEnable != nil && *q.GINForceEnable }

// DevComm is a device communicator (ncclDevComm_t): the struct NCCL's
// device API kernels take, made by CreateDevComm. It is tracked by its
// communicator: Destroy and Abort close it. Safe for concurrent use.
type DevComm struct {
	asyncRes
	store  capi.DevComm // C memory NCCL writes, possibly at a group's end
	layout devCommLayout
	// requirements NCCL writes the handles of, possibly at a group's end:
	// kept alive with the device communicator.
	resources []*served
	// guarded by c.mu
	devMem cuda.Slice[uint8] // the device copy, made by DevicePtr
	hasDev bool
}

var devCommKind = asyncKind{
	op:       "CreateDevComm",
	create:   "ncclDevCommCreate",
	what:     "device communicator",
	creation: "the device communicator's creation",
	inGroup:  "the device communicator is created in a group",
	closeOp:  "DevComm.Close",
	destroy:  "ncclDevCommDestroy",
}

// CreateDevComm creates a device communicator (ncclDevCommCreate) with
// reqs (nil: NCCL's defaults). Where the loaded NCCL reports the
// communicator's device-API properties (2.29.2), requests it cannot meet
// (no device-API support, multimem, GIN) fail first with an error wrapping
// [ErrUnsupported]. Collective. Inside a group, or on a non-blocking
// communicator, the struct is written when NCCL's work is over (see
// Window). A communicator without symmetric memory (one of one rank
// before NCCL 2.28.7, or with NCCL_WIN_ENABLE=0) is refused with a
// [*SymmetricMemoryError] saying why. A Destroy or Abort of another
// goroutine that closes it before the call returns makes it fail with
// [ErrClosed]. NCCL 2.28.3 (the requirements layout changed in 2.28.7,
// 2.29.2 and 2.31.0; the binding declares the loaded release's, at most
// 2.31.2: a newer library gets 2.30.7's, the newest whose ncclDevComm_t
// size the binding knows).
func (c *Communicator) CreateDevComm(reqs *DevCommRequirements) (*DevComm, error) {
	return c.createDevComm(context.Background(), started, reqs)
}

// CreateDevCommContext is CreateDevComm (ncclDevCommCreate) completed
// within ctx: it waits for the device communicator even on a non-blocking
// communicator (outside a group), which is aborted if ctx ends first (a
// blocking one waits inside NCCL: see the package documentation).
// Collective. NCCL 2.28.3.
func (c *Communicator) CreateDevCommContext(ctx context.Context, reqs *DevCommRequirements) (*DevComm, error) {
	return c.createDevComm(ctx, completed, reqs)
}

// createDevComm is ncclDevCommCreate, finished as m says.
func (c *Communicator) createDevComm(ctx context.Context, m mode, reqs *DevCommRequirements) (*DevComm, error) {
	const op = "CreateDevComm"
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := require(capi.SymDevCommCreate)
	if err != nil {
		return nil, err
	}
	raw, layout, err := reqs.encode(op, r)
	if err != nil {
		return nil, err
	}
	if capi.Present(capi.SymCommQueryProperties) {
		p, err := c.properties(op)
		if err != nil {
			return nil, err
		}
		if err := checkDevCommProps(op, p, reqs); err != nil && !skipDevCommPropertyChecks.Load() {
			return nil, err
		}
		if layout.runtimeSize() {
			if layout.DevComm, err = runtimeDevCommSize(op, r, p); err != nil {
				return nil, err
			}
		}
	}
	if layout.runtimeSize() { // a library with the 2.31 layout but no properties call: impossible in NCCL
		return nil, &UnknownLayoutError{Op: op, Struct: "ncclDevComm_t", Loaded: r,
			Reason: "the library does not report its size (no ncclCommQueryProperties)"}
	}
	resHead, teamHead, release, err := reqs.linkRequirements(op, c)
	if err != nil {
		return nil, err
	}
	if resHead != 0 {
		binary.LittleEndian.PutUint64(raw[capi.ResourceListOffset(layout.Family):], uint64(resHead))
	}
	if teamHead != 0 {
		binary.LittleEndian.PutUint64(raw[capi.TeamListOffset(layout.Family):], uint64(teamHead))
	}
	res := reqs.served()
	var made *DevComm
	defer func() {
		if made == nil {
			release() // NCCL kept nothing
		}
	}()
	d, err := createAsync(ctx, m, c, &devCommKind, takeWork, func(ptr uintptr) (*DevComm, capi.Status, bool, error) {
		store := capi.NewDevComm()
		st := capi.DevCommCreate(ptr, raw, store)
		if !accepted(st) {
			store.Free() // pending or failed: NCCL queued nothing that would write it
			return nil, st, false, nil
		}
		made = &DevComm{store: store, layout: layout, resources: res}
		return made, st, true, nil
	})
	// The requirements serve the device communicator from now on: published
	// once createAsync has filled it in (its communicator, its state), so
	// that a goroutine reading a requirement's handle meanwhile never sees
	// it half made (TestDevResourcesConcurrent).
	if made != nil {
		for _, r := range res {
			r.dc.Store(made)
		}
	}
	var ne *Error
	if errors.As(err, &ne) && ne.Op == op && ne.Code == InvalidUsage && strings.Contains(ne.Detail, noSymmetricDetail) {
		n, _ := c.NRanks()
		return nil, newSymmetricMemoryError(op, r, n, ne)
	}
	return d, err
}

// noSymmetricDetail is what ncclDevCommCreate says (ncclGetLastError) when
// the communicator has no symmetric memory.
const noSymmetricDetail = "does not support symmetric memory"

// SymmetricMemoryError is NCCL's refusal to create a device communicator
// (or anything else that needs symmetric memory) on a communicator without
// symmetric memory: ncclDevCommCreate fails with ncclInvalidUsage,
// "Communicator does not support symmetric memory!". NCCL decides at init:
// symmetric memory needs NCCL_WIN_ENABLE and cuMem (NCCL_CUMEM_ENABLE) on,
// and GPUs that all reach each other by CUDA P2P; NCCL before 2.28.7 also
// needs all ranks on one node, at least 2 of them there, every pair linked
// by direct P2P (so a communicator of one rank never has it: 2.28.7 lifts
// that). errors.Is matches [ErrUnsupported] and errors.ErrUnsupported, and,
// through Err, NCCL's [ErrInvalidUsage].
type SymmetricMemoryError struct {
	Op     string  // e.g. "CreateDevComm"
	Loaded Release // the loaded NCCL
	// Since is the first release that lifts the cause found (2.28.7 for a
	// communicator of one rank), 0 where no release does.
	Since  Release
	Reason string // the cause, as far as the binding can tell
	Err    error  // NCCL's error (an *Error with Code [InvalidUsage])
}

// Error reads "nccl: CreateDevComm: no symmetric memory on this
// communicator, which device communicators need: <reason> (<NCCL's error>)".
func (e *SymmetricMemoryError) Error() string {
	return fmt.Sprintf("nccl: %s: no symmetric memory on this communicator, which device communicators need: %s (%v)",
		e.Op, e.Reason, e.Err)
}

// Is matches [ErrUnsupported] and errors.ErrUnsupported.
func (e *SymmetricMemoryError) Is(target error) bool {
	return target == ErrUnsupported || target == errors.ErrUnsupported
}

// Unwrap returns NCCL's error.
func (e *SymmetricMemoryError) Unwrap() error { return e.Err }

// newSymmetricMemoryError explains NCCL's refusal err for a communicator of
// nranks ranks on loaded release r (NCCL 2.28.3's init.cc sets
// symmetricSupport from isAllDirectP2p, nNodes == 1, NCCL_WIN_ENABLE and
// ncclCuMemEnable; 2.28.7 from isAllCudaP2p and the last two).
func newSymmetricMemoryError(op string, r Release, nranks int, err error) *SymmetricMemoryError {
	e := &SymmetricMemoryError{Op: op, Loaded: r, Err: err}
	switch {
	case os.Getenv("NCCL_WIN_ENABLE") == "0":
		e.Reason = "NCCL_WIN_ENABLE=0 in the environment turns symmetric memory off"
	case os.Getenv("NCCL_CUMEM_ENABLE") == "0":
		e.Reason = "NCCL_CUMEM_ENABLE=0 in the environment turns off cuMem, which symmetric memory needs"
	case !has(r, versions.SymmetricMemoryOneRank) && nranks == 1:
		e.Since = Release(versions.SymmetricMemoryOneRank.Since())
		e.Reason = fmt.Sprintf("NCCL %s gives it only to communicators with at least 2 ranks on the node, "+
			"and this one has 1 rank (NCCL %s lifts this)", r, e.Since)
	case !has(r, versions.SymmetricMemoryOneRank):
		e.Reason = fmt.Sprintf("NCCL %s gives it only to communicators whose ranks are all on one node, "+
			"at least 2 of them, every pair linked by direct P2P (no intermediate rank), "+
			"with NCCL_WIN_ENABLE and cuMem (NCCL_CUMEM_ENABLE) on", r)
	default:
		e.Reason = "NCCL gives it only to communicators whose GPUs all reach each other by CUDA P2P, " +
			"with NCCL_WIN_ENABLE and cuMem (NCCL_CUMEM_ENABLE) on"
	}
	return e
}

// runtimeDevCommSize is the size of the ncclDevComm_t NCCL writes in its
// own layout (a 2.31 declaration, or UseRuntimeVersion), from the
// communicator's properties (devCommRuntimeVersionSize).
func runtimeDevCommSize(op string, r Release, p *Properties) (int, error) {
	if p.DevCommRuntimeVersionSize == nil {
		return 0, &UnknownLayoutError{Op: op, Struct: "ncclDevComm_t", Loaded: r,
			Reason: "NCCL writes its own layout (UseRuntimeVersion), whose size it reports only in an " +
				"ncclCommProperties_t layout of this release that is not established either"}
	}
	n := *p.DevCommRuntimeVersionSize
	if n <= 0 || n > capi.DevCommSize {
		return 0, fmt.Errorf("nccl: %s: NCCL %s reports an ncclDevComm_t of %d bytes "+
			"(ncclCommProperties_t.devCommRuntimeVersionSize), which the binding's %d-byte buffer cannot hold: %w",
			op, r, n, capi.DevCommSize, ErrUnsupported)
	}
	return n, nil
}

// skipDevCommPropertyChecks turns checkDevCommProps off, for tests that
// ask what NCCL itself answers (WithoutDevCommPropertyChecks).
var skipDevCommPropertyChecks atomic.Bool

// checkDevCommProps refuses requests the communicator's properties rule out.
func checkDevCommProps(op string, p *Properties, q *DevCommRequirements) error {
	if !p.DeviceAPISupport {
		return fmt.Errorf("nccl: %s: this communicator has no device-API support (ncclCommProperties_t.deviceApiSupport is false: its ranks' memory is not all load/store accessible): %w", op, ErrUnsupported)
	}
	if q != nil && q.LSAMultimem != nil && *q.LSAMultimem && !p.MultimemSupport {
		return fmt.Errorf("nccl: %s: LSAMultimem: this communicator has no multimem support: %w", op, ErrUnsupported)
	}
	if q != nil && !p.MultimemSupport {
		for i, t := range q.Teams {
			if t != nil && t.multimem {
				return fmt.Errorf("nccl: %s: Teams[%d] asks for multimem: this communicator has no multimem support: %w", op, i, ErrUnsupported)
			}
		}
	}
	if gin, conn := q.needsGIN(); gin {
		t := p.GINType
		if conn == GINConnectionRail && p.RailedGINType != nil {
			t = *p.RailedGINType
		}
		if t == GINNone {
			forced := ""
			if q.forcesGIN() {
				forced = " (GINForceEnable makes NCCL ask for it, whatever GINConnectionType says)"
			}
			return fmt.Errorf("nccl: %s: GIN connection %s%s: this communicator has no GPU-initiated networking of that kind (GIN type NCCL_GIN_TYPE_NONE): %w", op, conn, forced, ErrUnsupported)
		}
	}
	return nil
}

// settleLocked learns whether NCCL has written the struct (c.mu held).
func (d *DevComm) settleLocked() {
	if d.state != resPending {
		return
	}
	done, err := d.c.jobDoneLocked("CreateDevComm", d.comp)
	switch {
	case !done:
	case err != nil:
		d.err = err
		d.setStateLocked(resFailed)
	default:
		d.setStateLocked(resReady)
	}
}

// lock locks the communicator and checks d is usable; it returns with mu
// held only on success.
func (d *DevComm) lock(op string) error {
	if d == nil || d.c == nil {
		return closedErr(op, "device communicator")
	}
	return lockReady(d, op)
}

// Size is the size in bytes of the ncclDevComm_t of the loaded release (88
// in 2.28.3, 200 in 2.28.7-2.29.3, 224 in 2.29.7, 240 in 2.30.3-2.30.7;
// from 2.31.0, and with [DevCommRequirements.UseRuntimeVersion], the size
// NCCL reports: ncclCommProperties_t.devCommRuntimeVersionSize).
func (d *DevComm) Size() int {
	if d == nil {
		return 0
	}
	return d.layout.DevComm
}

// Declared is the requirements version the binding declared (the loaded
// release, at most [ABIRelease]).
func (d *DevComm) Declared() Release {
	if d == nil {
		return 0
	}
	return d.layout.declared
}

// Bytes is a copy of the ncclDevComm_t NCCL wrote, Size bytes: the value
// of a kernel argument of type ncclDevComm.
func (d *DevComm) Bytes() ([]byte, error) {
	if err := d.lock("DevComm.Bytes"); err != nil {
		return nil, err
	}
	defer d.c.mu.Unlock()
	return d.store.Bytes()[:d.layout.DevComm], nil
}

// HostPtr is the host address of the ncclDevComm_t (C memory, 8-aligned),
// valid until Close: for launchers that copy a kernel argument from host
// memory.
func (d *DevComm) HostPtr() (uintptr, error) {
	if err := d.lock("DevComm.HostPtr"); err != nil {
		return 0, err
	}
	defer d.c.mu.Unlock()
	return d.store.Addr(), nil
}

// DevicePtr is the device address of a copy of the ncclDevComm_t on the
// communicator's device, for kernels that take a pointer to it. The copy is
// made on first use (cuMemAlloc) and freed by Close.
func (d *DevComm) DevicePtr() (uintptr, error) {
	const op = "DevComm.DevicePtr"
	p, made, b, dev, err := d.copySource(op)
	if err != nil || made {
		return p, err
	}
	// cuMemAlloc and the copy run without mu.
	s, err := cuda.AllocFrom(cuda.Device(dev), b)
	if err != nil {
		return 0, fmt.Errorf("nccl: %s: copying the device communicator to cuda:%d: %w", op, dev, err)
	}
	if err := d.lock(op); err != nil {
		s.Free()
		return 0, err
	}
	defer d.c.mu.Unlock()
	if d.hasDev {
		s.Free()
	} else {
		d.devMem, d.hasDev = s, true
	}
	return d.devMem.Ptr(), nil
}

// copySource returns the device copy's address p if DevicePtr made it
// already (made); else b, a copy of the struct, and the device to copy it
// to.
func (d *DevComm) copySource(op string) (p uintptr, made bool, b []byte, dev int, err error) {
	if err := d.lock(op); err != nil {
		return 0, false, nil, 0, err
	}
	defer d.c.mu.Unlock()
	if d.hasDev {
		return d.devMem.Ptr(), true, nil, 0, nil
	}
	return 0, false, d.store.Bytes()[:d.layout.DevComm], d.c.dev, nil
}

// String reads "nccl.DevComm(240 bytes, ready)".
func (d *DevComm) String() string {
	if d == nil || d.c == nil {
		return "nccl.DevComm(nil)"
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return fmt.Sprintf("nccl.DevComm(%d bytes, %s)", d.layout.DevComm, d.state)
}

// Close destroys the device communicator (ncclDevCommDestroy) and frees
// its device copy. No kernel using it may still run. A device communicator
// still being created is waited for first (outside its group). Close is
// idempotent: a second Close, or a Close after the communicator's Destroy
// or Abort (which closed it), returns nil. Not collective. NCCL 2.28.3.
func (d *DevComm) Close() error {
	if d == nil || d.c == nil {
		return nil
	}
	return closeAsync(d)
}

// closeLocked is Close for Destroy and Abort (c.mu held).
func (d *DevComm) closeLocked() error { return closeAsyncLocked(d) }

func (d *DevComm) async() *asyncRes { return &d.asyncRes }

func (d *DevComm) destroyLocked() capi.Status { return capi.DevCommDestroy(d.c.ptr, d.store) }

func (d *DevComm) freeLocked(later bool) {
	if d.hasDev {
		d.devMem.Free()
		d.hasDev = false
	}
	if later {
		d.c.life.deferred = append(d.c.life.deferred, d.store.Free)
		return
	}
	d.store.Free()
}

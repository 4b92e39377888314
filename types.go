package nccl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/versions"
)

// DataType is an NCCL element type (ncclDataType_t). It is [cuda.DType]
// itself (an alias, as os.FileMode is fs.FileMode), so a [cuda.Slice]'s
// DType is a DataType with no conversion, and one table names every type:
// String gives the C name without its "nccl" prefix ("float32" for
// ncclFloat32), Size the element size, Valid whether the binding knows it.
type DataType = cuda.DType

// NCCL data types: [cuda.DType]'s constants, re-exported.
const (
	Int8       = cuda.Int8           // ncclInt8
	Uint8      = cuda.Uint8          // ncclUint8
	Int32      = cuda.Int32          // ncclInt32
	Uint32     = cuda.Uint32         // ncclUint32
	Int64      = cuda.Int64          // ncclInt64
	Uint64     = cuda.Uint64         // ncclUint64
	Float16    = cuda.Float16Type    // ncclFloat16
	Float32    = cuda.Float32        // ncclFloat32
	Float64    = cuda.Float64        // ncclFloat64
	BFloat16   = cuda.BFloat16Type   // ncclBfloat16
	Float8E4M3 = cuda.Float8E4M3Type // ncclFloat8e4m3, NCCL 2.24.3 (reductions need sm_90)
	Float8E5M2 = cuda.Float8E5M2Type // ncclFloat8e5m2, NCCL 2.24.3 (reductions need sm_90)
)

// dataTypeSince is the first NCCL release that has t: the version
// table's row for the fp8 types, [MinRelease] for the others (every release
// the binding loads has them).
func dataTypeSince(t DataType) Release {
	if f, ok := dataTypeFeature(t); ok {
		return Release(f.Since())
	}
	return MinRelease
}

// dataTypeFeature is the version-table row of a type that not every
// supported release has.
func dataTypeFeature(t DataType) (versions.Feature, bool) {
	switch t {
	case Float8E4M3:
		return versions.Float8E4M3, true
	case Float8E5M2:
		return versions.Float8E5M2, true
	}
	return 0, false
}

// checkDataType returns the unsupported error when release r lacks t.
func checkDataType(t DataType, r Release) error {
	if f, ok := dataTypeFeature(t); ok {
		return need(r, f)
	}
	return nil
}

// dataTypeCName is t's C name, "ncclFloat8e4m3" (String's rule reversed),
// for errors that name NCCL's own words.
func dataTypeCName(t DataType) string {
	n := t.String()
	if !t.Valid() {
		return "ncclDataType(" + strconv.Itoa(int(t)) + ")"
	}
	return "nccl" + strings.ToUpper(n[:1]) + n[1:]
}

// isFloat8 reports whether t is one of the fp8 types.
func isFloat8(t DataType) bool { return t == Float8E4M3 || t == Float8E5M2 }

// RedOp is a reduction operator (ncclRedOp_t): a built-in one, or a custom
// operator made for one communicator (valid only with it).
type RedOp int32

// Built-in reduction operators.
const (
	Sum  RedOp = 0 // ncclSum
	Prod RedOp = 1 // ncclProd
	Max  RedOp = 2 // ncclMax
	Min  RedOp = 3 // ncclMin
	Avg  RedOp = 4 // ncclAvg
	// numBuiltinOps is ncclNumOps, the first value of custom operators.
	numBuiltinOps RedOp = 5
)

var redOpNames = [...]string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"}

// String is the C name, or "ncclRedOp(N)" for a custom operator.
func (o RedOp) String() string {
	if o >= 0 && o < numBuiltinOps {
		return redOpNames[o]
	}
	return fmt.Sprintf("ncclRedOp(%d)", int32(o))
}

// Builtin reports whether o is one of [Sum], [Prod], [Max], [Min], [Avg].
func (o RedOp) Builtin() bool { return o >= 0 && o < numBuiltinOps }

// GINType is the GPU-initiated networking transport a communicator has
// (ncclGinType_t, NCCL 2.29.2).
type GINType int32

// GIN transports. The C value 1 is not used.
const (
	GINNone   GINType = 0 // NCCL_GIN_TYPE_NONE
	GINProxy  GINType = 2 // NCCL_GIN_TYPE_PROXY
	GINGDAKI  GINType = 3 // NCCL_GIN_TYPE_GDAKI
	GINGPI    GINType = 4 // NCCL_GIN_TYPE_GPI, NCCL 2.30.7
	GINEFAGDA GINType = 5 // NCCL_GIN_TYPE_EFA_GDA, NCCL 2.31.0
)

var ginTypeNames = map[GINType]string{
	GINNone: "NCCL_GIN_TYPE_NONE", GINProxy: "NCCL_GIN_TYPE_PROXY", GINGDAKI: "NCCL_GIN_TYPE_GDAKI", GINGPI: "NCCL_GIN_TYPE_GPI",
	GINEFAGDA: "NCCL_GIN_TYPE_EFA_GDA",
}

// ginTypeShortNames are the names String wrote before it wrote the C names;
// UnmarshalText still reads them.
var ginTypeShortNames = map[GINType]string{GINNone: "NONE", GINProxy: "PROXY", GINGDAKI: "GDAKI", GINGPI: "GPI"}

// String is the C name, e.g. "NCCL_GIN_TYPE_PROXY"; other values print as
// "ncclGinType(N)".
func (g GINType) String() string {
	if s, ok := ginTypeNames[g]; ok {
		return s
	}
	return fmt.Sprintf("ncclGinType(%d)", int32(g))
}

// MarshalText writes the String form (for JSON).
func (g GINType) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText reads the String form back, "ncclGinType(N)" included. It
// also reads the forms older versions wrote: "NONE", "PROXY", "GDAKI", "GPI"
// and "UNKNOWN(N)".
func (g *GINType) UnmarshalText(b []byte) error {
	for v, s := range ginTypeNames {
		if short, ok := ginTypeShortNames[v]; string(b) == s || ok && string(b) == short {
			*g = v
			return nil
		}
	}
	for _, form := range []string{"ncclGinType(%d)", "UNKNOWN(%d)"} {
		var n int32
		if _, err := fmt.Sscanf(string(b), form, &n); err == nil && fmt.Sprintf(form, n) == string(b) {
			*g = GINType(n)
			return nil
		}
	}
	return &ArgError{Op: "GINType.UnmarshalText", Arg: "text",
		Reason: fmt.Sprintf("%q is not NCCL_GIN_TYPE_NONE, NCCL_GIN_TYPE_PROXY, NCCL_GIN_TYPE_GDAKI, NCCL_GIN_TYPE_GPI, NCCL_GIN_TYPE_EFA_GDA or ncclGinType(N)", b)}
}

// GINTypeSet is a set of GIN transports: bit t stands for [GINType] t
// (ncclCommProperties_t's ginSupport[64], NCCL 2.31.0).
type GINTypeSet uint64

// Has reports whether the set holds g.
func (s GINTypeSet) Has(g GINType) bool { return g >= 0 && g < 64 && s&(1<<g) != 0 }

// Types lists the set's transports in increasing order.
func (s GINTypeSet) Types() []GINType {
	var out []GINType
	for g := GINType(0); g < 64; g++ {
		if s.Has(g) {
			out = append(out, g)
		}
	}
	return out
}

// String lists the C names, e.g. "[NCCL_GIN_TYPE_PROXY NCCL_GIN_TYPE_GDAKI]".
func (s GINTypeSet) String() string { return fmt.Sprint(s.Types()) }

// MarshalJSON writes the set as a list of C names.
func (s GINTypeSet) MarshalJSON() ([]byte, error) {
	t := s.Types()
	if t == nil {
		t = []GINType{}
	}
	return json.Marshal(t)
}

// GINConnectionType is how a device communicator connects over GIN
// (ncclGinConnectionType_t, NCCL 2.29.7).
type GINConnectionType int32

// GIN connection types.
const (
	GINConnectionNone GINConnectionType = 0 // NCCL_GIN_CONNECTION_NONE
	GINConnectionFull GINConnectionType = 1 // NCCL_GIN_CONNECTION_FULL
	GINConnectionRail GINConnectionType = 2 // NCCL_GIN_CONNECTION_RAIL
	// GINConnectionCustomStride connects each rank to the ranks
	// [DevCommRequirements.GINCustomStride] apart
	// (NCCL_GIN_CONNECTION_CUSTOM_STRIDE). NCCL 2.31.0.
	GINConnectionCustomStride GINConnectionType = 3
)

// String is the C name, e.g. "NCCL_GIN_CONNECTION_FULL"; other values print
// as "ncclGinConnectionType(N)".
func (g GINConnectionType) String() string {
	switch g {
	case GINConnectionNone:
		return "NCCL_GIN_CONNECTION_NONE"
	case GINConnectionFull:
		return "NCCL_GIN_CONNECTION_FULL"
	case GINConnectionRail:
		return "NCCL_GIN_CONNECTION_RAIL"
	case GINConnectionCustomStride:
		return "NCCL_GIN_CONNECTION_CUSTOM_STRIDE"
	}
	return fmt.Sprintf("ncclGinConnectionType(%d)", int32(g))
}

// CFTCap is a set of CUDA fabric (CFT) capabilities a device communicator
// asks for ([DevCommRequirements.CFTCaps]; ncclCftCap_t, NCCL 2.31.2).
// CFT needs Blackwell GPUs with CUDA 13.3 on every rank: where a rank
// lacks it, ncclDevCommCreate fails.
type CFTCap int32

// CFT capabilities (NVIDIA's 2.31.2 nccl_device/core.h).
const (
	CFTNone     CFTCap = 0x0 // NCCL_CFT_NONE: no CFT (the default)
	CFTUnicast  CFTCap = 0x1 // NCCL_CFT: unicast CFT logical endpoints
	CFTMultimem CFTCap = 0x2 // NCCL_CFT_MULTIMEM: multicast CFT logical endpoints and multimem CFT barriers
)

// CTAPolicy is a set of NCCL_CTA_POLICY_* flags ([Config.CTAPolicy], NCCL 2.27.3).
type CTAPolicy int32

// CTA policies.
const (
	CTAPolicyDefault    CTAPolicy = 0x00 // NCCL_CTA_POLICY_DEFAULT, 2.27.3
	CTAPolicyEfficiency CTAPolicy = 0x01 // NCCL_CTA_POLICY_EFFICIENCY, 2.27.3
	CTAPolicyZero       CTAPolicy = 0x02 // NCCL_CTA_POLICY_ZERO, 2.28.3
)

// GraphUsageMode says how a communicator is used with CUDA graphs
// ([Config.GraphUsageMode], NCCL 2.29.2).
type GraphUsageMode int32

// Graph usage modes.
const (
	GraphUsageNone     GraphUsageMode = 0 // no graphs
	GraphUsageOne      GraphUsageMode = 1 // one graph
	GraphUsageMultiple GraphUsageMode = 2 // several graphs, or graphs mixed with eager calls (NCCL's default)
)

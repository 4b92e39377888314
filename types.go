package nccl

import (
	"fmt"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/versions"
)

// DataType is an NCCL element type (ncclDataType_t). Its values equal
// [cuda.DType]'s, so a [cuda.Slice] of any element type maps to one.
type DataType int32

// NCCL data types.
const (
	Int8       DataType = 0  // ncclInt8
	Uint8      DataType = 1  // ncclUint8
	Int32      DataType = 2  // ncclInt32
	Uint32     DataType = 3  // ncclUint32
	Int64      DataType = 4  // ncclInt64
	Uint64     DataType = 5  // ncclUint64
	Float16    DataType = 6  // ncclFloat16
	Float32    DataType = 7  // ncclFloat32
	Float64    DataType = 8  // ncclFloat64
	BFloat16   DataType = 9  // ncclBfloat16
	Float8E4M3 DataType = 10 // ncclFloat8e4m3, NCCL 2.24.3 (reductions need sm_90)
	Float8E5M2 DataType = 11 // ncclFloat8e5m2, NCCL 2.24.3 (reductions need sm_90)
)

var dataTypeNames = [...]string{
	"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
	"ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2",
}

// DataTypeOf is the NCCL data type of a cuda element type.
func DataTypeOf(t cuda.DType) DataType { return DataType(t) }

// Valid reports whether t is a data type the binding knows.
func (t DataType) Valid() bool { return t >= 0 && int(t) < len(dataTypeNames) }

// Size is the size of one element in bytes (0 if unknown).
func (t DataType) Size() int { return cuda.DType(t).Size() }

// String is the C name, e.g. "ncclBfloat16".
func (t DataType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("ncclDataType(%d)", int32(t))
	}
	return dataTypeNames[t]
}

// Since is the first supported NCCL release that has the type:
// [MinRelease] for every type but the fp8 ones (NCCL 2.24.3).
func (t DataType) Since() Release {
	if f, ok := t.feature(); ok {
		return Release(f.Since())
	}
	return MinRelease
}

// feature is the version-table row of a type that not every supported
// release has.
func (t DataType) feature() (versions.Feature, bool) {
	switch t {
	case Float8E4M3:
		return versions.Float8E4M3, true
	case Float8E5M2:
		return versions.Float8E5M2, true
	}
	return 0, false
}

// check returns the unsupported error when release r lacks t.
func (t DataType) check(r Release) error {
	if f, ok := t.feature(); ok {
		return need(r, f)
	}
	return nil
}

// IsFloat8 reports whether t is one of the fp8 types.
func (t DataType) IsFloat8() bool { return t == Float8E4M3 || t == Float8E5M2 }

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
	GINNone  GINType = 0 // NCCL_GIN_TYPE_NONE
	GINProxy GINType = 2 // NCCL_GIN_TYPE_PROXY
	GINGDAKI GINType = 3 // NCCL_GIN_TYPE_GDAKI
	GINGPI   GINType = 4 // NCCL_GIN_TYPE_GPI, NCCL 2.30.7
)

var ginTypeNames = map[GINType]string{
	GINNone: "NCCL_GIN_TYPE_NONE", GINProxy: "NCCL_GIN_TYPE_PROXY", GINGDAKI: "NCCL_GIN_TYPE_GDAKI", GINGPI: "NCCL_GIN_TYPE_GPI",
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
		if string(b) == s || string(b) == ginTypeShortNames[v] {
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
		Reason: fmt.Sprintf("%q is not NCCL_GIN_TYPE_NONE, NCCL_GIN_TYPE_PROXY, NCCL_GIN_TYPE_GDAKI, NCCL_GIN_TYPE_GPI or ncclGinType(N)", b)}
}

// GINConnectionType is how a device communicator connects over GIN
// (ncclGinConnectionType_t, NCCL 2.29.7).
type GINConnectionType int32

// GIN connection types.
const (
	GINConnectionNone GINConnectionType = 0 // NCCL_GIN_CONNECTION_NONE
	GINConnectionFull GINConnectionType = 1 // NCCL_GIN_CONNECTION_FULL
	GINConnectionRail GINConnectionType = 2 // NCCL_GIN_CONNECTION_RAIL
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
	}
	return fmt.Sprintf("ncclGinConnectionType(%d)", int32(g))
}

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

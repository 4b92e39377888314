package cuda

import (
	"fmt"
	"math"
	"sort"

	"github.com/x448/float16"
)

// Element types of device memory beyond Go's own numeric types. Each holds
// the bits of one value; convert with the From/Float32 functions.
type (
	// Float16 is IEEE 754 half precision.
	Float16 uint16
	// BFloat16 is bfloat16: the upper half of a float32.
	BFloat16 uint16
	// Float8E4M3 is fp8 E4M3 ("fn": no infinities, one NaN pattern, max 448).
	Float8E4M3 uint8
	// Float8E5M2 is fp8 E5M2 (IEEE-like, with infinities; max 57344).
	Float8E5M2 uint8
)

// Elem is every element type device memory can hold: those NCCL reduces and
// moves.
type Elem interface {
	int8 | uint8 | int32 | uint32 | int64 | uint64 | Float16 | BFloat16 | float32 | float64 | Float8E4M3 | Float8E5M2
}

// DType names an element type. It is the module's one data type enum:
// package nccl's DataType is this type (an alias), and the flight recorder
// (package trace), which imports no cgo package, stores the same codes in a
// byte, checked against this table by a test of package nccl. Its values
// are NCCL's ncclDataType_t codes.
type DType int32

// Element types, numbered as ncclDataType_t.
const (
	// Adding one touches: a value here (the next ncclDataType_t code) and
	// its row in dtypeInfo; its Go type in Elem and DTypeOf (TestDTypes);
	// package nccl's re-exported constant (TestDataTypesReexported) and its
	// first release (dataTypeSince); the recorder's row and PyTorch's name
	// in package trace (TestTraceVocabulary, TestTablesCoverEveryValue);
	// perf's nccl-tests name (TestEveryDataTypeHasANcclTestsName); and the
	// fake NCCL's type sizes.

	Int8 DType = iota
	Uint8
	Int32
	Uint32
	Int64
	Uint64
	Float16Type
	Float32
	Float64
	BFloat16Type
	Float8E4M3Type
	Float8E5M2Type
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
	{"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1},
}

// Valid reports whether t is a known element type.
func (t DType) Valid() bool { return t >= 0 && int(t) < len(dtypeInfo) }

// Size is the size of one element in bytes (0 for an unknown type).
func (t DType) Size() int {
	if !t.Valid() {
		return 0
	}
	return dtypeInfo[t].size
}

// String is the type's name: NCCL's C name without its "nccl" prefix, with
// a lower-case first letter ("bfloat16" for ncclBfloat16, "float8e4m3" for
// ncclFloat8e4m3). Flight-recorder dumps use the same names. An unknown
// value prints as "DType(N)".
func (t DType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("DType(%d)", int32(t))
	}
	return dtypeInfo[t].name
}

// DTypeOf is the [DType] of T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case int8:
		return Int8
	case uint8:
		return Uint8
	case int32:
		return Int32
	case uint32:
		return Uint32
	case int64:
		return Int64
	case uint64:
		return Uint64
	case Float16:
		return Float16Type
	case float32:
		return Float32
	case float64:
		return Float64
	case BFloat16:
		return BFloat16Type
	case Float8E4M3:
		return Float8E4M3Type
	default: // Float8E5M2: Elem admits nothing else
		return Float8E5M2Type
	}
}

// Float16From rounds f to the nearest half (ties to even).
func Float16From(f float32) Float16 { return Float16(float16.Fromfloat32(f).Bits()) }

// Float32 converts h exactly.
func (h Float16) Float32() float32 { return float16.Frombits(uint16(h)).Float32() }

// BFloat16From rounds f to the nearest bfloat16 (ties to even); NaN stays NaN.
func BFloat16From(f float32) BFloat16 {
	b := math.Float32bits(f)
	if f != f {
		return BFloat16(b>>16 | 0x40)
	}
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 converts b exactly.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// fp8 formats: exponent bits, mantissa bits, bias, and whether the all-ones
// exponent holds infinities and NaNs (E5M2) or ordinary values (E4M3fn).
type fp8Format struct {
	ebits, mbits, bias int
	ieee               bool
	positives          []float32 // every finite non-negative value, by code
}

var (
	fp8E4M3 = newFP8(4, 3, 7, false)
	fp8E5M2 = newFP8(5, 2, 15, true)
)

func newFP8(ebits, mbits, bias int, ieee bool) *fp8Format {
	f := &fp8Format{ebits: ebits, mbits: mbits, bias: bias, ieee: ieee}
	for code := 0; code < 128; code++ {
		v := f.decode(uint8(code))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			break
		}
		f.positives = append(f.positives, v)
	}
	return f
}

func (f *fp8Format) decode(c uint8) float32 {
	sign := float32(1)
	if c&0x80 != 0 {
		sign = -1
	}
	e := int(c>>f.mbits) & (1<<f.ebits - 1)
	m := int(c) & (1<<f.mbits - 1)
	emax := 1<<f.ebits - 1
	switch {
	case f.ieee && e == emax && m == 0:
		return sign * float32(math.Inf(1))
	case f.ieee && e == emax, !f.ieee && e == emax && m == 1<<f.mbits-1:
		return float32(math.NaN())
	case e == 0:
		return sign * float32(math.Ldexp(float64(m), 1-f.bias-f.mbits))
	}
	return sign * float32(math.Ldexp(1+float64(m)/float64(int(1)<<f.mbits), e-f.bias))
}

// encode rounds to the nearest value, ties to an even code, and saturates
// finite values beyond the largest to it.
func (f *fp8Format) encode(v float32) uint8 {
	if v != v {
		if f.ieee {
			return 0x7f
		}
		return 0x7f // E4M3fn's NaN: exponent and mantissa all ones
	}
	var sign uint8
	if math.Signbit(float64(v)) {
		sign, v = 0x80, -v
	}
	if math.IsInf(float64(v), 1) && f.ieee {
		return sign | uint8((1<<f.ebits-1)<<f.mbits)
	}
	p := f.positives
	i := sort.Search(len(p), func(i int) bool { return p[i] >= v })
	if i == len(p) {
		return sign | uint8(len(p)-1)
	}
	if p[i] == v || i == 0 {
		return sign | uint8(i)
	}
	lo, hi := v-p[i-1], p[i]-v
	if lo < hi || (lo == hi && (i-1)%2 == 0) {
		return sign | uint8(i-1)
	}
	return sign | uint8(i)
}

// Float8E4M3From rounds f to the nearest E4M3 value (ties to even),
// saturating beyond ±448.
func Float8E4M3From(f float32) Float8E4M3 { return Float8E4M3(fp8E4M3.encode(f)) }

// Float32 converts x exactly.
func (x Float8E4M3) Float32() float32 { return fp8E4M3.decode(uint8(x)) }

// Float8E5M2From rounds f to the nearest E5M2 value (ties to even),
// saturating finite values beyond ±57344; infinities stay infinite.
func Float8E5M2From(f float32) Float8E5M2 { return Float8E5M2(fp8E5M2.encode(f)) }

// Float32 converts x exactly.
func (x Float8E5M2) Float32() float32 { return fp8E5M2.decode(uint8(x)) }

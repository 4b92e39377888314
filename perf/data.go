package perf

import (
	"encoding/binary"
	"math"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Data patterns (nccl-tests' idea, not its code): every rank's input is a
// deterministic function of (rank, element, seed) made of small integers,
// chosen per operation so that every partial result is exact in every data
// type; the host computes what each output element must be and compares
// every element of every rank's output with it. Values repeat with a
// period of 65521 elements (a prime), so a block placed at the wrong offset
// is caught.

const patternPeriod = 65521

// pattern is the input of one run.
type pattern struct {
	kind   patternKind
	m      uint32 // values in [0, m) for the additive kinds
	seed   uint64
	dt     nccl.DataType
	signed bool // prod inputs are ±1 (else 1 or 3)
}

type patternKind uint8

const (
	kindMove patternKind = iota // data movement: values in [0, m)
	kindSum                     // sum, avg, mulsum
	kindProd
	kindMinMax
)

func newPattern(dt nccl.DataType, op redOp, reduces bool, seed uint64) pattern {
	p := pattern{seed: seed, dt: dt}
	fp8 := dt == nccl.Float8E4M3 || dt == nccl.Float8E5M2
	switch {
	case !reduces:
		p.kind, p.m = kindMove, 100
		if fp8 {
			p.m = 8
		}
	case op.mulsum || op.op == nccl.Sum || op.op == nccl.Avg:
		p.kind, p.m = kindSum, 4
		if fp8 {
			p.m = 2
		}
	case op.op == nccl.Prod:
		p.kind = kindProd
		p.signed = dt != nccl.Uint8 && dt != nccl.Uint32 && dt != nccl.Uint64
	default:
		p.kind, p.m = kindMinMax, 8
	}
	return p
}

// hash mixes (rank, element, seed) into 32 bits, with period patternPeriod
// in the element.
func (p *pattern) hash(rank int, i uint64) uint32 {
	x := (i + 7919*uint64(rank) + 104729*p.seed) % patternPeriod
	return uint32(x) * 2654435761 >> 13
}

// at is rank's input element i.
func (p *pattern) at(rank int, i uint64) int64 {
	h := p.hash(rank, i)
	if p.kind == kindProd {
		if h&1 == 0 {
			return 1
		}
		if p.signed {
			return -1
		}
		return 3
	}
	return int64(h % p.m)
}

// mulsumScalar is rank's PreMulSum factor.
func mulsumScalar(rank int) int64 { return 1 + int64(rank%2) }

// reduced is the reduction over ranks of element i: an integer for integer
// types (wrapping at the type's width happens at comparison), a float for
// float types.
func (p *pattern) reduced(op redOp, n int, i uint64) (int64, float64) {
	var acc int64
	switch {
	case op.mulsum:
		for r := 0; r < n; r++ {
			acc += mulsumScalar(r) * p.at(r, i)
		}
	case op.op == nccl.Sum, op.op == nccl.Avg:
		for r := 0; r < n; r++ {
			acc += p.at(r, i)
		}
	case op.op == nccl.Prod:
		acc = 1
		for r := 0; r < n; r++ {
			acc *= p.at(r, i)
		}
	case op.op == nccl.Max:
		acc = math.MinInt64
		for r := 0; r < n; r++ {
			acc = max(acc, p.at(r, i))
		}
	case op.op == nccl.Min:
		acc = math.MaxInt64
		for r := 0; r < n; r++ {
			acc = min(acc, p.at(r, i))
		}
	}
	if !op.mulsum && op.op == nccl.Avg {
		if isFloat(p.dt) {
			return 0, float64(acc) / float64(n)
		}
		return acc / int64(n), 0 // NCCL divides the integer sum
	}
	return acc, float64(acc)
}

func isFloat(dt nccl.DataType) bool {
	switch dt {
	case nccl.Float16, nccl.Float32, nccl.Float64, nccl.BFloat16, nccl.Float8E4M3, nccl.Float8E5M2:
		return true
	}
	return false
}

// encode writes v as one element of dt at b.
func encode(dt nccl.DataType, b []byte, v int64) {
	switch dt {
	case nccl.Int8, nccl.Uint8:
		b[0] = byte(v)
	case nccl.Int32, nccl.Uint32:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case nccl.Int64, nccl.Uint64:
		binary.LittleEndian.PutUint64(b, uint64(v))
	case nccl.Float16:
		binary.LittleEndian.PutUint16(b, uint16(cuda.Float16From(float32(v))))
	case nccl.BFloat16:
		binary.LittleEndian.PutUint16(b, uint16(cuda.BFloat16From(float32(v))))
	case nccl.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case nccl.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v)))
	case nccl.Float8E4M3:
		b[0] = byte(cuda.Float8E4M3From(float32(v)))
	case nccl.Float8E5M2:
		b[0] = byte(cuda.Float8E5M2From(float32(v)))
	}
}

// decodeInt reads an integer element, sign- or zero-extended.
func decodeInt(dt nccl.DataType, b []byte) int64 {
	switch dt {
	case nccl.Int8:
		return int64(int8(b[0]))
	case nccl.Uint8:
		return int64(b[0])
	case nccl.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	case nccl.Uint32:
		return int64(binary.LittleEndian.Uint32(b))
	default:
		return int64(binary.LittleEndian.Uint64(b))
	}
}

// wrap truncates v to dt's width, as decodeInt would read it back.
func wrap(dt nccl.DataType, v int64) int64 {
	switch dt {
	case nccl.Int8:
		return int64(int8(v))
	case nccl.Uint8:
		return int64(uint8(v))
	case nccl.Int32:
		return int64(int32(v))
	case nccl.Uint32:
		return int64(uint32(v))
	}
	return v
}

// decodeFloat reads a float element.
func decodeFloat(dt nccl.DataType, b []byte) float64 {
	switch dt {
	case nccl.Float16:
		return float64(cuda.Float16(binary.LittleEndian.Uint16(b)).Float32())
	case nccl.BFloat16:
		return float64(cuda.BFloat16(binary.LittleEndian.Uint16(b)).Float32())
	case nccl.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case nccl.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case nccl.Float8E4M3:
		return float64(cuda.Float8E4M3(b[0]).Float32())
	case nccl.Float8E5M2:
		return float64(cuda.Float8E5M2(b[0]).Float32())
	}
	return math.NaN()
}

// tolerance is the relative error allowed for a float type after a
// reduction over n ranks (where rounding order may differ from the host's).
func tolerance(dt nccl.DataType, n int) float64 {
	eps := map[nccl.DataType]float64{
		nccl.Float16: 1.0 / 1024, nccl.BFloat16: 1.0 / 128, nccl.Float32: 1.0 / (1 << 23),
		nccl.Float64: 1.0 / (1 << 52), nccl.Float8E4M3: 1.0 / 8, nccl.Float8E5M2: 1.0 / 4,
	}[dt]
	return eps * float64(n+1)
}

// expectation is what a rank's output must hold: want(i) for element i of
// the checked region, as an integer or a float (see reduced).
type expectation func(i uint64) (int64, float64)

// countWrong compares the elements of got (of dt) with want and returns how
// many differ.
func countWrong(dt nccl.DataType, got []byte, want expectation, n int) int64 {
	size := uint64(dt.Size())
	count := uint64(len(got)) / size
	var wrong int64
	if !isFloat(dt) {
		for i := uint64(0); i < count; i++ {
			w, _ := want(i)
			if decodeInt(dt, got[i*size:]) != wrap(dt, w) {
				wrong++
			}
		}
		return wrong
	}
	tol := tolerance(dt, n)
	for i := uint64(0); i < count; i++ {
		_, w := want(i)
		g := decodeFloat(dt, got[i*size:])
		if g == w {
			continue
		}
		if math.IsNaN(g) || math.Abs(g-w) > tol*max(math.Abs(w), 1) {
			wrong++
		}
	}
	return wrong
}

// fill writes count elements of rank's input, from element offset on, into b.
func (p *pattern) fill(b []byte, rank int, offset, count uint64) {
	size := uint64(p.dt.Size())
	for i := uint64(0); i < count; i++ {
		encode(p.dt, b[i*size:], p.at(rank, offset+i))
	}
}

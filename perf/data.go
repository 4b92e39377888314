package perf

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Data patterns and the result check (nccl-tests' rules, not its code):
//
//   - Data movement (all_gather, broadcast, alltoall, gather, scatter,
//     sendrecv, hypercube) fills every byte of every rank's input with a
//     hash of (seed, rank, byte position), so values differ per rank and per
//     position, and compares the output bytes exactly.
//   - Reductions draw values whose reduction is exact in any order, as
//     nccl-tests' verifiable inputs are: integers use every bit of the type
//     (products odd ones), wrapping at the type's width as the GPU does;
//     floats use random mantissas (every bit of the type) and exponents,
//     with two ranks per element carrying the values of a sum (same
//     exponent after PreMulSum's factor, same last mantissa bit, so the sum
//     is exact), one carrying a product's (the others ±1), and every rank a
//     value for max and min. The output is then compared bit for bit; only
//     a float average over several ranks, which NCCL computes in a format
//     it picks per GPU, may differ by 2 units in the last place (nccl-tests'
//     tolerance for ncclAvg). A reduction on one rank is a copy: exact.
//
// Filling and checking run on every core, a chunk of elements at a time,
// and compare whole chunks with bytes.Equal before looking at elements.

// patternKind says how inputs are drawn.
type patternKind uint8

const (
	kindMove   patternKind = iota // every byte random; output compared byte for byte
	kindInt                       // integer reductions
	kindSum                       // float sum, avg and PreMulSum: two carriers
	kindProd                      // float product: one carrier, the others ±1
	kindMinMax                    // float max and min: every rank random
)

// floatLayout is a float type's bit layout.
type floatLayout struct {
	expBits, mantBits uint
	bias              int
}

func layoutOf(dt nccl.DataType) (floatLayout, bool) {
	switch dt {
	case nccl.Float16:
		return floatLayout{5, 10, 15}, true
	case nccl.BFloat16:
		return floatLayout{8, 7, 127}, true
	case nccl.Float32:
		return floatLayout{8, 23, 127}, true
	case nccl.Float64:
		return floatLayout{11, 52, 1023}, true
	case nccl.Float8E4M3:
		return floatLayout{4, 3, 7}, true
	case nccl.Float8E5M2:
		return floatLayout{5, 2, 15}, true
	}
	return floatLayout{}, false
}

func (l floatLayout) mantMask() uint64 { return 1<<l.mantBits - 1 }

// make is the bits of (-1)^sign * 1.mant * 2^exp (exp unbiased).
func (l floatLayout) make(sign uint64, exp int, mant uint64) uint64 {
	return sign<<(l.expBits+l.mantBits) | uint64(exp+l.bias)<<l.mantBits | mant&l.mantMask()
}

// value is 1.mant * 2^exp as a float64.
func (l floatLayout) value(exp int, mant uint64) float64 {
	return math.Ldexp(1+float64(mant)/float64(uint64(1)<<l.mantBits), exp)
}

// ordered maps float bits to integers in the order of the values (-0 and
// +0 apart), so that their difference counts units in the last place.
func (l floatLayout) ordered(b uint64) int64 {
	sign := uint64(1) << (l.expBits + l.mantBits)
	if b&sign != 0 {
		return -int64(b &^ sign)
	}
	return int64(b)
}

// pattern is the data of one checked run: the input of every rank and,
// from it, what every output must hold.
type pattern struct {
	dt     nccl.DataType
	elt    uint64
	kind   patternKind
	op     redOp
	n      int    // ranks
	key    uint64 // the seed, mixed
	lay    floatLayout
	signed bool
	ulps   uint64 // tolerance of a float average
}

func newPattern(dt nccl.DataType, op redOp, reduces bool, n int, seed uint64) *pattern {
	p := &pattern{dt: dt, elt: uint64(dt.Size()), op: op, n: max(n, 1), key: mix(seed ^ 0x6a09e667f3bcc908)}
	lay, float := layoutOf(dt)
	p.lay = lay
	switch {
	case !reduces:
		p.kind = kindMove
	case !float:
		p.kind = kindInt
		p.signed = dt == nccl.Int8 || dt == nccl.Int32 || dt == nccl.Int64
	case op.mulsum || op.op == nccl.Sum || op.op == nccl.Avg:
		p.kind = kindSum
		if !op.mulsum && op.op == nccl.Avg && p.n > 1 {
			p.ulps = 2
		}
	case op.op == nccl.Prod:
		p.kind = kindProd
	default:
		p.kind = kindMinMax
	}
	return p
}

// mix is splitmix64's finalizer: a fast, well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// rankKey is rank's key, mixed with the seed.
func (p *pattern) rankKey(rank int) uint64 { return mix(p.key ^ uint64(rank)*0xd1b54a32d192ed03) }

// mulsumScalar is rank's PreMulSum factor (a power of two, so scaling is
// exact).
func mulsumScalar(rank int) int64 { return 1 + int64(rank%2) }

// source says where a stretch of an output comes from.
type source uint8

const (
	srcZero    source = iota // cleared before the run and left alone
	srcInput                 // a rank's input, from an element offset
	srcReduced               // the reduction over ranks, from an element offset
)

// segment is a stretch of n elements of a buffer.
type segment struct {
	n    uint64
	src  source
	rank int
	off  uint64
}

// layout is a buffer as a sequence of segments.
type layout []segment

func (l layout) count() uint64 {
	var n uint64
	for _, s := range l {
		n += s.n
	}
	return n
}

// gen writes the elements first.. of l, len(dst)/elt of them, into dst.
func (p *pattern) gen(dst []byte, l layout, first uint64) {
	i := uint64(0) // start of the current segment
	for _, s := range l {
		if len(dst) == 0 {
			return
		}
		if first >= i+s.n {
			i += s.n
			continue
		}
		from := first - i
		k := min(s.n-from, uint64(len(dst))/p.elt)
		part := dst[:k*p.elt]
		switch s.src {
		case srcZero:
			clear(part)
		case srcInput:
			p.input(part, s.rank, s.off+from)
		case srcReduced:
			p.reduced(part, s.off+from)
		}
		dst = dst[k*p.elt:]
		first += k
		i += s.n
	}
}

// put writes the low elt bytes of v at b.
func put(b []byte, elt uint64, v uint64) {
	switch elt {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// get reads an element of elt bytes.
func get(b []byte, elt uint64) uint64 {
	switch elt {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// input writes rank's input elements off.. into dst.
func (p *pattern) input(dst []byte, rank int, off uint64) {
	if p.kind == kindMove {
		p.moveBytes(dst, p.rankKey(rank), off*p.elt)
		return
	}
	n := uint64(len(dst)) / p.elt
	if p.kind == kindSum {
		p.sums(dst, off, rank)
		return
	}
	if p.elt == 4 {
		for k := uint64(0); k < n; k++ {
			binary.LittleEndian.PutUint32(dst[4*k:], uint32(p.in(rank, off+k)))
		}
		return
	}
	for k := uint64(0); k < n; k++ {
		put(dst[k*p.elt:], p.elt, p.in(rank, off+k))
	}
}

// moveBytes writes the random bytes at byte positions pos.. of the stream
// keyed by key: 8 bytes per hash.
func (p *pattern) moveBytes(dst []byte, key, pos uint64) {
	if head := pos % 8; head != 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], mix(key+pos/8))
		c := copy(dst, w[head:])
		dst, pos = dst[c:], pos+uint64(c)
	}
	word := pos / 8
	for len(dst) >= 8 {
		binary.LittleEndian.PutUint64(dst, mix(key+word))
		dst, word = dst[8:], word+1
	}
	if len(dst) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], mix(key+word))
		copy(dst, w[:])
	}
}

// widthMask keeps an integer type's bits.
func (p *pattern) widthMask() uint64 { return ^uint64(0) >> (64 - 8*p.elt) }

// sext sign-extends an integer element of the pattern's type.
func (p *pattern) sext(v uint64) int64 {
	s := 64 - 8*p.elt
	return int64(v<<s) >> s
}

// in is rank's input element i, as the type's bits.
func (p *pattern) in(rank int, i uint64) uint64 {
	switch p.kind {
	case kindInt:
		v := mix(p.rankKey(rank)+i) & p.widthMask()
		if !p.op.mulsum && p.op.op == nccl.Prod {
			v |= 1 // odd, so that a product never collapses to 0
		}
		return v
	case kindSum:
		a, b := p.carriers(i)
		switch rank {
		case a.rank:
			return a.bits
		case b.rank:
			return b.bits
		}
		return 0
	case kindProd:
		h := mix(p.key + i)
		h2 := mix(h)
		sign := h2 >> (uint(rank) & 63) & 1
		if rank == int(h%uint64(p.n)) {
			return p.lay.make(sign, int(h>>8&3)-2, h2>>8)
		}
		return p.lay.make(sign, 0, 0) // ±1
	case kindMinMax:
		h := mix(p.rankKey(rank) + i)
		return p.lay.make(h&1, int(h>>1&3)-2, h>>8)
	}
	return 0
}

// carrier is one rank's non-zero contribution to a float sum.
type carrier struct {
	rank int
	bits uint64
	exp  int    // of the scaled value
	mant uint64 // likewise
}

// carriers are the two ranks (one on a single rank) that contribute to
// element i of a float sum, and their values: after PreMulSum's factors
// both have exponent exp and the same last mantissa bit, so that their sum
// is exact in any order and the other ranks add zeros.
func (p *pattern) carriers(i uint64) (a, b carrier) {
	h := mix(p.key + i)
	h2 := bits.RotateLeft64(h*0x9e3779b97f4a7c15, 23)
	exp := int(h>>32&3) - 2
	a.rank = int(uint64(uint32(h)) * uint64(p.n) >> 32) // h mod n, without a division
	a.exp, a.mant = exp, h2&p.lay.mantMask()
	a.bits = p.lay.make(0, exp-p.shift(a.rank), a.mant)
	b.rank = -1
	if p.n > 1 {
		b.rank = a.rank + 1 + int((h>>34&0xffff)*uint64(p.n-1)>>16)
		if b.rank >= p.n {
			b.rank -= p.n
		}
		m := bits.RotateLeft64(h2, 31) & p.lay.mantMask()
		b.exp, b.mant = exp, m&^1|a.mant&1
		b.bits = p.lay.make(0, exp-p.shift(b.rank), b.mant)
	}
	return a, b
}

// sums is carriers and out (or in, for rank >= 0) of a float sum or
// PreMulSum, for the elements off.. of dst, in one loop: the common check.
func (p *pattern) sums(dst []byte, off uint64, rank int) {
	elt, n := p.elt, uint64(p.n)
	mb, bias, mask := p.lay.mantBits, p.lay.bias, p.lay.mantMask()
	count := uint64(len(dst)) / elt
	for k := uint64(0); k < count; k++ {
		h := mix(p.key + off + k)
		h2 := bits.RotateLeft64(h*0x9e3779b97f4a7c15, 23)
		exp := int(h>>32&3) - 2
		ra := uint64(uint32(h)) * n >> 32
		ma := h2 & mask
		var v uint64
		switch {
		case n == 1: // a copy: rank 0's value, factor 1
			v = uint64(exp+bias)<<mb | ma
		default:
			rb := ra + 1 + (h>>34&0xffff)*(n-1)>>16
			if rb >= n {
				rb -= n
			}
			mbv := bits.RotateLeft64(h2, 31)&mask&^1 | ma&1
			switch {
			case rank < 0:
				v = uint64(exp+1+bias)<<mb | (ma+mbv)>>1
			case uint64(rank) == ra:
				v = uint64(exp-p.shift(rank)+bias)<<mb | ma
			case uint64(rank) == rb:
				v = uint64(exp-p.shift(rank)+bias)<<mb | mbv
			}
		}
		switch elt {
		case 1:
			dst[k] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(dst[2*k:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(dst[4*k:], uint32(v))
		default:
			binary.LittleEndian.PutUint64(dst[8*k:], v)
		}
	}
}

// shift is log2 of rank's PreMulSum factor (0 for other operations).
func (p *pattern) shift(rank int) int {
	if p.op.mulsum {
		return bits.TrailingZeros64(uint64(mulsumScalar(rank)))
	}
	return 0
}

// reduced writes the reduction of the elements off.. over every rank.
func (p *pattern) reduced(dst []byte, off uint64) {
	n := uint64(len(dst)) / p.elt
	if p.kind == kindSum && (p.n == 1 || p.op.mulsum || p.op.op == nccl.Sum) {
		p.sums(dst, off, -1)
		return
	}
	if p.elt == 4 {
		for k := uint64(0); k < n; k++ {
			binary.LittleEndian.PutUint32(dst[4*k:], uint32(p.out(off+k)))
		}
		return
	}
	for k := uint64(0); k < n; k++ {
		put(dst[k*p.elt:], p.elt, p.out(off+k))
	}
}

// out is the reduction of element i over every rank, as the type's bits.
func (p *pattern) out(i uint64) uint64 {
	switch p.kind {
	case kindInt:
		return p.intOut(i)
	case kindSum:
		a, b := p.carriers(i)
		if p.n == 1 {
			return p.lay.make(0, a.exp, a.mant)
		}
		if !p.op.mulsum && p.op.op == nccl.Avg {
			return p.round((p.lay.value(a.exp, a.mant) + p.lay.value(b.exp, b.mant)) / float64(p.n))
		}
		return p.lay.make(0, a.exp+1, (a.mant+b.mant)>>1)
	case kindProd:
		h := mix(p.key + i)
		h2 := mix(h)
		var sign uint64
		for r := 0; r < p.n; r++ {
			sign ^= h2 >> (uint(r) & 63) & 1
		}
		return p.lay.make(sign, int(h>>8&3)-2, h2>>8)
	case kindMinMax:
		best := p.in(0, i)
		for r := 1; r < p.n; r++ {
			v := p.in(r, i)
			if (p.op.op == nccl.Max) == (p.lay.ordered(v) > p.lay.ordered(best)) {
				best = v
			}
		}
		return best
	}
	return 0
}

// intOut reduces an integer element as the GPU does: in the type's width,
// the average as the wrapped sum divided by n (rounding toward zero).
func (p *pattern) intOut(i uint64) uint64 {
	mask := p.widthMask()
	acc := p.in(0, i)
	if p.op.mulsum {
		acc *= uint64(mulsumScalar(0))
	}
	for r := 1; r < p.n; r++ {
		v := p.in(r, i)
		switch {
		case p.op.mulsum:
			acc += v * uint64(mulsumScalar(r))
		case p.op.op == nccl.Sum, p.op.op == nccl.Avg:
			acc += v
		case p.op.op == nccl.Prod:
			acc *= v
		case p.op.op == nccl.Max, p.op.op == nccl.Min:
			less := v < acc
			if p.signed {
				less = p.sext(v) < p.sext(acc)
			}
			if less == (p.op.op == nccl.Min) {
				acc = v
			}
		}
		acc &= mask
	}
	acc &= mask
	if !p.op.mulsum && p.op.op == nccl.Avg {
		if p.signed {
			return uint64(p.sext(acc)/int64(p.n)) & mask
		}
		return acc / uint64(p.n)
	}
	return acc
}

// round is x in the pattern's float type (to nearest even; through float32
// for the narrow types, whose tolerance covers a double rounding).
func (p *pattern) round(x float64) uint64 {
	f := float32(x)
	switch p.dt {
	case nccl.Float16:
		return uint64(cuda.Float16From(f))
	case nccl.BFloat16:
		return uint64(cuda.BFloat16From(f))
	case nccl.Float32:
		return uint64(math.Float32bits(f))
	case nccl.Float64:
		return math.Float64bits(x)
	case nccl.Float8E4M3:
		return uint64(cuda.Float8E4M3From(f))
	case nccl.Float8E5M2:
		return uint64(cuda.Float8E5M2From(f))
	}
	return 0
}

// chunkElems is the unit of work of fill and check.
const chunkElems = 1 << 15

// parallel runs fn over [0, count) in chunks, on every core; scratch is
// the worker's own buffer, kept between its chunks.
func parallel(count uint64, fn func(lo, hi uint64, scratch *[]byte)) {
	chunks := (count + chunkElems - 1) / chunkElems
	workers := min(uint64(runtime.GOMAXPROCS(0)), chunks)
	if workers <= 1 {
		var scratch []byte
		for lo := uint64(0); lo < count; lo += chunkElems {
			fn(lo, min(lo+chunkElems, count), &scratch)
		}
		return
	}
	var next atomic.Uint64
	var wg sync.WaitGroup
	for w := uint64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for {
				c := next.Add(1) - 1
				if c >= chunks {
					return
				}
				lo := c * chunkElems
				fn(lo, min(lo+chunkElems, count), &scratch)
			}
		}()
	}
	wg.Wait()
}

// fill writes l's elements (count of them) into dst.
func (p *pattern) fill(dst []byte, l layout) {
	parallel(uint64(len(dst))/p.elt, func(lo, hi uint64, _ *[]byte) {
		p.gen(dst[lo*p.elt:hi*p.elt], l, lo)
	})
}

// check compares got with what l says it must hold and returns the number
// of wrong elements.
func (p *pattern) check(got []byte, l layout) int64 {
	var wrong atomic.Int64
	elt := p.elt
	parallel(uint64(len(got))/elt, func(lo, hi uint64, scratch *[]byte) {
		if uint64(cap(*scratch)) < (hi-lo)*elt {
			*scratch = make([]byte, chunkElems*elt)
		}
		want := (*scratch)[:(hi-lo)*elt]
		p.gen(want, l, lo)
		g := got[lo*elt : hi*elt]
		if bytes.Equal(g, want) {
			return
		}
		var w int64
		for k := uint64(0); k < hi-lo; k++ {
			x, y := get(g[k*elt:], elt), get(want[k*elt:], elt)
			if x == y {
				continue
			}
			if p.ulps == 0 || p.ulpDistance(x, y) > p.ulps {
				w++
			}
		}
		wrong.Add(w)
	})
	return wrong.Load()
}

// ulpDistance is how many representable values lie between two floats of
// the pattern's type, plus one (NaN bits are far from any value drawn).
func (p *pattern) ulpDistance(x, y uint64) uint64 {
	d := p.lay.ordered(x) - p.lay.ordered(y)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

package perf

import (
	"fmt"
	"math"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// decode reads float bits of dt as a float64 (through the cuda package's
// conversions, independent of the pattern's own layout arithmetic).
func decode(dt nccl.DataType, v uint64) float64 {
	switch dt {
	case nccl.Float16:
		return float64(cuda.Float16(v).Float32())
	case nccl.BFloat16:
		return float64(cuda.BFloat16(v).Float32())
	case nccl.Float32:
		return float64(math.Float32frombits(uint32(v)))
	case nccl.Float64:
		return math.Float64frombits(v)
	case nccl.Float8E4M3:
		return float64(cuda.Float8E4M3(v).Float32())
	case nccl.Float8E5M2:
		return float64(cuda.Float8E5M2(v).Float32())
	}
	panic(dt)
}

// allPatterns calls f for every type, reduction (and data movement) and a
// few rank counts.
func allPatterns(t *testing.T, f func(t *testing.T, p *pattern)) {
	rops := append([]redOp{{name: "none"}}, ops...)
	for _, dt := range types {
		for _, op := range rops {
			for _, n := range []int{1, 2, 3, 8} {
				p := newPattern(dt.dt, op, op.name != "none", n, 42)
				t.Run(fmt.Sprintf("%s/%s/%d", dt.name, op.name, n), func(t *testing.T) { f(t, p) })
			}
		}
	}
}

// The output drawn for a reduction is the reduction of the inputs drawn,
// computed here independently: exactly for everything but a float average
// over several ranks (2 units in the last place).
func TestPatternReductionsAreExact(t *testing.T) {
	allPatterns(t, func(t *testing.T, p *pattern) {
		if p.kind == kindMove {
			t.Skip("data movement has no reduction")
		}
		const count = 4096
		// The fast loops (gen) agree with in and out.
		buf := make([]byte, count*p.elt)
		p.gen(buf, layout{{n: count, src: srcReduced}}, 0)
		for i := uint64(0); i < count; i++ {
			if g := get(buf[i*p.elt:], p.elt); g != p.out(i) {
				t.Fatalf("element %d: gen %#x, out %#x", i, g, p.out(i))
			}
		}
		for r := 0; r < p.n; r++ {
			p.gen(buf, layout{{n: count - 5, src: srcInput, rank: r, off: 5}}, 0)
			for i := uint64(0); i < count-5; i++ {
				if g := get(buf[i*p.elt:], p.elt); g != p.in(r, i+5) {
					t.Fatalf("rank %d element %d: gen %#x, in %#x", r, i+5, g, p.in(r, i+5))
				}
			}
		}
		for i := uint64(0); i < count; i++ {
			got := p.out(i)
			if p.kind == kindInt {
				want := p.in(0, i)
				mul := func(r int) uint64 {
					if p.op.mulsum {
						return uint64(mulsumScalar(r))
					}
					return 1
				}
				want *= mul(0)
				for r := 1; r < p.n; r++ {
					v := p.in(r, i)
					switch p.op.name {
					case "sum", "avg", "mulsum":
						want += v * mul(r)
					case "prod":
						want *= v
					case "max", "min":
						a, b := p.sext(v), p.sext(want)
						if !p.signed {
							a, b = int64(v&p.widthMask()), int64(want&p.widthMask())
							if p.elt == 8 { // compare as unsigned
								a, b = int64(v^1<<63), int64(want^1<<63)
							}
						}
						if (a > b) == (p.op.name == "max") {
							want = v
						}
					}
				}
				want &= p.widthMask()
				if p.op.name == "avg" {
					if p.signed {
						want = uint64(p.sext(want)/int64(p.n)) & p.widthMask()
					} else {
						want /= uint64(p.n)
					}
				}
				if got != want {
					t.Fatalf("element %d: out %#x, reduction of the inputs %#x", i, got, want)
				}
				continue
			}
			vals := make([]float64, p.n)
			for r := range vals {
				vals[r] = decode(p.dt, p.in(r, i))
				if math.IsNaN(vals[r]) || math.IsInf(vals[r], 0) {
					t.Fatalf("element %d rank %d: input %v", i, r, vals[r])
				}
			}
			want := vals[0]
			if p.op.mulsum {
				want *= float64(mulsumScalar(0))
			}
			for r := 1; r < p.n; r++ {
				switch p.op.name {
				case "sum", "avg":
					want += vals[r]
				case "mulsum":
					want += vals[r] * float64(mulsumScalar(r))
				case "prod":
					want *= vals[r]
				case "max":
					want = max(want, vals[r])
				case "min":
					want = min(want, vals[r])
				}
			}
			if p.op.name == "avg" {
				want /= float64(p.n)
			}
			g := decode(p.dt, got)
			if p.ulps == 0 && g != want {
				t.Fatalf("element %d: out %v, reduction of the inputs %v (%v)", i, g, want, vals)
			}
			if p.ulps > 0 && math.Abs(g-want) > 2*math.Abs(g-decode(p.dt, got+1)) {
				t.Fatalf("element %d: avg %v, exact %v: more than 2 units apart", i, g, want)
			}
		}
	})
}

// A value one unit in the last place away (one bit in the lowest byte) is
// caught for every type and operation; an average over several ranks
// tolerates 2 units, not 3.
func TestCheckCatchesOneULP(t *testing.T) {
	allPatterns(t, func(t *testing.T, p *pattern) {
		const count = 3000
		l := layout{{n: count, src: srcReduced}}
		if p.kind == kindMove {
			l = layout{{n: 1000, src: srcInput, rank: p.n - 1, off: 7}, {n: 1000}, {n: 1000, src: srcInput, rank: 0}}
		}
		out := make([]byte, count*p.elt)
		p.fill(out, l)
		if w := p.check(out, l); w != 0 {
			t.Fatalf("right output: %d wrong", w)
		}
		for _, k := range []uint64{0, 1234, count - 1} {
			off := []uint64{1}
			if p.ulps > 0 {
				off = []uint64{3}
				// Two units are within the tolerance.
				v := get(out[k*p.elt:], p.elt)
				put(out[k*p.elt:], p.elt, v+2)
				if w := p.check(out, l); w != 0 {
					t.Errorf("element %d 2 units off: %d wrong, want 0 (avg tolerance)", k, w)
				}
				put(out[k*p.elt:], p.elt, v)
			}
			v := get(out[k*p.elt:], p.elt)
			put(out[k*p.elt:], p.elt, v^off[0])
			if p.ulps > 0 {
				put(out[k*p.elt:], p.elt, v+off[0])
			}
			if w := p.check(out, l); w != 1 {
				t.Errorf("element %d changed by %d in its last bits: %d wrong, want 1", k, off[0], w)
			}
			put(out[k*p.elt:], p.elt, v)
		}
	})
}

// The two wrong values the old float tolerance let through (a broadcast of
// fp8 e4m3 6 received as 6.5, a bf16 sum of 4 ranks 10 as 10.0625).
func TestCheckCatchesWrongFP8AndBF16(t *testing.T) {
	bcast := newPattern(nccl.Float8E4M3, redOp{name: "none"}, false, 1, 9)
	l := layout{{n: 64, src: srcInput}}
	out := make([]byte, 64)
	bcast.fill(out, l)
	out[5] = byte(cuda.Float8E4M3From(cuda.Float8E4M3(out[5]).Float32() * 1.125))
	if w := bcast.check(out, l); w != 1 {
		t.Errorf("fp8 broadcast, one value 1/8 off: %d wrong, want 1", w)
	}
	sum := newPattern(nccl.BFloat16, ops[0], true, 4, 9)
	l = layout{{n: 64, src: srcReduced}}
	out = make([]byte, 128)
	sum.fill(out, l)
	v := cuda.BFloat16(get(out[20:], 2))
	put(out[20:], 2, uint64(cuda.BFloat16From(v.Float32()*(1+1.0/128))))
	if w := sum.check(out, l); w != 1 {
		t.Errorf("bf16 sum over 4 ranks, one value 1 ulp off: %d wrong, want 1", w)
	}
}

// Data movement fills every byte, and the bytes differ per rank and per
// position.
func TestMovePatternFillsEveryByte(t *testing.T) {
	for _, dt := range types {
		p := newPattern(dt.dt, redOp{name: "none"}, false, 2, 3)
		const count = 1 << 14
		a := make([]byte, count*p.elt)
		b := make([]byte, count*p.elt)
		c := make([]byte, count*p.elt)
		p.fill(a, layout{{n: count, src: srcInput, rank: 0}})
		p.fill(b, layout{{n: count, src: srcInput, rank: 1}})
		p.fill(c, layout{{n: count, src: srcInput, rank: 0, off: 1}})
		var seen [256]bool
		zeros, sameRank, sameShift := 0, 0, 0
		for i := range a {
			seen[a[i]] = true
			if a[i] == 0 {
				zeros++
			}
			if a[i] == b[i] {
				sameRank++
			}
			if i+int(p.elt) < len(a) && c[i] == a[i+int(p.elt)] {
				sameShift++
			}
			if i+int(p.elt) < len(a) && a[i] == a[i+int(p.elt)] {
				sameRank++ // neighbours alike count against the pattern too
			}
		}
		for v, ok := range seen {
			if !ok {
				t.Errorf("%s: byte %#x never drawn", dt.name, v)
				break
			}
		}
		// Random bytes agree 1 time in 256.
		if n := len(a); zeros > n/128 || sameRank > n/64 || sameShift != n-int(p.elt) {
			t.Errorf("%s: %d zero bytes, %d equal across ranks or neighbours, %d of %d equal one element on, of %d",
				dt.name, zeros, sameRank, sameShift, n-int(p.elt), n)
		}
	}
}

// benchCheck fills and checks 256 MB as one rank of an all-reduce does
// with -c 1 (host memory only).
func benchCheck(b *testing.B, dt nccl.DataType, reduces bool, n int) {
	const size = 256 << 20
	p := newPattern(dt, ops[0], reduces, n, 1)
	count := uint64(size) / p.elt
	l := layout{{n: count, src: srcReduced}}
	if !reduces {
		l = layout{{n: count, src: srcInput, rank: n - 1}}
	}
	buf := make([]byte, size)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		p.fill(buf, l)
		if w := p.check(buf, l); w != 0 {
			b.Fatal(w)
		}
	}
}

func BenchmarkCheck256MB(b *testing.B) {
	b.Run("float-sum-1rank", func(b *testing.B) { benchCheck(b, nccl.Float32, true, 1) })
	b.Run("float-sum-8ranks", func(b *testing.B) { benchCheck(b, nccl.Float32, true, 8) })
	b.Run("bf16-move", func(b *testing.B) { benchCheck(b, nccl.BFloat16, false, 8) })
}

package cuda_test

import (
	"math"
	"testing"

	"github.com/nccl4go/nccl/cuda"
)

func TestDTypes(t *testing.T) {
	want := []struct {
		t    cuda.DType
		name string
		size int
	}{
		{cuda.Int8, "int8", 1}, {cuda.Uint8, "uint8", 1}, {cuda.Int32, "int32", 4}, {cuda.Uint32, "uint32", 4},
		{cuda.Int64, "int64", 8}, {cuda.Uint64, "uint64", 8}, {cuda.Float16Type, "float16", 2},
		{cuda.Float32, "float32", 4}, {cuda.Float64, "float64", 8}, {cuda.BFloat16Type, "bfloat16", 2},
		{cuda.Float8E4M3Type, "float8e4m3", 1}, {cuda.Float8E5M2Type, "float8e5m2", 1},
	}
	for i, w := range want {
		if int(w.t) != i {
			t.Errorf("%s = %d, want ncclDataType_t %d", w.name, int(w.t), i)
		}
		if !w.t.Valid() || w.t.String() != w.name || w.t.Size() != w.size {
			t.Errorf("%d: Valid %v String %q Size %d, want %q %d", i, w.t.Valid(), w.t.String(), w.t.Size(), w.name, w.size)
		}
	}
	for _, bad := range []cuda.DType{-1, 12, 100} {
		if bad.Valid() || bad.Size() != 0 || bad.String() == "" {
			t.Errorf("DType(%d): Valid %v Size %d String %q", int(bad), bad.Valid(), bad.Size(), bad.String())
		}
	}
	checks := []struct{ got, want cuda.DType }{
		{cuda.DTypeOf[int8](), cuda.Int8}, {cuda.DTypeOf[uint8](), cuda.Uint8}, {cuda.DTypeOf[int32](), cuda.Int32},
		{cuda.DTypeOf[uint32](), cuda.Uint32}, {cuda.DTypeOf[int64](), cuda.Int64}, {cuda.DTypeOf[uint64](), cuda.Uint64},
		{cuda.DTypeOf[cuda.Float16](), cuda.Float16Type}, {cuda.DTypeOf[float32](), cuda.Float32},
		{cuda.DTypeOf[float64](), cuda.Float64}, {cuda.DTypeOf[cuda.BFloat16](), cuda.BFloat16Type},
		{cuda.DTypeOf[cuda.Float8E4M3](), cuda.Float8E4M3Type}, {cuda.DTypeOf[cuda.Float8E5M2](), cuda.Float8E5M2Type},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("DTypeOf gave %s, want %s", c.got, c.want)
		}
	}
}

func isNaN32(f float32) bool { return f != f }

func TestFloat16(t *testing.T) {
	// Every half decodes exactly and re-encodes to itself; NaNs stay NaN.
	for b := 0; b < 1<<16; b++ {
		h := cuda.Float16(b)
		f := h.Float32()
		back := cuda.Float16From(f)
		if isNaN32(f) {
			if !isNaN32(back.Float32()) {
				t.Fatalf("NaN %#04x re-encoded to %#04x", b, uint16(back))
			}
			continue
		}
		if back != h {
			t.Fatalf("%#04x -> %v -> %#04x", b, f, uint16(back))
		}
	}
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {0.5, 0x3800},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1 + 1.0/2048, 0x3c00},             // halfway to the next: ties to even (down)
		{1 + 3.0/2048, 0x3c02},             // halfway: ties to even (up)
		{1 + 1.0/2048 + 1.0/65536, 0x3c01}, // above halfway
		{65520, 0x7c00},                    // rounds to infinity
		{1e6, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{5.960464477539063e-08, 0x0001},  // smallest subnormal
		{2.9802322387695312e-08, 0x0000}, // half of it: ties to even (zero)
	}
	for _, c := range cases {
		if got := cuda.Float16From(c.in); uint16(got) != c.want {
			t.Errorf("Float16From(%v) = %#04x, want %#04x", c.in, uint16(got), c.want)
		}
	}
	if !isNaN32(cuda.Float16From(float32(math.NaN())).Float32()) {
		t.Error("Float16From(NaN) is not NaN")
	}
}

func TestBFloat16(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := cuda.BFloat16(b)
		f := h.Float32()
		back := cuda.BFloat16From(f)
		if isNaN32(f) {
			if !isNaN32(back.Float32()) {
				t.Fatalf("NaN %#04x re-encoded to %#04x", b, uint16(back))
			}
			continue
		}
		if back != h {
			t.Fatalf("%#04x -> %v -> %#04x", b, f, uint16(back))
		}
	}
	bits := func(u uint32) float32 { return math.Float32frombits(u) }
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80}, {-1, 0xbf80}, {float32(math.Copysign(0, -1)), 0x8000},
		{bits(0x3f808000), 0x3f80}, // halfway: ties to even (down)
		{bits(0x3f818000), 0x3f82}, // halfway: ties to even (up)
		{bits(0x3f808001), 0x3f81}, // above halfway
		{bits(0x7f7f8000), 0x7f80}, // rounds to infinity
		{float32(math.Inf(1)), 0x7f80},
	}
	for _, c := range cases {
		if got := cuda.BFloat16From(c.in); uint16(got) != c.want {
			t.Errorf("BFloat16From(%v) = %#04x, want %#04x", c.in, uint16(got), c.want)
		}
	}
	// A NaN whose payload lies in the dropped half stays NaN.
	if got := cuda.BFloat16From(bits(0x7f800001)); !isNaN32(got.Float32()) {
		t.Errorf("BFloat16From(signalling NaN) = %#04x, not NaN", uint16(got))
	}
}

func TestFloat8E4M3(t *testing.T) {
	for c := 0; c < 256; c++ {
		x := cuda.Float8E4M3(c)
		f := x.Float32()
		nan := c&0x7f == 0x7f
		if nan != isNaN32(f) {
			t.Fatalf("%#02x decodes to %v", c, f)
		}
		if nan {
			continue
		}
		if math.IsInf(float64(f), 0) {
			t.Fatalf("%#02x decodes to %v: E4M3 has no infinities", c, f)
		}
		if back := cuda.Float8E4M3From(f); back != x {
			t.Fatalf("%#02x -> %v -> %#02x", c, f, uint8(back))
		}
	}
	cases := []struct {
		in   float32
		want uint8
	}{
		{0, 0x00}, {float32(math.Copysign(0, -1)), 0x80}, {1, 0x38}, {-1, 0xb8}, {448, 0x7e}, {-448, 0xfe},
		{0.001953125, 0x01},                                                                   // smallest subnormal, 2^-9
		{0.0009765625, 0x00},                                                                  // half of it: ties to even (zero)
		{1.0625, 0x38},                                                                        // halfway between 1 (0x38) and 1.125 (0x39): even
		{1.1875, 0x3a},                                                                        // halfway between 1.125 (0x39) and 1.25 (0x3a): even
		{1.07, 0x39},                                                                          // above halfway
		{464, 0x7e}, {1e9, 0x7e}, {float32(math.Inf(1)), 0x7e}, {float32(math.Inf(-1)), 0xfe}, // saturation
	}
	for _, c := range cases {
		if got := cuda.Float8E4M3From(c.in); uint8(got) != c.want {
			t.Errorf("Float8E4M3From(%v) = %#02x, want %#02x", c.in, uint8(got), c.want)
		}
	}
	if got := cuda.Float8E4M3From(float32(math.NaN())); !isNaN32(got.Float32()) {
		t.Errorf("Float8E4M3From(NaN) = %#02x", uint8(got))
	}
	if got := cuda.Float8E4M3(0x7e).Float32(); got != 448 {
		t.Errorf("max E4M3 = %v, want 448", got)
	}
}

func TestFloat8E5M2(t *testing.T) {
	for c := 0; c < 256; c++ {
		x := cuda.Float8E5M2(c)
		f := x.Float32()
		nan := c&0x7c == 0x7c && c&3 != 0
		if nan != isNaN32(f) {
			t.Fatalf("%#02x decodes to %v", c, f)
		}
		if nan {
			continue
		}
		if back := cuda.Float8E5M2From(f); back != x {
			t.Fatalf("%#02x -> %v -> %#02x", c, f, uint8(back))
		}
	}
	cases := []struct {
		in   float32
		want uint8
	}{
		{0, 0x00}, {float32(math.Copysign(0, -1)), 0x80}, {1, 0x3c}, {-2, 0xc0}, {57344, 0x7b},
		{float32(math.Inf(1)), 0x7c}, {float32(math.Inf(-1)), 0xfc},
		{1.125, 0x3c},                            // halfway between 1 (0x3c) and 1.25 (0x3d): even
		{1.375, 0x3e},                            // halfway between 1.25 (0x3d) and 1.5 (0x3e): even
		{1.13, 0x3d},                             // above halfway
		{61440, 0x7b}, {1e9, 0x7b}, {-1e9, 0xfb}, // finite values saturate
		{1.52587890625e-05, 0x01}, // smallest subnormal, 2^-16
	}
	for _, c := range cases {
		if got := cuda.Float8E5M2From(c.in); uint8(got) != c.want {
			t.Errorf("Float8E5M2From(%v) = %#02x, want %#02x", c.in, uint8(got), c.want)
		}
	}
	if got := cuda.Float8E5M2From(float32(math.NaN())); !isNaN32(got.Float32()) {
		t.Errorf("Float8E5M2From(NaN) = %#02x", uint8(got))
	}
	if !math.IsInf(float64(cuda.Float8E5M2(0x7c).Float32()), 1) {
		t.Error("0x7c is not +Inf")
	}
}

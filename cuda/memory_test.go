package cuda_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

func TestMemoryRoundTrips(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		src := []float32{1, 2, 3, 4, 5, 6, 7, 8}
		a, err := cuda.AllocFrom(1, src)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Free()
		if a.Len() != 8 || a.Bytes() != 32 || a.DType() != cuda.Float32 || a.Device() != 1 || a.Ptr() == 0 || a.Err() != nil {
			t.Fatalf("AllocFrom: len %d bytes %d dtype %s device %s ptr %#x err %v",
				a.Len(), a.Bytes(), a.DType(), a.Device(), a.Ptr(), a.Err())
		}
		if d, err := cuda.PointerDevice(a.Ptr()); err != nil || d != 1 {
			t.Errorf("PointerDevice = %s, %v; want cuda:1", d, err)
		}
		got, err := a.ToHost()
		if err != nil || !slices.Equal(got, src) {
			t.Fatalf("ToHost = %v, %v", got, err)
		}

		b, err := cuda.Alloc[float32](1, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		if err := b.CopyFrom(a); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.ToHost(); !slices.Equal(got, src) {
			t.Errorf("CopyFrom gave %v", got)
		}

		// Sub shares the memory.
		mid, err := b.Sub(2, 5)
		if err != nil || mid.Len() != 3 || mid.Ptr() != b.Ptr()+8 {
			t.Fatalf("Sub(2, 5) = len %d ptr %#x, %v", mid.Len(), mid.Ptr(), err)
		}
		if err := mid.CopyFromHost([]float32{-1, -2, -3}); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.ToHost(); !slices.Equal(got, []float32{1, 2, -1, -2, -3, 6, 7, 8}) {
			t.Errorf("after writing Sub(2, 5): %v", got)
		}
		if inner, err := mid.Sub(1, 2); err != nil || inner.Ptr() != b.Ptr()+12 {
			t.Errorf("Sub of a Sub: %#x, %v", inner.Ptr(), err)
		}
		for _, r := range [][2]int{{-1, 2}, {3, 2}, {0, 9}} {
			if _, err := b.Sub(r[0], r[1]); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("Sub(%d, %d): %v", r[0], r[1], err)
			}
		}

		// Memset sets bytes.
		bytes, err := cuda.Alloc[uint8](0, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer bytes.Free()
		if err := bytes.Memset(0xab); err != nil {
			t.Fatal(err)
		}
		if got, _ := bytes.ToHost(); !slices.Equal(got, []uint8{0xab, 0xab, 0xab, 0xab, 0xab}) {
			t.Errorf("Memset: %v", got)
		}

		// Copies across devices.
		c, err := cuda.Alloc[float32](0, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Free()
		if err := c.CopyFrom(a); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.ToHost(); !slices.Equal(got, src) {
			t.Errorf("cross-device CopyFrom: %v", got)
		}

		// Every element type.
		roundTrip(t, []int8{-1, 2}, 0)
		roundTrip(t, []uint64{1 << 60, 3}, 0)
		roundTrip(t, []cuda.BFloat16{cuda.BFloat16From(1.5)}, 1)
		roundTrip(t, []cuda.Float8E5M2{cuda.Float8E5M2From(-3)}, 1)
	})
}

func roundTrip[T cuda.Elem](t *testing.T, src []T, dev cuda.Device) {
	t.Helper()
	s, err := cuda.AllocFrom(dev, src)
	if err != nil {
		t.Fatalf("AllocFrom %s: %v", cuda.DTypeOf[T](), err)
	}
	defer s.Free()
	if s.Bytes() != uint64(len(src)*cuda.DTypeOf[T]().Size()) {
		t.Errorf("%s: %d bytes", cuda.DTypeOf[T](), s.Bytes())
	}
	got, err := s.ToHost()
	if err != nil || !slices.Equal(got, src) {
		t.Errorf("%s: %v, %v; want %v", cuda.DTypeOf[T](), got, err, src)
	}
}

func TestMemoryAsync(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		st, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Destroy()
		other, err := cuda.Device(1).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		a, err := cuda.Alloc[int32](0, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Free()
		b, err := cuda.Alloc[int32](0, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		for _, s := range []cuda.Stream{st, cuda.Device(0).DefaultStream(), {}} {
			if err := a.CopyFromHostAsync([]int32{1, 2, 3, 4}, s); err != nil {
				t.Fatal(err)
			}
			if err := b.MemsetAsync(0, s); err != nil {
				t.Fatal(err)
			}
			if err := b.CopyFromAsync(a, s); err != nil {
				t.Fatal(err)
			}
			got := make([]int32, 4)
			if err := b.CopyToHostAsync(got, s); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []int32{1, 2, 3, 4}) {
				t.Errorf("async round trip on %#x: %v", s.Handle(), got)
			}
		}
		// A stream of another device is rejected before the driver is called.
		errs := map[string]error{
			"CopyFromHostAsync": a.CopyFromHostAsync([]int32{1, 2, 3, 4}, other),
			"CopyToHostAsync":   a.CopyToHostAsync(make([]int32, 4), other),
			"CopyFromAsync":     b.CopyFromAsync(a, other),
			"MemsetAsync":       a.MemsetAsync(1, other),
		}
		for op, err := range errs {
			if !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s on a stream of cuda:1: %v, want ErrInvalidValue", op, err)
			}
		}
		// A destroyed stream is rejected.
		dead, _ := cuda.Device(0).NewStream()
		if err := dead.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := a.MemsetAsync(1, dead); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("MemsetAsync on a destroyed stream: %v", err)
		}
	})
}

func TestMemoryErrors(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for _, n := range []int{0, -1} {
			if _, err := cuda.Alloc[float32](0, n); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("Alloc(%d): %v, want ErrInvalidValue", n, err)
			}
		}
		if _, err := cuda.Alloc[float64](0, 1<<61); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Alloc of an overflowing size: %v", err)
		}
		if _, err := cuda.Alloc[uint8](0, 81<<30); !errors.Is(err, cuda.ErrOutOfMemory) {
			t.Errorf("Alloc beyond the device's 80 GiB: %v, want ErrOutOfMemory", err)
		}
		if _, err := cuda.AllocFrom[float32](0, nil); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("AllocFrom(nil): %v", err)
		}

		a, err := cuda.Alloc[float32](0, 4)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cuda.Alloc[float32](0, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		lengthErrs := map[string]error{
			"CopyFromHost": a.CopyFromHost(make([]float32, 3)),
			"CopyToHost":   a.CopyToHost(make([]float32, 5)),
			"CopyFrom":     a.CopyFrom(b),
		}
		for op, err := range lengthErrs {
			if !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s with mismatched lengths: %v", op, err)
			}
		}

		// Free of a part or of adopted memory frees nothing.
		sub, _ := a.Sub(0, 2)
		if err := sub.Free(); err == nil || sub.Freed() || a.Freed() {
			t.Errorf("Free of a Sub: %v (freed %v)", err, a.Freed())
		}
		w := cuda.Wrap[float32](a.Ptr(), 4, 0)
		if err := w.Free(); err == nil || w.Freed() {
			t.Errorf("Free of a Wrap: %v", err)
		}
		if got, err := w.ToHost(); err != nil || len(got) != 4 {
			t.Errorf("the wrapped memory is still usable: %v, %v", got, err)
		}
		if err := a.Free(); err != nil {
			t.Fatalf("Free: %v", err)
		}
		if !a.Freed() || !sub.Freed() || !errors.Is(a.Err(), cuda.ErrClosed) {
			t.Errorf("after Free: Freed %v, Sub Freed %v, Err %v", a.Freed(), sub.Freed(), a.Err())
		}
		if err := a.Free(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("a second Free: %v, want ErrClosed", err)
		}
		// Every use of freed memory fails with ErrClosed, without calling the driver.
		freedErrs := map[string]error{
			"CopyFromHost": a.CopyFromHost(make([]float32, 4)),
			"CopyToHost":   a.CopyToHost(make([]float32, 4)),
			"Memset":       sub.Memset(0),
			"CopyFrom":     b.CopyFrom(sub),
		}
		for op, err := range freedErrs {
			if !errors.Is(err, cuda.ErrClosed) {
				t.Errorf("%s on freed memory: %v, want ErrClosed", op, err)
			}
		}
		if _, err := cuda.PointerDevice(a.Ptr()); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("PointerDevice of freed memory: %v", err)
		}
		if _, err := cuda.PointerDevice(0x10); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("PointerDevice of a host address: %v", err)
		}

		// The zero Slice is no memory.
		var zero cuda.Slice[int32]
		if zero.Ptr() != 0 || zero.Len() != 0 || zero.Freed() || !errors.Is(zero.Err(), cuda.ErrInvalidValue) {
			t.Errorf("zero Slice: ptr %#x len %d err %v", zero.Ptr(), zero.Len(), zero.Err())
		}
		if err := zero.Free(); err != nil {
			t.Errorf("Free of the zero Slice: %v", err)
		}
		if err := zero.Memset(0); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Memset of the zero Slice: %v", err)
		}
		// A wrapped address the driver does not know is rejected by it.
		bogus := cuda.Wrap[int32](0x1000, 4, 0)
		if err := bogus.Memset(0); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Memset of a bogus address: %v", err)
		}
		// A negative length given to Wrap makes a Slice every use rejects.
		neg := cuda.Wrap[int32](0x1000, -1, 0)
		if got, err := neg.ToHost(); got != nil || !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("ToHost of a negative length: %v, %v", got, err)
		}
		if err := neg.Memset(0); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Memset of a negative length: %v", err)
		}
	})
}

// TestSliceAllocation: Slice.Allocation is the whole block a slice was cut
// from, the same for the slice, its copies and its parts: its base, size
// and device; the zero Slice has none.
func TestSliceAllocation(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := cuda.Alloc[float32](1, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		a := s.Allocation()
		if a == nil || a.Base() != s.Ptr() || a.Size() != 64 || a.Device() != 1 {
			t.Fatalf("Allocation = %+v", a)
		}
		part, err := s.Sub(4, 8)
		if err != nil {
			t.Fatal(err)
		}
		if part.Allocation() != a {
			t.Errorf("Sub(4, 8).Allocation = %p, the slice's is %p", part.Allocation(), a)
		}
		w := cuda.Wrap[uint8](s.Ptr()+4, 8, 1)
		if wa := w.Allocation(); wa.Base() != s.Ptr()+4 || wa.Size() != 8 || wa.Device() != 1 {
			t.Errorf("a Wrap's Allocation: base %#x size %d device %s", wa.Base(), wa.Size(), wa.Device())
		}
		if (cuda.Slice[float32]{}).Allocation() != nil {
			t.Error("the zero Slice has an Allocation")
		}
	})
}

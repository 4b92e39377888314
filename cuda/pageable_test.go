package cuda_test

import (
	"slices"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// readOnStream reads s with work on st, a non-blocking stream: it sees the
// device memory as it is, without waiting for the legacy default stream.
func readOnStream(t *testing.T, s cuda.Slice[int32], st cuda.Stream) []int32 {
	t.Helper()
	got := make([]int32, s.Len())
	if err := s.CopyToHostAsync(got, st); err != nil {
		t.Fatal(err)
	}
	return got
}

// onDevice is cuda.AllocFrom(0, vals), freed when the test ends.
func onDevice(t *testing.T, vals []int32) cuda.Slice[int32] {
	t.Helper()
	a, err := cuda.AllocFrom(0, vals)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Free() })
	return a
}

// TestSynchronousCopiesLandBeforeReturning: the driver's synchronous
// cuMemcpyHtoD from pageable memory, cuMemcpyDtoD and cuMemsetD8 may return
// before the data is on the device (the legacy default stream still carries
// it), and nccl4go's streams do not wait for the legacy stream. On an H200
// (NCCL 2.30.7, eight other GPU test processes beside it) an in-place Reduce
// on a stream read zeros for inputs just uploaded with AllocFrom. The fake
// models the rule under FAKE_CUDA_PAGEABLE_H2D; CopyFromHost, AllocFrom,
// CopyFrom and Memset must return with the data on the device.
func TestSynchronousCopiesLandBeforeReturning(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_PAGEABLE_H2D=1"}}, func(t *testing.T) {
		st, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Destroy()
		src := []int32{1, 2, 3, 4, 5, 6, 7, 8}
		zeros := make([]int32, len(src))

		t.Run("the fake models the rule", func(t *testing.T) {
			a, err := cuda.Alloc[int32](0, len(src))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Free()
			if err := cuda.CopyFromHostUnsynced(a, zeros); err != nil {
				t.Fatal(err)
			}
			if err := cuda.Device(0).DefaultStream().Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := cuda.CopyFromHostUnsynced(a, src); err != nil {
				t.Fatal(err)
			}
			if got := readOnStream(t, a, st); !slices.Equal(got, zeros) {
				t.Fatalf("a bare cuMemcpyHtoD landed before the legacy stream was synchronized: %v", got)
			}
			if err := cuda.Device(0).DefaultStream().Synchronize(); err != nil {
				t.Fatal(err)
			}
			if got := readOnStream(t, a, st); !slices.Equal(got, src) {
				t.Fatalf("after synchronizing the legacy stream: %v, want %v", got, src)
			}
		})

		t.Run("AllocFrom", func(t *testing.T) {
			a := onDevice(t, src)
			if got := readOnStream(t, a, st); !slices.Equal(got, src) {
				t.Errorf("work on a stream after AllocFrom read %v, want %v", got, src)
			}
		})

		t.Run("CopyFromHost", func(t *testing.T) {
			a := onDevice(t, zeros)
			if err := a.CopyFromHost(src); err != nil {
				t.Fatal(err)
			}
			if got := readOnStream(t, a, st); !slices.Equal(got, src) {
				t.Errorf("work on a stream after CopyFromHost read %v, want %v", got, src)
			}
		})

		t.Run("CopyFrom", func(t *testing.T) {
			a := onDevice(t, src)
			b := onDevice(t, zeros)
			if err := b.CopyFrom(a); err != nil {
				t.Fatal(err)
			}
			if got := readOnStream(t, b, st); !slices.Equal(got, src) {
				t.Errorf("work on a stream after CopyFrom read %v, want %v", got, src)
			}
		})

		t.Run("no allocation", func(t *testing.T) {
			a := onDevice(t, src)
			b := onDevice(t, zeros)
			for name, f := range map[string]func() error{
				"CopyFromHost": func() error { return a.CopyFromHost(src) },
				"CopyFrom":     func() error { return b.CopyFrom(a) },
				"Memset":       func() error { return b.Memset(0) },
			} {
				var err error
				if n := testing.AllocsPerRun(100, func() { err = f() }); n != 0 || err != nil {
					t.Errorf("%s: %v allocations per call, error %v; want 0, nil", name, n, err)
				}
			}
		})

		t.Run("Memset", func(t *testing.T) {
			a := onDevice(t, src)
			if err := a.Memset(0); err != nil {
				t.Fatal(err)
			}
			if got := readOnStream(t, a, st); !slices.Equal(got, zeros) {
				t.Errorf("work on a stream after Memset(0) read %v, want zeros", got)
			}
		})
	})
}

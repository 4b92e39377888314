package cuda_test

import (
	"runtime"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The README's "a launch makes one cgo call" (no allocation:
// TestLaunchAllocations): the argument checks, the marshalling and the
// current-context query add no crossing, with or without a LaunchConfig
// beyond grid and block.
func TestLaunchOneCgoCall(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		m, err := dev.LoadModule([]byte("FAKECUBIN\nkernel k 8,4,12,8,2\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Unload()
		f, err := m.Function("k")
		if err != nil {
			t.Fatal(err)
		}
		x, err := cuda.Alloc[float32](dev, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Free()
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		a, tr, h := float32(1), triple{1, 2, 3}, cuda.BFloat16From(2)
		for _, cfg := range []cuda.LaunchConfig{
			{Grid: cuda.Dim(1), Block: cuda.Dim(32)},
			{Grid: cuda.Dim(2), Block: cuda.Dim(32), Cooperative: true},
		} {
			launch := func() {
				if err := f.Launch(s, cfg, x, a, tr, 2.5, h); err != nil {
					t.Fatal(err)
				}
			}
			launch() // the first launch fills the caches
			before := runtime.NumCgoCall()
			for range 100 {
				launch()
			}
			if d := runtime.NumCgoCall() - before; d != 100 {
				t.Errorf("%+v: %d cgo calls for 100 launches, want 100", cfg, d)
			}
		}
	})
}

package cuda_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// TestZeroModuleAndFunction: the zero values of Module and Function (new,
// or a struct field never set) and nil pointers are refused with a typed
// error, never a panic or a driver call on handle 0.
func TestZeroModuleAndFunction(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		one := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)}
		for name, f := range map[string]*cuda.Function{"nil": nil, "zero": new(cuda.Function)} {
			if err := f.Launch(cuda.Stream{}, one); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s Function: Launch = %v, want ErrInvalidValue", name, err)
			}
			if _, err := f.Attribute(cuda.FuncNumRegs); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s Function: Attribute = %v, want ErrInvalidValue", name, err)
			}
			if err := f.SetMaxDynamicSharedMemory(1); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s Function: SetMaxDynamicSharedMemory = %v, want ErrInvalidValue", name, err)
			}
			if _, err := f.MaxActiveBlocksPerMultiprocessor(32, 0); !errors.Is(err, cuda.ErrInvalidValue) {
				t.Errorf("%s Function: MaxActiveBlocksPerMultiprocessor = %v, want ErrInvalidValue", name, err)
			}
			if sizes, known := f.ParamSizes(); known || len(sizes) != 0 {
				t.Errorf("%s Function: ParamSizes = %v, %v", name, sizes, known)
			}
		}
		m := new(cuda.Module)
		if _, err := m.Function("saxpy"); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("zero Module: Function = %v, want ErrInvalidValue", err)
		}
		if err := m.Unload(); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("zero Module: Unload = %v, want ErrInvalidValue", err)
		}
	})
}

// TestConcurrentUnload: of concurrent Unloads exactly one succeeds, the
// others return ErrClosed, and launches racing them return nil or
// ErrClosed.
func TestConcurrentUnload(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for range 20 {
			m, err := cuda.Device(0).LoadModule(saxpyPTX)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok := 0
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := m.Unload()
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case !errors.Is(err, cuda.ErrClosed):
						t.Errorf("Unload: %v", err)
					}
				}()
			}
			wg.Wait()
			if ok != 1 {
				t.Fatalf("%d of 4 concurrent Unloads succeeded, want 1", ok)
			}
		}
	})
}

// TestDimDoesNotWrap: a size past what a Dim3 holds is not wrapped to a
// small one (1<<32+5 is not 5 blocks): the launch is refused.
func TestDimDoesNotWrap(t *testing.T) {
	for _, x := range []int{1 << 32, 1<<32 + 5, math.MaxInt} {
		if d := cuda.Dim(x); d.X != math.MaxUint32 {
			t.Errorf("Dim(%d).X = %d, want %d (saturated)", x, d.X, uint32(math.MaxUint32))
		}
	}
	if d := cuda.Dim(-3); d.X != 0 {
		t.Errorf("Dim(-3).X = %d, want 0", d.X)
	}
}

// TestLaunchNamedIntSaysWhy: a named type over Go's int is refused for
// its size, not said to hold Go pointers.
func TestLaunchNamedIntSaysWhy(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		type count int
		type withInt struct{ N int }
		dev := cuda.Device(0)
		_, f := loadSaxpy(t, dev)
		x, _ := cuda.Alloc[float32](dev, 4)
		defer x.Free()
		one := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(4)}
		for _, a := range []any{count(4), withInt{4}, [2]uint{}} {
			err := f.Launch(cuda.Stream{}, one, float32(1), x, x, a)
			if !errors.Is(err, cuda.ErrInvalidValue) || strings.Contains(fmtErr(err), "Go pointers") || !strings.Contains(fmtErr(err), "int32 or int64") {
				t.Errorf("%T: Launch = %v; want ErrInvalidValue saying to convert to int32 or int64", a, err)
			}
		}
	})
}

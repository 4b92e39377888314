package devapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/devapi"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/nvrtc"
)

// TestNilKernels: a nil *Kernels (what a failed Load returns) and the zero
// Kernels refuse every call with an error, never a panic; Close is
// nil-safe.
func TestNilKernels(t *testing.T) {
	for name, k := range map[string]*devapi.Kernels{"nil": nil, "zero": new(devapi.Kernels)} {
		if err := k.Close(); err != nil {
			t.Errorf("%s Kernels: Close = %v, want nil", name, err)
		}
		if err := k.AllReduceSum(cuda.Stream{}, nil, 0, nil, 0, 4, nil, 1, 32); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("%s Kernels: AllReduceSum = %v, want ErrInvalidValue", name, err)
		}
		if err := k.AllGather(cuda.Stream{}, nil, 0, nil, 0, 4, nil, 1, 32); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("%s Kernels: AllGather = %v, want ErrInvalidValue", name, err)
		}
		if _, err := k.Probe(cuda.Stream{}, nil, 0, nil); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("%s Kernels: Probe = %v, want ErrInvalidValue", name, err)
		}
	}
}

// TestNilWindowArgument: a nil *nccl.Window or *nccl.DevComm given to a
// ready kernel is reported as what it is (closed / not there), not as
// memory "on cuda:-1".
func TestNilWindowArgument(t *testing.T) {
	faketest.Run(t, readyKernelsEnv(t), func(t *testing.T) {
		k, err := devapi.Load(devapi.Options{Compiler: devapi.NVRTC})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		defer k.Close()
		c := fakeComm(t)
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(4)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		w := window(t, c)
		err = k.AllReduceSum(cuda.Stream{}, nil, 0, w, 0, 16, d, 1, 32)
		if !errors.Is(err, nccl.ErrClosed) || strings.Contains(err.Error(), "cuda:-1") {
			t.Errorf("a nil send Window: %v; want ErrClosed, not a device mismatch", err)
		}
		err = k.AllReduceSum(cuda.Stream{}, w, 0, w, 0, 16, nil, 1, 32)
		if !errors.Is(err, nccl.ErrClosed) || strings.Contains(err.Error(), "cuda:-1") {
			t.Errorf("a nil DevComm: %v; want ErrClosed, not a device mismatch", err)
		}
		if err := k.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := k.Close(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("second Close = %v, want ErrClosed", err)
		}
	})
}

// TestUnknownCompiler: a Compiler outside Auto, NVRTC and NVCC names
// itself without a panic, and Compile refuses it (it was compiled as Auto).
func TestUnknownCompiler(t *testing.T) {
	if s := devapi.Compiler(7).String(); s != "Compiler(7)" {
		t.Errorf("Compiler(7).String() = %q", s)
	}
	if s := devapi.Compiler(-1).String(); s != "Compiler(-1)" {
		t.Errorf("Compiler(-1).String() = %q", s)
	}
	var oe *nvrtc.OptionError
	if _, err := devapi.Compile("", devapi.Options{Compiler: 7}); !errors.As(err, &oe) || !strings.Contains(err.Error(), "Compiler(7)") {
		t.Errorf("Compile with Compiler(7) = %v, want an *nvrtc.OptionError naming it", err)
	}
}

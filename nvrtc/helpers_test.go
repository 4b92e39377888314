package nvrtc_test

import (
	"os"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/nvrtc"
)

// requireGPUNVRTC skips the test, saying why, unless a CUDA device and the
// machine's NVRTC are there (and never in a fake-library child process).
func requireGPUNVRTC(t *testing.T) {
	t.Helper()
	if os.Getenv("NCCL4GO_FAKE_CHILD") != "" {
		t.Skip("GPU test: skipped in a fake-library child process")
	}
	if n, err := cuda.Count(); err != nil || n == 0 {
		t.Skipf("GPU test: no CUDA device (%d, %v)", n, err)
	}
	if _, err := nvrtc.LibraryPath(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
}

// runSaxpy loads code on dev and runs its saxpy, y = a*x + y, on the
// legacy default stream in blocks of block threads, with x and y copied
// from xs and ys; it returns y.
func runSaxpy(t *testing.T, dev cuda.Device, code []byte, a float32, xs, ys []float32, block int) []float32 {
	t.Helper()
	m, err := dev.LoadModule(code)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := cuda.AllocFrom(dev, xs)
	y, _ := cuda.AllocFrom(dev, ys)
	defer x.Free()
	defer y.Free()
	n := len(xs)
	cfg := cuda.LaunchConfig{Grid: cuda.Dim((n + block - 1) / block), Block: cuda.Dim(block)}
	if err := f.Launch(cuda.Stream{}, cfg, a, x, y, int32(n)); err != nil {
		t.Fatal(err)
	}
	got, err := y.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

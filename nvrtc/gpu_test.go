package nvrtc_test

import (
	"os"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/nvrtc"
)

// TestGPUCompileSaxpy compiles saxpy from a Go string with the machine's
// NVRTC for GPU 0's architecture, through the on-disk cache, and runs it:
// the result is exact.
func TestGPUCompileSaxpy(t *testing.T) {
	if os.Getenv("NCCL4GO_FAKE_CHILD") != "" {
		t.Skip("GPU test: skipped in a fake-library child process")
	}
	if n, err := cuda.Count(); err != nil || n == 0 {
		t.Skipf("GPU test: no CUDA device (%d, %v)", n, err)
	}
	if _, err := nvrtc.LibraryPath(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	major, minor, _ := nvrtc.Version()
	path, _ := nvrtc.LibraryPath()
	cache := &nvrtc.Cache{Dir: t.TempDir()}
	src := saxpySrc
	r, cached, err := cache.Compile(src, nvrtc.Options{Device: 0})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if _, again, _ := cache.Compile(src, nvrtc.Options{Device: 0}); cached || !again {
		t.Errorf("cache: first %v, second %v; want a miss then a hit", cached, again)
	}
	t.Logf("NVRTC %d.%d (%s): %d bytes of CUBIN for %s", major, minor, path, len(r.Code), r.Arch)
	m, err := cuda.Device(0).LoadModule(r.Code)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i), 1
	}
	x, _ := cuda.AllocFrom(0, xs)
	y, _ := cuda.AllocFrom(0, ys)
	defer x.Free()
	defer y.Free()
	if err := f.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(n / 128), Block: cuda.Dim(128)}, float32(2), x, y, int32(n)); err != nil {
		t.Fatal(err)
	}
	got, err := y.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != 2*xs[i]+1 {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], 2*xs[i]+1)
		}
	}
	// A compile error on the real compiler carries its log.
	if _, err := nvrtc.Compile("extern \"C\" __global__ void k() { undeclared(); }", nvrtc.Options{Device: 0}); err == nil {
		t.Error("compiling a call of an undeclared function succeeded")
	} else {
		t.Logf("the log of a failing compile: %v", err)
	}
}

// TestGPULTOLink compiles saxpy to LTO-IR with NVRTC, links it to a CUBIN
// with the machine's nvJitLink and runs it: the result is exact.
func TestGPULTOLink(t *testing.T) {
	if os.Getenv("NCCL4GO_FAKE_CHILD") != "" {
		t.Skip("GPU test: skipped in a fake-library child process")
	}
	if n, err := cuda.Count(); err != nil || n == 0 {
		t.Skipf("GPU test: no CUDA device (%d, %v)", n, err)
	}
	if _, err := nvrtc.LibraryPath(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	path, err := nvrtc.LinkLibraryPath()
	if err != nil {
		t.Skipf("no nvJitLink (LTO unavailable here): %v", err)
	}
	ir, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Device: 0, Output: nvrtc.LTOIR})
	if err != nil {
		t.Fatalf("Compile to LTO-IR: %v", err)
	}
	cubin, err := nvrtc.Link(ir.Arch, []nvrtc.LinkInput{{Type: nvrtc.InputLTOIR, Data: ir.Code}})
	if err != nil {
		t.Fatalf("Link with %s: %v", path, err)
	}
	t.Logf("nvJitLink %s: %d bytes of LTO-IR -> %d bytes of CUBIN", path, len(ir.Code), len(cubin))
	m, err := cuda.Device(0).LoadModule(cubin)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := cuda.AllocFrom(0, []float32{1, 2, 3})
	y, _ := cuda.AllocFrom(0, []float32{1, 1, 1})
	defer x.Free()
	defer y.Free()
	if err := f.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(32)}, float32(2), x, y, int32(3)); err != nil {
		t.Fatal(err)
	}
	if got, _ := y.ToHost(); got[0] != 3 || got[1] != 5 || got[2] != 7 {
		t.Errorf("LTO-linked saxpy: %v, want [3 5 7]", got)
	}
}

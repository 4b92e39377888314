package nvrtc_test

import (
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/nvrtc"
)

// TestGPUCompileSaxpy compiles saxpy from a Go string with the machine's
// NVRTC for GPU 0's architecture, through the on-disk cache, and runs it:
// the result is exact.
func TestGPUCompileSaxpy(t *testing.T) {
	requireGPUNVRTC(t)
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
	const n = 4096
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i), 1
	}
	got := runSaxpy(t, cuda.Device(0), r.Code, 2, xs, ys, 128)
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
	requireGPUNVRTC(t)
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
	if got := runSaxpy(t, cuda.Device(0), cubin, 2, []float32{1, 2, 3}, []float32{1, 1, 1}, 32); got[0] != 3 || got[1] != 5 || got[2] != 7 {
		t.Errorf("LTO-linked saxpy: %v, want [3 5 7]", got)
	}
}

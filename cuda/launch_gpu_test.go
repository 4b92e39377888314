package cuda_test

import (
	"os"
	"testing"

	"github.com/nccl4go/nccl/cuda"
)

// saxpyOn loads image on device 0 and checks that its kernel saxpy
// computes y = a*x + y exactly (small integers: no rounding), launched
// directly and from a CUDA graph replayed 100 times.
func saxpyOn(t *testing.T, image []byte) {
	t.Helper()
	dev := cuda.Device(0)
	_, f := loadKernel(t, dev, image, "saxpy")
	sizes, known := f.ParamSizes()
	t.Logf("saxpy parameters: %v (reported by the driver: %v)", sizes, known)
	const n = 100000
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i%1000), float32(i%7)
	}
	x, _ := cuda.AllocFrom(dev, xs)
	y, _ := cuda.AllocFrom(dev, ys)
	defer x.Free()
	defer y.Free()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	cfg := cuda.LaunchConfig{Grid: cuda.Dim((n + 255) / 256), Block: cuda.Dim(256)}
	if err := f.Launch(s, cfg, float32(3), x, y, int32(n)); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, _ := y.ToHost()
	for i := range got {
		if want := 3*xs[i] + ys[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
	// y += 1*x, captured once and replayed 100 times.
	g, err := s.Capture(cuda.CaptureThreadLocal, func() error { return f.Launch(s, cfg, float32(1), x, y, int32(n)) })
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	defer g.Destroy()
	exec, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	for range 100 {
		if err := exec.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, _ = y.ToHost()
	for i := range got {
		if want := 3*xs[i] + ys[i] + 100*xs[i]; got[i] != want {
			t.Fatalf("after 100 graph replays y[%d] = %v, want %v", i, got[i], want)
		}
	}
	// Occupancy and a cooperative launch of the largest grid it allows.
	per, err := f.MaxActiveBlocksPerMultiprocessor(256, 0)
	if err != nil || per <= 0 {
		t.Fatalf("MaxActiveBlocksPerMultiprocessor = %d, %v", per, err)
	}
	sms, _ := dev.Attribute(cuda.AttrMultiprocessorCount)
	coop := cuda.LaunchConfig{Grid: cuda.Dim(per * sms), Block: cuda.Dim(256), Cooperative: true}
	if err := f.Launch(s, coop, float32(0), x, y, int32(n)); err != nil {
		t.Errorf("cooperative launch of %d blocks: %v", per*sms, err)
	}
	cl := cuda.LaunchConfig{Grid: cuda.Dim(8), Block: cuda.Dim(256), Cluster: cuda.Dim(2)}
	if err := f.Launch(s, cl, float32(0), x, y, int32(n)); err != nil {
		t.Errorf("cluster launch: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	t.Logf("saxpy exact; 100 graph replays exact; %d blocks/SM x %d SMs cooperative; clusters of 2", per, sms)
}

// TestGPULaunchEmbeddedPTX: the hand-written PTX embedded in the test
// (testdata/saxpy.ptx), JIT-compiled by the driver.
func TestGPULaunchEmbeddedPTX(t *testing.T) {
	requireGPU(t)
	saxpyOn(t, saxpyPTX)
}

// TestGPULaunchCUBIN: a CUBIN and a fatbin built offline by nvcc (the GPU
// script builds them from testdata/saxpy.cu and names them in
// NCCL4GO_TEST_CUBIN and NCCL4GO_TEST_FATBIN), as a program would go:embed
// them.
func TestGPULaunchCUBIN(t *testing.T) {
	requireGPU(t)
	for _, env := range []string{"NCCL4GO_TEST_CUBIN", "NCCL4GO_TEST_FATBIN"} {
		t.Run(env, func(t *testing.T) {
			path := os.Getenv(env)
			if path == "" {
				t.Skipf("%s names no file (the GPU script builds one with nvcc)", env)
			}
			image, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			saxpyOn(t, image)
		})
	}
}

// TestGPULaunchWithoutCurrentContext: the rule the fake models, on the
// real driver (first seen as BenchmarkLaunch's probe: CUresult 0).
func TestGPULaunchWithoutCurrentContext(t *testing.T) {
	requireGPU(t)
	checkLaunchWithoutContext(t)
}

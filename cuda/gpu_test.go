package cuda_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl/cuda"
)

// requireGPU skips, saying why, unless a real CUDA device is usable.
func requireGPU(t *testing.T) {
	t.Helper()
	if os.Getenv("NCCL4GO_FAKE_CHILD") != "" {
		t.Skip("GPU test: skipped in a fake-library child process")
	}
	if n, err := cuda.Count(); err != nil || n == 0 {
		t.Skipf("GPU test: no CUDA device (%d, %v)", n, err)
	}
}

func TestGPUDeviceFacts(t *testing.T) {
	requireGPU(t)
	d := cuda.Device(0)
	name, err := d.Name()
	if err != nil || name == "" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	bus, err := d.PCIBusID()
	if err != nil || strings.Count(bus, ":") != 2 {
		t.Errorf("PCIBusID = %q, %v", bus, err)
	}
	uuid, err := d.UUID()
	if err != nil || !strings.HasPrefix(uuid, "GPU-") || len(uuid) != 40 {
		t.Errorf("UUID = %q, %v", uuid, err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil || major < 3 {
		t.Errorf("ComputeCapability = %d.%d, %v", major, minor, err)
	}
	total, err := d.TotalMemory()
	free, total2, err2 := d.MemInfo()
	if err != nil || err2 != nil || total == 0 || total2 != total || free > total {
		t.Errorf("TotalMemory %d (%v), MemInfo %d/%d (%v)", total, err, free, total2, err2)
	}
	v, err := cuda.DriverVersion()
	if err != nil || v < 11000 {
		t.Errorf("DriverVersion = %d, %v", v, err)
	}
	n, _ := cuda.Count()
	if _, err := cuda.Device(n).Name(); !errors.Is(err, cuda.ErrInvalidDevice) {
		t.Errorf("device %d: %v, want ErrInvalidDevice", n, err)
	}
	t.Logf("%s %s %s sm_%d%d %.1f GiB, driver CUDA %s", name, bus, uuid, major, minor, float64(total)/(1<<30), cuda.FormatDriverVersion(v))
}

func TestGPUMemoryStreamsEvents(t *testing.T) {
	requireGPU(t)
	d := cuda.Device(0)
	src := make([]float32, 1<<20)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	a, err := cuda.AllocFrom(d, src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	b, err := cuda.Alloc[float32](d, len(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CopyFrom(a); err != nil {
		t.Fatal(err)
	}
	got, err := b.ToHost()
	if err != nil || got[12345] != src[12345] || got[len(got)-1] != src[len(src)-1] {
		t.Fatalf("device round trip: %v %v", err, got[12345])
	}
	if p, err := cuda.PointerDevice(b.Ptr()); err != nil || p != d {
		t.Errorf("PointerDevice = %v, %v", p, err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	start, _ := d.NewEvent()
	end, _ := d.NewEvent()
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := b.CopyFromAsync(a, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.MemsetAsync(0, s); err != nil {
		t.Fatal(err)
	}
	end.Record(s)
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, err := cuda.Elapsed(start, end)
	if err != nil || el <= 0 || el > 10*time.Second {
		t.Errorf("Elapsed = %v, %v", el, err)
	}
	back := make([]float32, len(src))
	if err := b.CopyToHostAsync(back, s); err != nil || back[777] != 0 {
		t.Errorf("after memset: %v %v", err, back[777])
	}
	if err := s.Destroy(); err != nil {
		t.Error(err)
	}
	if err := s.Destroy(); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("second Destroy: %v", err)
	}
	start.Destroy()
	end.Destroy()
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("second Free: %v", err)
	}
	if err := b.CopyFromHost(src); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("copy into freed memory: %v", err)
	}
	t.Logf("10 device copies of 4 MiB and a memset: %v", el)
}

func TestGPUElementTypes(t *testing.T) {
	requireGPU(t)
	d := cuda.Device(0)
	h := []cuda.BFloat16{cuda.BFloat16From(1.5), cuda.BFloat16From(-2.25)}
	s, err := cuda.AllocFrom(d, h)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	back, _ := s.ToHost()
	if back[0].Float32() != 1.5 || back[1].Float32() != -2.25 {
		t.Errorf("bfloat16 round trip: %v", back)
	}
	if _, err := cuda.Alloc[cuda.Float8E4M3](d, 0); !errors.Is(err, cuda.ErrInvalidValue) {
		t.Errorf("Alloc(0): %v", err)
	}
	if _, err := cuda.Alloc[float64](d, 1<<61); err == nil {
		t.Error("Alloc of 16 EiB succeeded")
	}
}

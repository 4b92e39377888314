package cuda_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Every test of this file runs against the fake CUDA driver
// (internal/faketest/testdata/fakecuda.c): two devices unless said otherwise.

func TestDevices(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		if err := cuda.Available(); err != nil {
			t.Fatalf("Available: %v", err)
		}
		n, err := cuda.Count()
		if err != nil || n != 2 {
			t.Fatalf("Count = %d, %v; want 2", n, err)
		}
		devs, err := cuda.Devices()
		if err != nil || len(devs) != 2 || devs[0] != 0 || devs[1] != 1 {
			t.Fatalf("Devices = %v, %v", devs, err)
		}
		v, err := cuda.DriverVersion()
		if err != nil || v != 13000 || cuda.FormatDriverVersion(v) != "13.0" {
			t.Fatalf("DriverVersion = %d (%s), %v", v, cuda.FormatDriverVersion(v), err)
		}
		path, err := cuda.LibraryPath()
		if err != nil || path != os.Getenv(cuda.LibraryEnv) {
			t.Fatalf("LibraryPath = %q, %v; want %q", path, err, os.Getenv(cuda.LibraryEnv))
		}
		for _, d := range devs {
			if err := d.Check(); err != nil {
				t.Errorf("%s.Check: %v", d, err)
			}
			if name, err := d.Name(); err != nil || name != "Fake GPU "+string(rune('0'+d)) {
				t.Errorf("%s.Name = %q, %v", d, name, err)
			}
			if bus, err := d.PCIBusID(); err != nil || bus != "00000000:0"+string(rune('0'+d))+":00.0" {
				t.Errorf("%s.PCIBusID = %q, %v", d, bus, err)
			}
			wantUUID := "GPU-face0000-0000-0000-0000-0000000000" + "0" + string(rune('0'+d))
			if u, err := d.UUID(); err != nil || u != wantUUID {
				t.Errorf("%s.UUID = %q, %v; want %q", d, u, err, wantUUID)
			}
			if major, minor, err := d.ComputeCapability(); err != nil || major != 9 || minor != 0 {
				t.Errorf("%s.ComputeCapability = %d.%d, %v", d, major, minor, err)
			}
			if sms, err := d.Attribute(cuda.AttrMultiprocessorCount); err != nil || sms != 132 {
				t.Errorf("%s.Attribute(SMs) = %d, %v", d, sms, err)
			}
			if vmm, err := d.Attribute(cuda.AttrVirtualMemoryManagement); err != nil || vmm != 1 {
				t.Errorf("%s.Attribute(VMM) = %d, %v", d, vmm, err)
			}
			total, err := d.TotalMemory()
			if err != nil || total != 80<<30 {
				t.Errorf("%s.TotalMemory = %d, %v", d, total, err)
			}
			free, total2, err := d.MemInfo()
			if err != nil || total2 != total || free != total {
				t.Errorf("%s.MemInfo = %d, %d, %v; want everything free of %d", d, free, total2, err, total)
			}
			if err := d.Synchronize(); err != nil {
				t.Errorf("%s.Synchronize: %v", d, err)
			}
			ctx, err := cudabridge.PrimaryContext(int(d))
			if err != nil || ctx == 0 {
				t.Errorf("%s: PrimaryContext = %#x, %v", d, ctx, err)
			}
			if again, _ := cudabridge.PrimaryContext(int(d)); again != ctx {
				t.Errorf("%s: a second PrimaryContext differs: %#x, %#x", d, again, ctx)
			}
			if d.String() != "cuda:"+string(rune('0'+d)) {
				t.Errorf("String = %q", d.String())
			}
		}
		if _, err := cuda.Device(0).Attribute(cuda.Attribute(100000)); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("an unknown attribute: %v, want ErrInvalidValue", err)
		}
		// MemInfo counts allocations.
		s, err := cuda.Alloc[float32](1, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		free, total, err := cuda.Device(1).MemInfo()
		if err != nil || free != total-4<<20 {
			t.Errorf("MemInfo after allocating 4 MiB = %d of %d, %v", free, total, err)
		}
		if err := s.Free(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestInvalidDevice(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for _, d := range []cuda.Device{-1, 2, 99} {
			checks := map[string]error{"Check": d.Check()}
			_, checks["Name"] = d.Name()
			_, checks["PCIBusID"] = d.PCIBusID()
			_, checks["UUID"] = d.UUID()
			_, _, checks["ComputeCapability"] = d.ComputeCapability()
			_, checks["TotalMemory"] = d.TotalMemory()
			_, _, checks["MemInfo"] = d.MemInfo()
			checks["Synchronize"] = d.Synchronize()
			_, checks["PrimaryContext"] = cudabridge.PrimaryContext(int(d))
			_, checks["NewStream"] = d.NewStream()
			_, checks["NewEvent"] = d.NewEvent()
			_, checks["Alloc"] = cuda.Alloc[int8](d, 8)
			for op, err := range checks {
				if !errors.Is(err, cuda.ErrInvalidDevice) {
					t.Errorf("%s.%s: %v, want ErrInvalidDevice", d, op, err)
					continue
				}
				var ce *cuda.Error
				if !errors.As(err, &ce) || ce.Code != cuda.InvalidDevice {
					t.Errorf("%s.%s: %v is not a *cuda.Error with CUDA_ERROR_INVALID_DEVICE", d, op, err)
				}
			}
		}
	})
}

func TestNoDevice(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: -1}, func(t *testing.T) {
		n, err := cuda.Count()
		if !errors.Is(err, cuda.ErrNoDevice) || n != 0 {
			t.Fatalf("Count = %d, %v; want ErrNoDevice", n, err)
		}
		if !errors.Is(cuda.Available(), cuda.ErrNoDevice) {
			t.Errorf("Available: %v", cuda.Available())
		}
		if _, err := cuda.Devices(); !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("Devices: %v", err)
		}
		if _, err := cuda.Device(0).Name(); !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("Name: %v", err)
		}
		if _, err := cuda.Alloc[float32](0, 4); !errors.Is(err, cuda.ErrNoDevice) {
			t.Errorf("Alloc: %v", err)
		}
		// The driver is there: its version and path are known.
		if v, err := cuda.DriverVersion(); err != nil || v != 13000 {
			t.Errorf("DriverVersion = %d, %v", v, err)
		}
		if p, err := cuda.LibraryPath(); err != nil || p == "" {
			t.Errorf("LibraryPath = %q, %v", p, err)
		}
		if !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE") {
			t.Errorf("the error does not name the driver's code: %v", err)
		}
	})
}

func TestNoDriver(t *testing.T) {
	faketest.Run(t, faketest.Env{NoCUDA: true}, func(t *testing.T) {
		path := os.Getenv(cuda.LibraryEnv)
		_, err := cuda.Count()
		if !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Fatalf("Count: %v, want ErrLibraryNotFound", err)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), cuda.LibraryEnv) {
			t.Errorf("the error names neither the tried path %s nor %s: %v", path, cuda.LibraryEnv, err)
		}
		for op, err := range map[string]error{
			"Available": cuda.Available(), "Check": cuda.Device(0).Check(),
		} {
			if !errors.Is(err, cuda.ErrLibraryNotFound) {
				t.Errorf("%s: %v", op, err)
			}
		}
		if _, err := cuda.DriverVersion(); !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Errorf("DriverVersion: %v", err)
		}
		if _, err := cuda.LibraryPath(); !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Errorf("LibraryPath: %v", err)
		}
		if _, err := cuda.Alloc[int32](0, 1); !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Errorf("Alloc: %v", err)
		}
		if _, err := cuda.PointerDevice(0x1000); !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Errorf("PointerDevice: %v", err)
		}
	})
}

func TestLoad(t *testing.T) {
	_, fakeCUDA := faketest.Libraries(t, faketest.Env{})
	faketest.Run(t, faketest.Env{NoCUDA: true}, func(t *testing.T) {
		// The default library failed (NCCL4GO_CUDA_LIBRARY is missing); an
		// explicit Load still works, and again for the same file.
		if _, err := cuda.Count(); !errors.Is(err, cuda.ErrLibraryNotFound) {
			t.Fatalf("Count before Load: %v", err)
		}
		if err := cuda.Load(fakeCUDA); err != nil {
			t.Fatalf("Load(%s): %v", fakeCUDA, err)
		}
		if n, err := cuda.Count(); err != nil || n != 2 {
			t.Fatalf("Count after Load = %d, %v", n, err)
		}
		if err := cuda.Load(fakeCUDA); err != nil {
			t.Errorf("Load of the same file again: %v", err)
		}
		err := cuda.Load("/nonexistent/libcuda.so.1")
		if err == nil || !strings.Contains(err.Error(), fakeCUDA) {
			t.Errorf("Load of another file: %v, want an error naming the loaded %s", err, fakeCUDA)
		}
		if p, err := cuda.LibraryPath(); err != nil || p != fakeCUDA {
			t.Errorf("LibraryPath = %q, %v", p, err)
		}
	})
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		err := cuda.Load(os.Getenv("NCCL_LIBRARY")) // a library that is not a CUDA driver
		if !errors.Is(err, cuda.ErrLibraryNotFound) || !strings.Contains(err.Error(), "cuDriverGetVersion") {
			t.Errorf("Load of a non-driver: %v", err)
		}
		if err := cuda.Load(os.Getenv(cuda.LibraryEnv)); err != nil {
			t.Errorf("Load after a failed Load: %v", err)
		}
	})
}

func TestErrors(t *testing.T) {
	e := &cuda.Error{Op: "Alloc", Code: cuda.OutOfMemory, Detail: "out of memory"}
	if e.Error() != "cuda: Alloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory" {
		t.Errorf("Error() = %q", e.Error())
	}
	sentinels := map[cuda.Result]error{
		cuda.NoDevice: cuda.ErrNoDevice, cuda.InvalidDevice: cuda.ErrInvalidDevice,
		cuda.InvalidValue: cuda.ErrInvalidValue, cuda.OutOfMemory: cuda.ErrOutOfMemory, cuda.NotReady: cuda.ErrNotReady,
	}
	all := []error{cuda.ErrNoDevice, cuda.ErrInvalidDevice, cuda.ErrInvalidValue, cuda.ErrOutOfMemory, cuda.ErrNotReady,
		cuda.ErrClosed, cuda.ErrLibraryNotFound, cuda.ErrUnsupported}
	for code, want := range sentinels {
		err := error(&cuda.Error{Op: "x", Code: code})
		for _, s := range all {
			if errors.Is(err, s) != (s == want) {
				t.Errorf("%s: errors.Is(%v) = %v", code, s, !(s == want))
			}
		}
	}
	if !errors.Is(cuda.ErrUnsupported, errors.ErrUnsupported) {
		t.Error("ErrUnsupported does not wrap errors.ErrUnsupported")
	}
	u := &cuda.UnsupportedError{Func: "cuFoo"}
	if !errors.Is(u, cuda.ErrUnsupported) || !errors.Is(u, errors.ErrUnsupported) || !strings.Contains(u.Error(), "cuFoo") {
		t.Errorf("UnsupportedError: %v", u)
	}
	a := &cuda.ArgError{Op: "Sub", Arg: "range", Reason: "bad"}
	if !errors.Is(a, cuda.ErrInvalidValue) || a.Error() != "cuda: Sub: range: bad" {
		t.Errorf("ArgError: %v", a)
	}
	names := map[cuda.Result]string{
		cuda.Success: "CUDA_SUCCESS", cuda.InvalidContext: "CUDA_ERROR_INVALID_CONTEXT",
		cuda.InvalidHandle: "CUDA_ERROR_INVALID_HANDLE", cuda.IllegalAddress: "CUDA_ERROR_ILLEGAL_ADDRESS",
		cuda.Result(12345): "CUresult(12345)",
	}
	for code, want := range names {
		if code.String() != want {
			t.Errorf("%d.String() = %q, want %q", int32(code), code.String(), want)
		}
	}
}

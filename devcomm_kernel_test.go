package nccl_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// TestFakeDevCommKernelArgs: a DevComm and a Window passed to
// cuda.Function.Launch arrive in the kernel as the loaded release's
// ncclDevComm_t bytes and the ncclWindow_t.
func TestFakeDevCommKernelArgs(t *testing.T) {
	for _, tc := range []struct {
		release int
		size    int
	}{{22803, 88}, {22907, 224}, {23007, 240}} {
		faketest.Run(t, faketest.Env{Release: tc.release}, func(t *testing.T) {
			c := fakeComm(t, 4, 2, nil)
			d, err := c.CreateDevComm(nil)
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			defer d.Close()
			buf, err := nccl.MemAlloc[float32](0, 1024)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Free()
			w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
			if err != nil {
				t.Fatalf("RegisterWindow: %v", err)
			}
			// echo (void *out, ncclWindow_t win, ncclDevComm dc): the fake
			// driver writes its parameters' bytes to out.
			m, err := cuda.Device(0).LoadModule([]byte("FAKECUBIN\nkernel echo 8,8," + strconv.Itoa(tc.size) + " echo\n"))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Unload()
			f, err := m.Function("echo")
			if err != nil {
				t.Fatal(err)
			}
			out, _ := cuda.Alloc[uint8](0, 16+tc.size)
			defer out.Free()
			one := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)}
			if err := f.Launch(cuda.Stream{}, one, out, w, d); err != nil {
				t.Fatalf("Launch with a Window and a DevComm: %v", err)
			}
			got, _ := out.ToHost()
			h, _ := w.Handle()
			if binary.LittleEndian.Uint64(got[8:]) != uint64(h) {
				t.Errorf("the kernel saw window %#x, want %#x", binary.LittleEndian.Uint64(got[8:]), h)
			}
			want, _ := d.Bytes()
			if !slices.Equal(got[16:], want) {
				t.Errorf("the kernel saw a different ncclDevComm_t (%d bytes)", tc.size)
			}
			// After 300 bytes of other arguments the DevComm no longer fits
			// the launch's small buffer: it goes to the large one.
			m3, err := cuda.Device(0).LoadModule([]byte("FAKECUBIN\nkernel late 8,300,8," + strconv.Itoa(tc.size) + " echo\n"))
			if err != nil {
				t.Fatal(err)
			}
			defer m3.Unload()
			late, _ := m3.Function("late")
			out3, _ := cuda.Alloc[uint8](0, 320+tc.size)
			defer out3.Free()
			if err := late.Launch(cuda.Stream{}, one, out3, [300]byte{1}, w, d); err != nil {
				t.Fatalf("Launch with the DevComm after 300 bytes: %v", err)
			}
			got3, _ := out3.ToHost()
			if !slices.Equal(got3[320:], want) {
				t.Errorf("the DevComm after 300 bytes arrived changed")
			}
			// A DevComm of another size than the kernel's parameter (a
			// kernel built against another release's headers) is refused.
			m2, _ := cuda.Device(0).LoadModule([]byte("FAKECUBIN\nkernel old 8 echo\n"))
			defer m2.Unload()
			old, _ := m2.Function("old")
			if tc.size != 8 {
				err := old.Launch(cuda.Stream{}, one, d)
				if !errors.Is(err, cuda.ErrInvalidValue) || !strings.Contains(err.Error(), "bytes, but parameter 0") {
					t.Errorf("DevComm for a parameter of 8 bytes: %v", err)
				}
			}
			d.Close()
			if err := f.Launch(cuda.Stream{}, one, out, w, d); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Launch with a closed DevComm: %v, want ErrClosed", err)
			}
			w.Close()
			if err := f.Launch(cuda.Stream{}, one, out, w, d); err == nil {
				t.Error("Launch with a closed Window succeeded")
			}
		})
	}
}

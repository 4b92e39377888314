package nccl

import (
	"fmt"
	"unsafe"

	"github.com/nccl4go/nccl/cuda"
)

// [DevComm] and [Window] are kernel arguments: pass them to
// [cuda.Function.Launch] for a kernel parameter of type ncclDevComm (by
// value) or ncclWindow_t.
var (
	_ cuda.KernelArg = (*DevComm)(nil)
	_ cuda.KernelArg = (*Window)(nil)
)

// PutKernelArg writes the ncclDevComm_t NCCL wrote, in the layout of the
// loaded release ([DevComm.Size] bytes: 88 in 2.28.3 up to 240 from
// 2.30.3), as a kernel parameter of type ncclDevComm passed by value. A
// device communicator not yet created (inside its group) or closed is an
// error. It implements [cuda.KernelArg].
func (d *DevComm) PutKernelArg(dst []byte) (int, error) {
	if err := d.lock("DevComm.PutKernelArg"); err != nil {
		return 0, err
	}
	defer d.c.mu.Unlock()
	n := d.layout.DevComm
	if len(dst) < n {
		return 0, fmt.Errorf("nccl: DevComm.PutKernelArg: %d bytes of room, the ncclDevComm_t has %d: %w", len(dst), n, cuda.ErrArgumentSpace)
	}
	d.store.CopyTo(dst, n)
	return n, nil
}

// Device is the CUDA device of the device communicator's communicator:
// [cuda.Function.Launch] checks that the kernel runs there.
func (d *DevComm) Device() cuda.Device {
	if d == nil || d.c == nil {
		return -1
	}
	return cuda.Device(d.c.dev)
}

// PutKernelArg writes the ncclWindow_t (8 bytes), as a kernel parameter of
// type ncclWindow_t. A window not yet registered (inside its group), not
// made, or closed is an error. It implements [cuda.KernelArg].
func (w *Window) PutKernelArg(dst []byte) (int, error) {
	if err := w.lock("Window.PutKernelArg"); err != nil {
		return 0, err
	}
	defer w.c.mu.Unlock()
	if len(dst) < 8 {
		return 0, fmt.Errorf("nccl: Window.PutKernelArg: %d bytes of room, an ncclWindow_t has 8: %w", len(dst), cuda.ErrArgumentSpace)
	}
	*(*uintptr)(unsafe.Pointer(&dst[0])) = w.handle
	return 8, nil
}

// Device is the CUDA device of the window's communicator.
func (w *Window) Device() cuda.Device {
	if w == nil || w.c == nil {
		return -1
	}
	return cuda.Device(w.c.dev)
}

package cuda

import (
	"fmt"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// Device is a CUDA device ordinal, as the driver numbers the visible
// devices (after CUDA_VISIBLE_DEVICES). Methods check the ordinal and return
// an error wrapping [ErrInvalidDevice] when it is out of range.
type Device int

// Count is the number of visible CUDA devices. With a driver but no device
// it returns 0 and an error wrapping [ErrNoDevice].
func Count() (int, error) {
	if err := ensure(); err != nil {
		return 0, err
	}
	n, r := capi.CuDeviceGetCount()
	return n, check("Count", "cuDeviceGetCount", r)
}

// Devices lists the visible devices.
func Devices() ([]Device, error) {
	n, err := Count()
	if err != nil {
		return nil, err
	}
	devs := make([]Device, n)
	for i := range devs {
		devs[i] = Device(i)
	}
	return devs, nil
}

// String returns "cuda:N".
func (d Device) String() string { return fmt.Sprintf("cuda:%d", int(d)) }

// Check reports whether d names a visible device.
func (d Device) Check() error { return d.check("Check") }

func (d Device) check(op string) error {
	if err := ensure(); err != nil {
		return err
	}
	if d < 0 {
		return &Error{Op: op, Code: InvalidDevice, Detail: fmt.Sprintf("device %d: ordinals start at 0", int(d))}
	}
	if _, r := capi.CuDeviceGet(int(d)); r != 0 {
		n, _ := capi.CuDeviceGetCount()
		return &Error{Op: op, Code: Result(r), Detail: fmt.Sprintf("device %d of %d visible", int(d), n)}
	}
	return nil
}

// Name is the device's product name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	if err := d.check("Name"); err != nil {
		return "", err
	}
	s, r := capi.CuDeviceGetName(int(d))
	return s, check("Name", "cuDeviceGetName", r)
}

// PCIBusID is the device's PCI address, "domain:bus:device.function".
func (d Device) PCIBusID() (string, error) {
	if err := d.check("PCIBusID"); err != nil {
		return "", err
	}
	s, r := capi.CuDeviceGetPCIBusID(int(d))
	return s, check("PCIBusID", "cuDeviceGetPCIBusId", r)
}

// UUID is the device's UUID in nvidia-smi's form, "GPU-xxxxxxxx-xxxx-...".
func (d Device) UUID() (string, error) {
	if err := d.check("UUID"); err != nil {
		return "", err
	}
	u, r := capi.CuDeviceGetUUID(int(d))
	if err := check("UUID", "cuDeviceGetUuid_v2", r); err != nil {
		return "", err
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// Attribute is a CUdevice_attribute.
type Attribute int

// [Device] attributes the package names.
const (
	AttrMultiprocessorCount     Attribute = 16
	AttrComputeCapabilityMajor  Attribute = 75
	AttrComputeCapabilityMinor  Attribute = 76
	AttrUnifiedAddressing       Attribute = 41
	AttrPCIDomainID             Attribute = 50
	AttrVirtualMemoryManagement Attribute = 102
)

// Attribute reads a device attribute.
func (d Device) Attribute(a Attribute) (int, error) {
	if err := d.check("Attribute"); err != nil {
		return 0, err
	}
	v, r := capi.CuDeviceGetAttribute(int(a), int(d))
	return v, check("Attribute", "cuDeviceGetAttribute", r)
}

// ComputeCapability is the device's SM version, e.g. 9, 0 for Hopper.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(AttrComputeCapabilityMinor)
	return major, minor, err
}

// TotalMemory is the device's memory in bytes.
func (d Device) TotalMemory() (uint64, error) {
	if err := d.check("TotalMemory"); err != nil {
		return 0, err
	}
	v, r := capi.CuDeviceTotalMem(int(d))
	return v, check("TotalMemory", "cuDeviceTotalMem_v2", r)
}

// MemInfo is the free and total memory of the device, in bytes.
func (d Device) MemInfo() (free, total uint64, err error) {
	ctx, err := d.context("MemInfo")
	if err != nil {
		return 0, 0, err
	}
	free, total, r := capi.CuMemGetInfo(ctx)
	return free, total, check("MemInfo", "cuMemGetInfo_v2", r)
}

// Synchronize waits for all work on the device's primary context.
func (d Device) Synchronize() error {
	ctx, err := d.context("Synchronize")
	if err != nil {
		return err
	}
	return check("Synchronize", "cuCtxSynchronize", capi.CuCtxSynchronize(ctx))
}

// primary contexts, retained once per device for the life of the process.
var ctxs struct {
	sync.Mutex
	m map[Device]uintptr
}

// context returns the device's primary context, retaining it on first use.
// Every call of this package that needs a context makes it current on the
// calling thread inside the same C call, so a goroutine that moves between
// threads never runs on the wrong device.
func (d Device) context(op string) (uintptr, error) {
	ctxs.Lock()
	h, ok := ctxs.m[d]
	ctxs.Unlock()
	if ok {
		return h, nil
	}
	if err := d.check(op); err != nil {
		return 0, err
	}
	ctxs.Lock()
	defer ctxs.Unlock()
	if h, ok := ctxs.m[d]; ok {
		return h, nil
	}
	h, r := capi.CuDevicePrimaryCtxRetain(int(d))
	if err := check(op, "cuDevicePrimaryCtxRetain", r); err != nil {
		return 0, err
	}
	if ctxs.m == nil {
		ctxs.m = make(map[Device]uintptr)
	}
	ctxs.m[d] = h
	return h, nil
}

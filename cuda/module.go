package cuda

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nccl4go/nccl/internal/capi"
)

// Module is a CUDA module (CUmodule) loaded on one device: the kernels of a
// CUBIN, PTX or fatbin image. Get its kernels with [Function], launch them
// with [Function.Launch], and Unload it when no kernel of it runs any more.
// A Module is safe for concurrent use.
type Module struct {
	h        uintptr
	ctx      uintptr
	dev      Device
	ccMajor  int
	unloaded atomic.Bool
}

// ModuleError is a failed module load: the driver's result and the JIT
// compiler's error log (for PTX the driver compiles at load time), which
// is empty when the driver wrote none. It unwraps to the driver's *[Error].
type ModuleError struct {
	// Err is the driver's failure.
	Err *Error
	// Log is the JIT's error log.
	Log string
}

// Error reads "cuda: LoadModule: CUDA_ERROR_INVALID_PTX (...): JIT log: ...".
func (e *ModuleError) Error() string {
	if e.Log == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": JIT log: " + e.Log
}

// Unwrap returns the driver error.
func (e *ModuleError) Unwrap() error { return e.Err }

// LoadModule loads a module on d from image: CUBIN, PTX (NUL-terminated or
// not) or fatbin bytes, as nvcc, NVRTC or nvJitLink write them
// (cuModuleLoadDataEx with an error log). PTX is compiled for the device by
// the driver's JIT; its errors come back in a *[ModuleError]. The image is
// copied: the caller may reuse it.
func (d Device) LoadModule(image []byte) (*Module, error) {
	const op = "LoadModule"
	if len(image) == 0 {
		return nil, &ArgError{Op: op, Arg: "image", Reason: "empty"}
	}
	ctx, err := d.context(op)
	if err != nil {
		return nil, err
	}
	major, _, err := d.ComputeCapability()
	if err != nil {
		return nil, err
	}
	log := make([]byte, 8192)
	h, r := capi.CuModuleLoad(ctx, image, log)
	if err := check(op, "cuModuleLoadDataEx", r); err != nil {
		if e, ok := err.(*Error); ok {
			return nil, &ModuleError{Err: e, Log: strings.TrimSpace(cString(log))}
		}
		return nil, err
	}
	return &Module{h: h, ctx: ctx, dev: d, ccMajor: major}, nil
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Device is the device the module is loaded on.
func (m *Module) Device() Device { return m.dev }

// Handle is the raw CUmodule, valid until Unload.
func (m *Module) Handle() uintptr { return m.h }

// Unload unloads the module (cuModuleUnload): its functions can no longer
// be launched. No kernel of it may still run. A second Unload returns an
// error wrapping [ErrClosed].
func (m *Module) Unload() error {
	if m == nil {
		return nil
	}
	if m.h == 0 {
		return &ArgError{Op: "Module.Unload", Arg: "module", Reason: "the zero Module: get one from Device.LoadModule"}
	}
	if m.unloaded.Swap(true) {
		return closedError("Module.Unload", "module already unloaded")
	}
	return check("Module.Unload", "cuModuleUnload", capi.CuModuleUnload(m.ctx, m.h))
}

// Function returns the kernel called name (cuModuleGetFunction): the
// name as the image spells it, so declare kernels extern "C" or pass the
// mangled name. It also learns the kernel's parameter sizes where the
// driver reports them (cuFuncGetParamInfo, CUDA 12.4), so that Launch can
// check the arguments' count and sizes.
func (m *Module) Function(name string) (*Function, error) {
	const op = "Module.Function"
	if m == nil {
		return nil, &ArgError{Op: op, Arg: "module", Reason: "nil"}
	}
	if m.h == 0 {
		return nil, &ArgError{Op: op, Arg: "module", Reason: "the zero Module: get one from Device.LoadModule"}
	}
	if m.unloaded.Load() {
		return nil, closedError(op, "module unloaded")
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return nil, &ArgError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q is not a kernel name", name)}
	}
	h, r := capi.CuModuleGetFunction(m.ctx, m.h, append([]byte(name), 0))
	if Result(r) == NotFound {
		return nil, &Error{Op: op, Code: NotFound, Detail: fmt.Sprintf("no kernel %q in the module (declare it extern \"C\", or pass its mangled name)", name)}
	}
	if err := check(op, "cuModuleGetFunction", r); err != nil {
		return nil, err
	}
	f := &Function{h: h, ctx: m.ctx, dev: m.dev, mod: m, name: name, ccMajor: m.ccMajor}
	for i := 0; i < capi.MaxKernelArgs; i++ {
		_, size, r := capi.CuFuncGetParamInfo(m.ctx, h, i)
		if r != 0 {
			// Past the last parameter the driver says invalid value;
			// an older driver lacks the call, a kernel without
			// parameter information is not supported.
			f.paramsKnown = Result(r) == InvalidValue
			break
		}
		f.params = append(f.params, uint16(size))
	}
	if !f.paramsKnown {
		f.params = nil
	}
	return f, nil
}

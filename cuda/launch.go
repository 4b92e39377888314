package cuda

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"

	"github.com/nccl4go/nccl/internal/capi"
)

// Function is a kernel of a loaded [Module] (CUfunction). It is safe for
// concurrent use; launches from several goroutines go to the driver as
// they come.
type Function struct {
	h, ctx      uintptr
	dev         Device
	mod         *Module
	name        string
	ccMajor     int
	params      []uint16 // parameter sizes, when paramsKnown
	paramsKnown bool
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Device is the device of the function's module.
func (f *Function) Device() Device { return f.dev }

// Handle is the raw CUfunction, valid until the module's Unload.
func (f *Function) Handle() uintptr { return f.h }

// ParamSizes returns the sizes in bytes of the kernel's parameters, and
// whether the driver reported them (cuFuncGetParamInfo, CUDA 12.4). Where
// it did, Launch checks each argument's size against them.
func (f *Function) ParamSizes() ([]int, bool) {
	if f == nil {
		return nil, false
	}
	out := make([]int, len(f.params))
	for i, s := range f.params {
		out[i] = int(s)
	}
	return out, f.paramsKnown
}

// FuncAttribute is a kernel attribute (CUfunction_attribute).
type FuncAttribute int

// Kernel attributes, with the driver's numbers.
const (
	FuncMaxThreadsPerBlock     FuncAttribute = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	FuncStaticSharedBytes      FuncAttribute = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	FuncNumRegs                FuncAttribute = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
	FuncMaxDynamicSharedBytes  FuncAttribute = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	funcAttributeBinaryVersion FuncAttribute = 6
)

func (f *Function) use(op string) error {
	if f == nil {
		return &ArgError{Op: op, Arg: "function", Reason: "nil"}
	}
	if f.mod == nil {
		return &ArgError{Op: op, Arg: "function", Reason: "the zero Function: get one from Module.Function"}
	}
	if f.mod.unloaded.Load() {
		return closedError(op, "module unloaded")
	}
	return nil
}

// Attribute returns a kernel attribute (cuFuncGetAttribute).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	if err := f.use("Function.Attribute"); err != nil {
		return 0, err
	}
	v, r := capi.CuFuncGetAttribute(f.ctx, f.h, int(a))
	return v, check("Function.Attribute", "cuFuncGetAttribute", r)
}

// SetMaxDynamicSharedMemory lets launches of f use up to bytes of dynamic
// shared memory (cuFuncSetAttribute with
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): without it a launch may
// ask for at most 48 KiB.
func (f *Function) SetMaxDynamicSharedMemory(bytes int) error {
	if err := f.use("Function.SetMaxDynamicSharedMemory"); err != nil {
		return err
	}
	return check("Function.SetMaxDynamicSharedMemory", "cuFuncSetAttribute",
		capi.CuFuncSetAttribute(f.ctx, f.h, int(FuncMaxDynamicSharedBytes), bytes))
}

// MaxActiveBlocksPerMultiprocessor is how many blocks of blockSize threads
// using dynamicSharedBytes of dynamic shared memory fit on one
// multiprocessor at once (cuOccupancyMaxActiveBlocksPerMultiprocessor),
// for sizing grids. Multiply by [AttrMultiprocessorCount] for the largest
// grid a cooperative launch accepts.
func (f *Function) MaxActiveBlocksPerMultiprocessor(blockSize, dynamicSharedBytes int) (int, error) {
	const op = "Function.MaxActiveBlocksPerMultiprocessor"
	if err := f.use(op); err != nil {
		return 0, err
	}
	if blockSize <= 0 || dynamicSharedBytes < 0 {
		return 0, &ArgError{Op: op, Arg: "blockSize", Reason: fmt.Sprintf("%d threads, %d bytes", blockSize, dynamicSharedBytes)}
	}
	v, r := capi.CuOccupancyMaxActiveBlocksPerMultiprocessor(f.ctx, f.h, blockSize, uint64(dynamicSharedBytes))
	return v, check(op, "cuOccupancyMaxActiveBlocksPerMultiprocessor", r)
}

// Dim3 is a grid, block or cluster size. A zero Y or Z counts as 1.
type Dim3 struct{ X, Y, Z uint32 }

// Dim is [Dim3]{x, 1, 1}. A negative x is 0, which Launch refuses; one past
// what a uint32 holds is math.MaxUint32, which the driver refuses (it is
// never wrapped to a small size).
func Dim(x int) Dim3 { return Dim3{X: uint32(min(max(x, 0), math.MaxUint32)), Y: 1, Z: 1} }

func (d Dim3) fill() [3]uint32 {
	return [3]uint32{d.X, max(d.Y, 1), max(d.Z, 1)}
}

// LaunchConfig is how a kernel is launched: grid and block sizes, dynamic
// shared memory, and the launch attributes NCCL's device API kernels may
// need.
type LaunchConfig struct {
	Grid, Block Dim3
	// SharedMemBytes is the dynamic shared memory of each block.
	SharedMemBytes uint32
	// Cooperative launches all blocks at once, so that they may
	// synchronize with each other (CU_LAUNCH_ATTRIBUTE_COOPERATIVE through
	// cuLaunchKernelEx, or cuLaunchCooperativeKernel on a driver before
	// CUDA 12). The grid must fit on the device:
	// see [Function.MaxActiveBlocksPerMultiprocessor].
	Cooperative bool
	// Cluster groups blocks into thread block clusters
	// (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; compute capability 9.0 and
	// CUDA 12); the zero [Dim3] launches without clusters.
	Cluster Dim3
}

// KernelArg is a kernel argument that writes its own bytes: [Slice]
// implements it (the device address), and so do the nccl package's DevComm
// (the ncclDevComm_t of the loaded release) and Window (ncclWindow_t).
type KernelArg interface {
	// PutKernelArg writes the argument's bytes, as the kernel's parameter
	// type lays them out, at the start of dst and returns how many it
	// wrote. It must not keep dst or its receiver's address: both may live
	// on the launching goroutine's stack. When dst is too small it returns
	// an error wrapping ErrArgumentSpace.
	PutKernelArg(dst []byte) (int, error)
}

// PutKernelArg writes s's device address (8 bytes): a [Slice] is passed to a
// kernel as a T* pointer. A zero or freed Slice is an error.
func (s Slice[T]) PutKernelArg(dst []byte) (int, error) {
	if err := s.Err(); err != nil {
		return 0, err
	}
	if len(dst) < 8 {
		return 0, ErrArgumentSpace
	}
	*(*uintptr)(unsafe.Pointer(&dst[0])) = s.Ptr()
	return 8, nil
}

// ErrArgumentSpace: a kernel argument does not fit in the room left.
// [KernelArg.PutKernelArg] returns an error wrapping it when dst is too
// small: Launch then tries again with more room, up to 4 KiB of arguments.
var ErrArgumentSpace = fmt.Errorf("cuda: no room left in the %d bytes of kernel arguments", argBytes)

// argBytes is the most bytes of arguments one launch passes, the driver's
// traditional parameter space.
const argBytes = 4096

// Launch launches f on stream s (the zero [Stream]: the device's legacy
// default stream) with cfg and args (cuLaunchKernel; cuLaunchKernelEx for
// a cooperative launch or clusters). It returns when the launch is queued,
// not when the kernel is done.
//
// Each argument is passed by value, in the bytes of its Go type: the
// fixed-size numbers (int8 … uint64, float32, float64, [Float16], [BFloat16],
// bool as one byte, uintptr as a device address), any [KernelArg] ([Slice],
// nccl.DevComm, nccl.Window), and plain values without Go pointers
// (structs and arrays of numbers, laid out as Go lays them out: match the
// kernel's struct with explicit padding). Go's int and uint are refused,
// since their size differs from C's int: convert to int32 or int64. Where
// the driver reports the kernel's parameters, the count and each size are
// checked before the launch. A Slice or other argument that reports a
// Device() must be on f's device.
//
// A launch makes one cgo call and no heap allocation; the argument bytes
// stay on the caller's stack. Launches on a stream being captured are
// recorded into the graph (see [Stream.Capture]).
func (f *Function) Launch(s Stream, cfg LaunchConfig, args ...any) error {
	const op = "Function.Launch"
	if err := f.use(op); err != nil {
		return err
	}
	var stream uintptr
	if s.s != nil {
		if s.s.destroyed.Load() {
			return closedError(op, "stream destroyed")
		}
		if s.s.dev != f.dev {
			return &ArgError{Op: op, Arg: "stream", Reason: fmt.Sprintf("on %s, the kernel's module on %s", s.s.dev, f.dev)}
		}
		stream = s.s.h
	}
	c := capi.LaunchConfig{Grid: cfg.Grid.fill(), Block: cfg.Block.fill(), SharedMem: cfg.SharedMemBytes}
	if cfg.Grid.X == 0 || cfg.Block.X == 0 {
		return &ArgError{Op: op, Arg: "config", Reason: fmt.Sprintf("grid %v, block %v: X must be at least 1", cfg.Grid, cfg.Block)}
	}
	if cfg.Cooperative {
		c.Cooperative = 1
	}
	if cfg.Cluster != (Dim3{}) {
		if cfg.Cluster.X == 0 {
			return &ArgError{Op: op, Arg: "config", Reason: fmt.Sprintf("cluster %v: X must be at least 1", cfg.Cluster)}
		}
		if f.ccMajor < 9 {
			return &ArgError{Op: op, Arg: "config", Reason: fmt.Sprintf("thread block clusters need compute capability 9.0; %s has %d.x", f.dev, f.ccMajor)}
		}
		c.Cluster = cfg.Cluster.fill()
	}
	if len(args) > capi.MaxKernelArgs {
		return &ArgError{Op: op, Arg: "args", Reason: fmt.Sprintf("%d arguments: at most %d", len(args), capi.MaxKernelArgs)}
	}
	if f.paramsKnown && len(args) != len(f.params) {
		return &ArgError{Op: op, Arg: "args", Reason: fmt.Sprintf("%d arguments for kernel %s, which takes %d", len(args), f.name, len(f.params))}
	}
	// Most launches fit in a small buffer, which costs less to clear (Go
	// zeroes each buffer where it is declared: 4.5 KiB cost the fake
	// driver's launch 15 ns); a device communicator by value (88-240
	// bytes) fits the middle one.
	if len(args) <= tinyArgs {
		var buf [tinyArgBytes]byte
		var offs [tinyArgs]uint16
		fits, err := f.launch(stream, &c, &cfg, args, buf[:], offs[:])
		if fits {
			return err
		}
	}
	if len(args) <= smallArgs {
		var buf [smallArgBytes]byte
		var offs [smallArgs]uint16
		fits, err := f.launch(stream, &c, &cfg, args, buf[:], offs[:])
		if fits {
			return err
		}
	}
	var buf [argBytes]byte
	var offs [capi.MaxKernelArgs]uint16
	fits, err := f.launch(stream, &c, &cfg, args, buf[:], offs[:])
	if !fits {
		return &ArgError{Op: op, Arg: "args", Reason: ErrArgumentSpace.Error()}
	}
	return err
}

// The small buffers of a launch.
const (
	tinyArgs      = 8
	tinyArgBytes  = 64
	smallArgs     = 24
	smallArgBytes = 512
)

// launch writes args to buf and offs and launches; fits is false when they
// need more room than buf has (nothing was launched).
func (f *Function) launch(stream uintptr, c *capi.LaunchConfig, cfg *LaunchConfig, args []any, buf []byte, offs []uint16) (fits bool, err error) {
	const op = "Function.Launch"
	// The arguments and the buffers do not outlive this call: hide them
	// from escape analysis, so that neither the boxed arguments nor the
	// buffers move to the heap (see noescape).
	argv := *(*[]any)(noescape(unsafe.Pointer(&args)))
	dst := unsafe.Slice((*byte)(noescape(unsafe.Pointer(&buf[0]))), len(buf))
	off := 0
	for i, a := range argv {
		off = (off + 7) &^ 7
		if off >= len(dst) {
			return false, nil
		}
		n, err := putArg(dst[off:], a, f.dev)
		if err == ErrArgumentSpace || errors.Is(err, ErrArgumentSpace) {
			return false, nil
		}
		if err != nil {
			if r, ok := err.(argReason); ok {
				return true, &ArgError{Op: op, Arg: fmt.Sprintf("args[%d] (%T)", i, a), Reason: string(r)}
			}
			// A KernelArg's own error (a freed Slice, a closed
			// DevComm) keeps its identity for errors.Is.
			return true, fmt.Errorf("cuda: %s: args[%d] (%T): %w", op, i, a, err)
		}
		if f.paramsKnown && n != int(f.params[i]) {
			return true, &ArgError{Op: op, Arg: fmt.Sprintf("args[%d] (%T)", i, a),
				Reason: fmt.Sprintf("%d bytes, but parameter %d of kernel %s has %d", n, i, f.name, f.params[i])}
		}
		offs[i] = uint16(off)
		off += n
	}
	r := capi.Launch(f.ctx, f.h, stream, c, &dst[0], (*uint16)(noescape(unsafe.Pointer(&offs[0]))), len(argv))
	if r != 0 {
		return true, launchError(op, r, cfg)
	}
	return true, nil
}

func launchError(op string, r int32, cfg *LaunchConfig) error {
	fn := "cuLaunchKernel"
	if cfg.Cluster != (Dim3{}) || cfg.Cooperative {
		fn = "cuLaunchKernelEx"
	}
	if Result(r) == resultMissing && cfg.Cluster != (Dim3{}) {
		return fmt.Errorf("cuda: %s: thread block clusters need cuLaunchKernelEx (CUDA 12): %w", op, &UnsupportedError{Func: fn})
	}
	return check(op, fn, r)
}

// argReason is why Launch refuses an argument (an *[ArgError]).
type argReason string

func (r argReason) Error() string { return string(r) }

// deviceArg is an argument that knows its device ([Slice]).
type deviceArg interface{ Device() Device }

// putArg writes a's bytes at the start of dst.
func putArg(dst []byte, a any, dev Device) (int, error) {
	switch v := a.(type) {
	case float32:
		return put(dst, v)
	case float64:
		return put(dst, v)
	case int32:
		return put(dst, v)
	case uint32:
		return put(dst, v)
	case int64:
		return put(dst, v)
	case uint64:
		return put(dst, v)
	case uintptr:
		return put(dst, v)
	case int16:
		return put(dst, v)
	case uint16:
		return put(dst, v)
	case int8:
		return put(dst, v)
	case uint8:
		return put(dst, v)
	case bool:
		return put(dst, v)
	case Float16:
		return put(dst, v)
	case BFloat16:
		return put(dst, v)
	case int, uint:
		return 0, argReason(fmt.Sprintf("Go's %T has no fixed C size: convert it to int32 or int64 (uint32, uint64) as the kernel declares it", a))
	case nil:
		return 0, argReason("nil argument")
	case KernelArg:
		// Its own checks first: a nil or closed one says so (its
		// Device would read -1).
		n, err := v.PutKernelArg(dst)
		if err != nil {
			return n, err
		}
		if d, ok := a.(deviceArg); ok && d.Device() != dev {
			return 0, argReason(fmt.Sprintf("memory on %s, the kernel's module on %s", d.Device(), dev))
		}
		return n, nil
	}
	return putPlain(dst, a)
}

func put[T any](dst []byte, v T) (int, error) {
	n := int(unsafe.Sizeof(v))
	if len(dst) < n {
		return 0, ErrArgumentSpace
	}
	*(*T)(unsafe.Pointer(&dst[0])) = v
	return n, nil
}

// plainTypes caches, per type, whether it holds no Go pointer.
var plainTypes sync.Map // reflect.Type -> bool

// putPlain copies the bytes of a value without Go pointers (a struct or
// array of numbers).
func putPlain(dst []byte, a any) (int, error) {
	t := reflect.TypeOf(a)
	plain, ok := plainTypes.Load(t)
	if !ok {
		plain = pointerFree(t)
		plainTypes.Store(t, plain)
	}
	if !plain.(bool) {
		if hasGoInt(t) {
			return 0, argReason(fmt.Sprintf("%s holds Go's int or uint, which has no fixed C size: use int32 or int64 (uint32, uint64) as the kernel declares it", t))
		}
		return 0, argReason(fmt.Sprintf("%s holds Go pointers (or strings, slices, maps...), which a kernel cannot read: pass device memory as a Slice or uintptr", t))
	}
	n := int(t.Size())
	if len(dst) < n {
		return 0, ErrArgumentSpace
	}
	if n > 0 {
		// A value without pointers is stored in an interface
		// indirectly: the data word points at its bytes.
		data := (*[2]unsafe.Pointer)(unsafe.Pointer(&a))[1]
		copy(dst, unsafe.Slice((*byte)(data), n))
	}
	return n, nil
}

// hasGoInt says whether t is or holds Go's int or uint (or is a struct or
// array of them), which pointerFree refuses for their size.
func hasGoInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Uint:
		return true
	case reflect.Array:
		return hasGoInt(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasGoInt(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	// int and uint (no fixed C size), pointers, strings, slices, maps,
	// channels, functions, interfaces.
	return false
}

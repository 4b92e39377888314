package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nccl4go/nccl/internal/capi"
)

// Result is a CUDA driver result code (CUresult).
type Result int32

// CUDA driver result codes the package names. Any other code is still
// reported, by number and by the driver's own name for it.
const (
	Success        Result = 0
	InvalidValue   Result = 1
	OutOfMemory    Result = 2
	NotInitialized Result = 3
	Deinitialized  Result = 4
	NoDevice       Result = 100
	InvalidDevice  Result = 101
	InvalidContext Result = 201
	InvalidHandle  Result = 400
	NotFound       Result = 500
	NotReady       Result = 600
	IllegalAddress Result = 700
	LaunchFailed   Result = 719
	NotSupported   Result = 801

	// [Stream] capture (CUDA graphs): a call broke the capture's rules.
	StreamCaptureUnsupported Result = 900 // the call is not allowed while a stream is being captured
	StreamCaptureInvalidated Result = 901 // the capture was invalidated by an earlier error (EndCapture's answer)
	StreamCaptureMerge       Result = 902 // two independent captures would merge
	StreamCaptureUnmatched   Result = 903 // the capture was not begun on this stream
	StreamCaptureUnjoined    Result = 904 // the capture forked into a stream that was not joined back
	StreamCaptureIsolation   Result = 905 // a dependency would cross the capture's boundary
	StreamCaptureImplicit    Result = 906 // implicit synchronization with the legacy default stream
	CapturedEvent            Result = 907 // the event was last recorded in a capture: it cannot be queried or waited on
	StreamCaptureWrongThread Result = 908 // the capture must end on the thread that began it
	Unknown                  Result = 999
	resultMissing            Result = Result(capi.Missing)
	resultNotLoaded          Result = Result(capi.NotLoaded)
	firstUnknownCode                = 1000
)

var resultNames = map[Result]string{
	Success: "CUDA_SUCCESS", InvalidValue: "CUDA_ERROR_INVALID_VALUE", OutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY",
	NotInitialized: "CUDA_ERROR_NOT_INITIALIZED", Deinitialized: "CUDA_ERROR_DEINITIALIZED",
	NoDevice: "CUDA_ERROR_NO_DEVICE", InvalidDevice: "CUDA_ERROR_INVALID_DEVICE",
	InvalidContext: "CUDA_ERROR_INVALID_CONTEXT", InvalidHandle: "CUDA_ERROR_INVALID_HANDLE",
	NotFound: "CUDA_ERROR_NOT_FOUND", NotReady: "CUDA_ERROR_NOT_READY", IllegalAddress: "CUDA_ERROR_ILLEGAL_ADDRESS",
	LaunchFailed: "CUDA_ERROR_LAUNCH_FAILED", NotSupported: "CUDA_ERROR_NOT_SUPPORTED", Unknown: "CUDA_ERROR_UNKNOWN",
	StreamCaptureUnsupported: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", StreamCaptureInvalidated: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	StreamCaptureMerge: "CUDA_ERROR_STREAM_CAPTURE_MERGE", StreamCaptureUnmatched: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	StreamCaptureUnjoined: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", StreamCaptureIsolation: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	StreamCaptureImplicit: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", CapturedEvent: "CUDA_ERROR_CAPTURED_EVENT",
	StreamCaptureWrongThread: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
}

// String returns the C name of the code, e.g. "CUDA_ERROR_OUT_OF_MEMORY",
// asking the loaded driver for codes this package does not name.
func (r Result) String() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	if n := capi.CuGetErrorName(int32(r)); n != "" {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// Sentinel errors, for errors.Is.
var (
	// ErrLibraryNotFound: no CUDA driver library (libcuda.so.1) could be opened.
	ErrLibraryNotFound = errors.New("cuda: driver library not found")
	// ErrUnsupported: the loaded driver lacks a function. It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("cuda: unsupported by the loaded driver: %w", errors.ErrUnsupported)
	// ErrNoDevice: the driver reports no CUDA device.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrInvalidDevice: a device ordinal outside [0, Count()).
	ErrInvalidDevice = errors.New("cuda: invalid device")
	// ErrInvalidValue: an argument the driver or this package rejects.
	ErrInvalidValue = errors.New("cuda: invalid value")
	// ErrOutOfMemory: an allocation failed.
	ErrOutOfMemory = errors.New("cuda: out of memory")
	// ErrNotReady: asynchronous work has not completed yet.
	ErrNotReady = errors.New("cuda: not ready")
	// ErrClosed: the memory, stream or event was already freed or destroyed.
	ErrClosed = errors.New("cuda: already freed or destroyed")
)

// Error is a failed CUDA driver call.
type Error struct {
	Op     string // the package operation, e.g. "Alloc"
	Code   Result // the driver's result
	Detail string // the driver's description of the code
}

// Error reads "cuda: Alloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory".
func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("cuda: %s: %s: %s", e.Op, e.Code, e.Detail)
	}
	return fmt.Sprintf("cuda: %s: %s", e.Op, e.Code)
}

// Is maps the code to the package's sentinel errors.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoDevice:
		return e.Code == NoDevice
	case ErrInvalidDevice:
		return e.Code == InvalidDevice
	case ErrInvalidValue:
		return e.Code == InvalidValue
	case ErrOutOfMemory:
		return e.Code == OutOfMemory
	case ErrNotReady:
		return e.Code == NotReady
	}
	return false
}

// UnsupportedError: the loaded driver has no such function.
type UnsupportedError struct {
	Func string // the C function, e.g. "cuDeviceGetUuid_v2"
}

// Error names the function and the driver library that lacks it.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("cuda: %s: not exported by the loaded driver (%s)", e.Func, capi.CUDAPath())
}

// Is matches [ErrUnsupported] and errors.ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool {
	return target == ErrUnsupported || target == errors.ErrUnsupported
}

// ArgError is an argument this package rejects before calling the driver.
type ArgError struct {
	Op     string // the package operation, e.g. "Alloc"
	Arg    string // the argument, e.g. "n"
	Reason string // what is wrong with it
}

// Error reads "cuda: Alloc: n: 0 elements: need at least 1".
func (e *ArgError) Error() string { return fmt.Sprintf("cuda: %s: %s: %s", e.Op, e.Arg, e.Reason) }

// Is matches [ErrInvalidValue].
func (e *ArgError) Is(target error) bool { return target == ErrInvalidValue }

// check turns a driver result into an error. fn names the C function for the
// missing-symbol case.
func check(op, fn string, r int32) error {
	switch Result(r) {
	case Success:
		return nil
	case resultMissing:
		return &UnsupportedError{Func: fn}
	case resultNotLoaded:
		return fmt.Errorf("cuda: %s: %w", op, ErrLibraryNotFound)
	}
	return &Error{Op: op, Code: Result(r), Detail: capi.CuGetErrorString(r)}
}

func closedError(op, what string) error {
	return fmt.Errorf("cuda: %s: %s: %w", op, what, ErrClosed)
}

// destroyOnce is the Destroy of a driver object (handle h on dev): the
// first call runs destroy (cname, for the error) in dev's context, every
// later one returns an error wrapping [ErrClosed] that says what is gone.
func destroyOnce(destroyed *atomic.Bool, dev Device, h uintptr, op, gone, cname string, destroy func(ctx, h uintptr) int32) error {
	if destroyed.Swap(true) {
		return closedError(op, gone)
	}
	ctx, err := dev.context(op)
	if err != nil {
		return err
	}
	return check(op, cname, destroy(ctx, h))
}

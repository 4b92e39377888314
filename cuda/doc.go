// Package cuda is the part of the CUDA driver API that nccl4go needs:
// devices, primary contexts, streams, events and typed device memory.
//
// The driver library (libcuda.so.1) is opened at run time on first use, or
// by [Load]; building needs no CUDA toolkit, only a C compiler for cgo.
// Without a driver every call returns an error wrapping [ErrLibraryNotFound].
//
// # Contexts and threads
//
// Every call that needs a CUDA context makes the device's primary context
// current on the calling OS thread inside the same C call, so goroutines may
// move between threads freely. The primary context is the one the CUDA
// runtime, NCCL, PyTorch and CuPy use, so memory and streams interoperate.
//
// # Memory
//
// Slice[T] is typed device memory. [Alloc] makes it; Free releases it once
// (a second Free returns [ErrClosed] instead of freeing memory that may have
// been reused). [Wrap] adopts memory from another library without owning it.
// Element types are Go's numeric types plus [Float16], [BFloat16], [Float8E4M3]
// and [Float8E5M2], with conversions from and to float32.
//
// # Errors
//
// Driver failures are *[Error], carrying the CUresult; errors.Is works with
// [ErrNoDevice], [ErrInvalidDevice], [ErrInvalidValue], [ErrOutOfMemory], [ErrNotReady],
// ErrClosed and [ErrUnsupported]. No function panics on bad input.
package cuda

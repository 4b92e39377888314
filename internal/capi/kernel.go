//go:build linux && cgo

package capi

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall

// The launch and module calls read their Go arguments (the launch's
// configuration, the argument bytes and their offsets, the image, the log
// buffer) only before they return, and call nothing in Go: the launch's
// buffers may then stay on the caller's stack (no heap allocation per launch).
#cgo noescape capi_launch
#cgo nocallback capi_launch
#cgo noescape capi_bench_launch_loop
#cgo nocallback capi_bench_launch_loop
#cgo noescape capi_module_load
#cgo nocallback capi_module_load
#cgo noescape capi_cuModuleGetFunction
#cgo nocallback capi_cuModuleGetFunction
#cgo noescape capi_cuFuncGetAttribute
#cgo nocallback capi_cuFuncGetAttribute
#cgo noescape capi_cuFuncGetParamInfo
#cgo nocallback capi_cuFuncGetParamInfo
#cgo noescape capi_cuOccupancyMaxActiveBlocksPerMultiprocessor
#cgo nocallback capi_cuOccupancyMaxActiveBlocksPerMultiprocessor

#include "kernel.h"
#include "shim.h"
*/
import "C"

import "unsafe"

// MaxKernelArgs is the most arguments one launch passes.
const MaxKernelArgs = C.CAPI_MAX_KERNEL_ARGS

// Launch is capi_launch: nargs arguments whose bytes start at buf+offs[i].
func Launch(ctx, fn, stream uintptr, cfg *LaunchConfig, buf *byte, offs *uint16, nargs int) int32 {
	return int32(C.capi_launch(C.uintptr_t(ctx), C.uintptr_t(fn), C.uintptr_t(stream),
		(*C.capi_launch_cfg)(unsafe.Pointer(cfg)), (*C.uchar)(buf), (*C.uint16_t)(offs), C.int(nargs)))
}

// BenchLaunchLoop is capi_bench_launch_loop: ctxMode 0 makes ctx current
// once, 1 passes it to every launch, 2 launches with no current context.
func BenchLaunchLoop(ctx, fn, stream uintptr, cfg *LaunchConfig, buf *byte, offs *uint16, nargs, iters, ctxMode int) int32 {
	return int32(C.capi_bench_launch_loop(C.uintptr_t(ctx), C.uintptr_t(fn), C.uintptr_t(stream),
		(*C.capi_launch_cfg)(unsafe.Pointer(cfg)), (*C.uchar)(buf), (*C.uint16_t)(offs), C.int(nargs), C.long(iters), C.int(ctxMode)))
}

// BenchSetLockEach makes the benchmarks' C loops do one locked
// read-modify-write after each call (on) or not.
func BenchSetLockEach(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.capi_bench_set_lock_each(C.int(v))
}

// CuModuleLoad is capi_module_load; log receives the JIT's error log.
func CuModuleLoad(ctx uintptr, image []byte, log []byte) (uintptr, int32) {
	var mod C.uintptr_t
	var p, l unsafe.Pointer
	if len(image) > 0 {
		p = unsafe.Pointer(&image[0])
	}
	if len(log) > 0 {
		l = unsafe.Pointer(&log[0])
	}
	r := C.capi_module_load(C.uintptr_t(ctx), &mod, p, C.size_t(len(image)), (*C.char)(l), C.size_t(len(log)))
	return uintptr(mod), int32(r)
}

// CuModuleUnload is cuModuleUnload.
func CuModuleUnload(ctx, mod uintptr) int32 {
	return int32(C.capi_cuModuleUnload(C.uintptr_t(ctx), C.uintptr_t(mod)))
}

// CuModuleGetFunction is cuModuleGetFunction; name must end with a NUL byte.
func CuModuleGetFunction(ctx, mod uintptr, name []byte) (uintptr, int32) {
	var fn C.uintptr_t
	r := C.capi_cuModuleGetFunction(C.uintptr_t(ctx), &fn, C.uintptr_t(mod), (*C.char)(unsafe.Pointer(&name[0])))
	return uintptr(fn), int32(r)
}

// CuFuncGetAttribute is cuFuncGetAttribute.
func CuFuncGetAttribute(ctx, fn uintptr, attr int) (int, int32) {
	var v C.int
	r := C.capi_cuFuncGetAttribute(C.uintptr_t(ctx), &v, C.int(attr), C.uintptr_t(fn))
	return int(v), int32(r)
}

// CuFuncSetAttribute is cuFuncSetAttribute.
func CuFuncSetAttribute(ctx, fn uintptr, attr, value int) int32 {
	return int32(C.capi_cuFuncSetAttribute(C.uintptr_t(ctx), C.uintptr_t(fn), C.int(attr), C.int(value)))
}

// CuFuncGetParamInfo is cuFuncGetParamInfo (CUDA 12.4).
func CuFuncGetParamInfo(ctx, fn uintptr, index int) (offset, size uint64, r int32) {
	var o, s C.size_t
	r = int32(C.capi_cuFuncGetParamInfo(C.uintptr_t(ctx), C.uintptr_t(fn), C.size_t(index), &o, &s))
	return uint64(o), uint64(s), r
}

// CuOccupancyMaxActiveBlocksPerMultiprocessor is the driver call of that name.
func CuOccupancyMaxActiveBlocksPerMultiprocessor(ctx, fn uintptr, blockSize int, smem uint64) (int, int32) {
	var v C.int
	r := C.capi_cuOccupancyMaxActiveBlocksPerMultiprocessor(C.uintptr_t(ctx), &v, C.uintptr_t(fn), C.int(blockSize), C.size_t(smem))
	return int(v), int32(r)
}

// CopyTo copies the first n bytes of the device communicator's storage
// into dst (no allocation: a kernel launch's argument buffer).
func (d DevComm) CopyTo(dst []byte, n int) int {
	if d.p == nil {
		return 0
	}
	return copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(d.p)), min(n, DevCommSize)))
}

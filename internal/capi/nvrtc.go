//go:build linux && cgo

package capi

/*
#include <stdlib.h>
#include "nvrtc.h"
*/
import "C"

import "unsafe"

// LoadNVRTC opens NVRTC at path.
func LoadNVRTC(path string) (string, bool) {
	return load(path, func(p, e *C.char, n C.size_t) C.int { return C.capi_nvrtc_load(p, e, n) })
}

// NVRTCPath is the loaded NVRTC's file, or "".
func NVRTCPath() string { return goString(C.capi_nvrtc_path()) }

// NVRTCVersion is nvrtcVersion; r is -1 without NVRTC.
func NVRTCVersion() (major, minor int, r int) {
	var a, b C.int
	r = int(C.capi_nvrtc_version(&a, &b))
	return int(a), int(b), r
}

// NVRTCErrorString is nvrtcGetErrorString.
func NVRTCErrorString(code int) string { return goString(C.capi_nvrtc_error_string(C.int(code))) }

// Compiled is what NVRTC or nvJitLink returned.
type Compiled struct {
	Code    int    // nvrtcResult / nvJitLinkResult of the failing step, 0, or -1 (Missing says what)
	Stage   int    // the failing step
	Missing string // the library or function missing, for Code -1
	Out     []byte
	Log     string
}

func cStrings(ss []string) (**C.char, func()) {
	if len(ss) == 0 {
		return nil, func() {}
	}
	arr := (*[1 << 20]*C.char)(C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[:len(ss):len(ss)]
	for i, s := range ss {
		arr[i] = C.CString(s)
	}
	return &arr[0], func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(&arr[0]))
	}
}

func finish(r C.int, stage C.int, missing *C.char, out *C.char, outlen C.size_t, log *C.char) Compiled {
	c := Compiled{Code: int(r), Stage: int(stage), Missing: goString(missing)}
	if out != nil {
		c.Out = C.GoBytes(unsafe.Pointer(out), C.int(outlen))
		C.free(unsafe.Pointer(out))
	}
	if log != nil {
		c.Log = C.GoString(log)
		C.free(unsafe.Pointer(log))
	}
	return c
}

// NVRTCCompile is capi_nvrtc_compile.
func NVRTCCompile(src, name string, opts []string, output int) Compiled {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts, free := cStrings(opts)
	defer free()
	var out, log, missing *C.char
	var outlen C.size_t
	var stage C.int
	r := C.capi_nvrtc_compile(csrc, cname, C.int(len(opts)), copts, C.int(output), &out, &outlen, &log, &stage, &missing)
	return finish(r, stage, missing, out, outlen, log)
}

// LoadNvJitLink opens nvJitLink at path.
func LoadNvJitLink(path string) (string, bool) {
	return load(path, func(p, e *C.char, n C.size_t) C.int { return C.capi_nvjitlink_load(p, e, n) })
}

// NvJitLinkPath is the loaded nvJitLink's file, or "".
func NvJitLinkPath() string { return goString(C.capi_nvjitlink_path()) }

// NvJitLink links inputs (type, bytes) to a CUBIN.
func NvJitLink(opts []string, types []int32, inputs [][]byte) Compiled {
	copts, free := cStrings(opts)
	defer free()
	n := len(inputs)
	ctypes := (*C.int)(C.malloc(C.size_t(n+1) * 4))
	datas := (*[1 << 20]unsafe.Pointer)(C.malloc(C.size_t(n+1) * 8))[: n+1 : n+1]
	sizes := (*[1 << 20]C.size_t)(C.malloc(C.size_t(n+1) * 8))[: n+1 : n+1]
	ts := unsafe.Slice(ctypes, n+1)
	for i, in := range inputs {
		ts[i] = C.int(types[i])
		datas[i] = C.CBytes(in)
		sizes[i] = C.size_t(len(in))
	}
	defer func() {
		for i := range inputs {
			C.free(datas[i])
		}
		C.free(unsafe.Pointer(ctypes))
		C.free(unsafe.Pointer(&datas[0]))
		C.free(unsafe.Pointer(&sizes[0]))
	}()
	var out, log, missing *C.char
	var outlen C.size_t
	var stage C.int
	r := C.capi_nvjitlink_link(C.int(len(opts)), copts, C.int(n), ctypes, &datas[0], &sizes[0], &out, &outlen, &log, &stage, &missing)
	return finish(r, stage, missing, out, outlen, log)
}

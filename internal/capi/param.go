//go:build linux && cgo

package capi

/*
#include <stdlib.h>
#include "param.h"
*/
import "C"

import "unsafe"

var _ = [1]struct{}{}[int(ParamU64)+1-C.CAPI_PARAM_KINDS]

// ParamBind is ncclParamBind: the handle of parameter key.
func ParamBind(key string) (uintptr, int32) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var h C.uintptr_t
	r := C.capi_param_bind(ck, &h)
	return uintptr(h), int32(r)
}

// ParamGetInt is the typed getter kind on handle h; the value is sign- or
// zero-extended to 64 bits.
func ParamGetInt(kind ParamKind, h uintptr) (uint64, int32) {
	var v C.uint64_t
	r := C.capi_param_get_int(C.int(kind), C.uintptr_t(h), &v)
	return uint64(v), int32(r)
}

// ParamGetRaw is ncclParamGet into buf; n is how many bytes NCCL wrote.
func ParamGetRaw(h uintptr, buf []byte) (n int, r int32) {
	if len(buf) == 0 {
		var b [1]byte
		var l C.int
		r := C.capi_param_get_raw(C.uintptr_t(h), unsafe.Pointer(&b[0]), 0, &l)
		return int(l), int32(r)
	}
	p := C.malloc(C.size_t(len(buf)))
	defer C.free(p)
	var l C.int
	r = int32(C.capi_param_get_raw(C.uintptr_t(h), p, C.int(len(buf)), &l))
	n = int(l)
	if n < 0 || n > len(buf) {
		n = 0
	}
	copy(buf, unsafe.Slice((*byte)(p), len(buf))[:n])
	return n, r
}

// ParamGetStr is ncclParamGetStr; ok is false when NCCL returned NULL.
func ParamGetStr(h uintptr) (s string, ok bool, r int32) {
	var p *C.char
	r = int32(C.capi_param_get_str(C.uintptr_t(h), &p))
	if p != nil {
		defer C.free(unsafe.Pointer(p))
		return C.GoString(p), true, r
	}
	return "", false, r
}

// ParamGetParameter is ncclParamGetParameter: the value of key as text.
func ParamGetParameter(key string) (string, int32) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var p *C.char
	var n C.int
	r := int32(C.capi_param_get_parameter(ck, &p, &n))
	if p == nil {
		return "", r
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoStringN(p, n), r
}

// ParamKeys is ncclParamGetAllParameterKeys.
func ParamKeys() ([]string, int32) {
	var p *C.char
	var n C.int
	var size C.size_t
	r := int32(C.capi_param_keys(&p, &n, &size))
	if p == nil {
		return nil, r
	}
	defer C.free(unsafe.Pointer(p))
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), int(size))
	keys := make([]string, 0, int(n))
	for start := 0; start < len(b) && len(keys) < int(n); {
		end := start
		for end < len(b) && b[end] != 0 {
			end++
		}
		keys = append(keys, string(b[start:end]))
		start = end + 1
	}
	return keys, r
}

// ParamDumpAll is ncclParamDumpAll: NCCL prints to the process's standard
// output.
func ParamDumpAll() int32 { return int32(C.capi_param_dump_all()) }

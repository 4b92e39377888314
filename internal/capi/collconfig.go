//go:build linux && cgo

package capi

/*
#include "collconfig.h"

// The config, the ext entries and the strings are read during the call
// only (the shim copies them to its stack, or inside a group to a block
// the group keeps), and nothing calls back into Go.
#cgo noescape capi_coll_config
#cgo nocallback capi_coll_config
*/
import "C"

import "unsafe"

// The Go mirrors have the shim's layouts.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(CollIn{})-C.sizeof_capi_coll_in]
	_ = [1]struct{}{}[unsafe.Offsetof(CollIn{}.UserProfilerTag)-unsafe.Offsetof(C.capi_coll_in{}.userProfilerTag)]
	_ = [1]struct{}{}[unsafe.Offsetof(CollIn{}.NExt)-unsafe.Offsetof(C.capi_coll_in{}.next)]
	_ = [1]struct{}{}[unsafe.Sizeof(ExtIn{})-C.sizeof_capi_ext_in]
	_ = [1]struct{}{}[unsafe.Offsetof(ExtIn{}.StrOff)-unsafe.Offsetof(C.capi_ext_in{}.str_off)]
	_ = [1]struct{}{}[ExtMax-C.CAPI_EXT_MAX]
	_ = [1]struct{}{}[CollStrMax-C.CAPI_COLL_STR_MAX]
	_ = [1]struct{}{}[CollScatter-C.CAPI_COLL_SCATTER]
	_ = [1]struct{}{}[ExtPtr-C.CAPI_EXT_PTR]
)

// CollConfigCall calls nccl<which>Config (which: CollAllReduce...) with
// the collective's arguments and the config in, its ext entries and its
// string block strs: one cgo call, which copies all of them to C's stack
// for NCCL's call and keeps none.
func CollConfigCall(which int, send, recv uintptr, count uint64, dt, op int32, root int, comm, stream uintptr,
	in *CollIn, ext []ExtIn, strs []byte) Status {
	var e *C.capi_ext_in
	if len(ext) > 0 {
		e = (*C.capi_ext_in)(unsafe.Pointer(&ext[0]))
	}
	var s *C.char
	if len(strs) > 0 {
		s = (*C.char)(unsafe.Pointer(&strs[0]))
	}
	return status(C.capi_coll_config(C.int(which), C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt),
		C.int(op), C.int(root), C.uintptr_t(comm), C.uintptr_t(stream), (*C.capi_coll_in)(unsafe.Pointer(in)), e, s,
		C.size_t(len(strs))))
}

// GroupKept is the number of per-collective config blocks the calling
// thread's open group keeps until its end (tests).
func GroupKept() int { return int(C.capi_group_kept()) }

//go:build linux && cgo

// Package capi is the only cgo of nccl4go: a small C shim that opens
// libnccl.so.2 and libcuda.so.1 at run time, resolves every symbol once and
// exposes one C function per library call. Nothing here is loaded at import.
//
// Handles and device addresses cross as uintptr; C memory that NCCL writes
// later (after a group ends, or in the background for a non-blocking
// communicator) is a Cell, allocated in C.
package capi

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall
#cgo LDFLAGS: -ldl

// noescape and nocallback, for the calls given pointers to Go memory
// (outputs the wrappers below declare as locals, a copy's host side): the
// locals may then stay on the stack. Each of these C functions only reads
// or writes through its pointers before it returns (none keeps one: no
// group or background work writes them later), and nothing in the shim
// calls back into Go. Not listed: calls whose pointers NCCL may use after
// they return (configs, exclude lists and descriptors inside a group;
// asynchronous copies), and the calls given no pointer (a collective):
// nocallback would only add work to those.
#cgo noescape capi_ncclGetVersion
#cgo nocallback capi_ncclGetVersion
#cgo noescape capi_ncclGetUniqueId
#cgo nocallback capi_ncclGetUniqueId
#cgo noescape capi_ncclCommGetUniqueId
#cgo nocallback capi_ncclCommGetUniqueId
#cgo noescape capi_wait_streams
#cgo nocallback capi_wait_streams
#cgo noescape capi_ncclCommGetAsyncError
#cgo nocallback capi_ncclCommGetAsyncError
#cgo noescape capi_ncclCommCount
#cgo nocallback capi_ncclCommCount
#cgo noescape capi_ncclCommCuDevice
#cgo nocallback capi_ncclCommCuDevice
#cgo noescape capi_ncclCommUserRank
#cgo nocallback capi_ncclCommUserRank
#cgo noescape capi_ncclCommMemStats
#cgo nocallback capi_ncclCommMemStats
#cgo noescape capi_ncclCommQueryProperties
#cgo nocallback capi_ncclCommQueryProperties
#cgo noescape capi_ncclMemAlloc
#cgo nocallback capi_ncclMemAlloc
#cgo noescape capi_ncclCommRegister
#cgo nocallback capi_ncclCommRegister
#cgo noescape capi_ncclWinGetUserPtr
#cgo nocallback capi_ncclWinGetUserPtr
#cgo noescape capi_ncclGetLsaMultimemDevicePointer
#cgo nocallback capi_ncclGetLsaMultimemDevicePointer
#cgo noescape capi_ncclGetLsaDevicePointer
#cgo nocallback capi_ncclGetLsaDevicePointer
#cgo noescape capi_ncclGetPeerDevicePointer
#cgo nocallback capi_ncclGetPeerDevicePointer
#cgo noescape capi_ncclRedOpCreatePreMulSum
#cgo nocallback capi_ncclRedOpCreatePreMulSum
#cgo noescape capi_ncclGroupSimulateEnd
#cgo nocallback capi_ncclGroupSimulateEnd
#cgo noescape capi_group_take
#cgo nocallback capi_group_take
#cgo noescape capi_group_release
#cgo nocallback capi_group_release
#cgo noescape capi_cuDriverGetVersion
#cgo nocallback capi_cuDriverGetVersion
#cgo noescape capi_cuDeviceGet
#cgo nocallback capi_cuDeviceGet
#cgo noescape capi_cuDeviceGetCount
#cgo nocallback capi_cuDeviceGetCount
#cgo noescape capi_cuDeviceGetName
#cgo nocallback capi_cuDeviceGetName
#cgo noescape capi_cuDeviceGetAttribute
#cgo nocallback capi_cuDeviceGetAttribute
#cgo noescape capi_cuDeviceTotalMem_v2
#cgo nocallback capi_cuDeviceTotalMem_v2
#cgo noescape capi_cuDeviceGetPCIBusId
#cgo nocallback capi_cuDeviceGetPCIBusId
#cgo noescape capi_cuDeviceGetUuid_v2
#cgo nocallback capi_cuDeviceGetUuid_v2
#cgo noescape capi_cuDevicePrimaryCtxRetain
#cgo nocallback capi_cuDevicePrimaryCtxRetain
#cgo noescape capi_cuMemGetInfo_v2
#cgo nocallback capi_cuMemGetInfo_v2
#cgo noescape capi_cuStreamCreate
#cgo nocallback capi_cuStreamCreate
#cgo noescape capi_cuStreamIsCapturing
#cgo nocallback capi_cuStreamIsCapturing
#cgo noescape capi_cuStreamGetCaptureInfo_v3
#cgo nocallback capi_cuStreamGetCaptureInfo_v3
#cgo noescape capi_cuStreamGetCaptureInfo_v2
#cgo nocallback capi_cuStreamGetCaptureInfo_v2
#cgo noescape capi_cuEventCreate
#cgo nocallback capi_cuEventCreate
#cgo noescape capi_cuEventElapsedTime
#cgo nocallback capi_cuEventElapsedTime
#cgo noescape capi_cuMemAlloc_v2
#cgo nocallback capi_cuMemAlloc_v2
#cgo noescape capi_cuPointerGetAttribute
#cgo nocallback capi_cuPointerGetAttribute
#cgo noescape capi_cuGetErrorName
#cgo nocallback capi_cuGetErrorName
#cgo noescape capi_cuGetErrorString
#cgo nocallback capi_cuGetErrorString

#include <stdlib.h>
#include "shim.h"
#include "group.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// The shim's codes and sizes, checked against the C declarations: each
// line fails to compile if the two disagree.
var (
	_ = [1]struct{}{}[Missing-C.CAPI_MISSING]
	_ = [1]struct{}{}[NotLoaded-C.CAPI_NOT_LOADED]
	_ = [1]struct{}{}[Pending-C.CAPI_PENDING]
	_ = [1]struct{}{}[DevCommSize-C.sizeof_capi_devcomm]
	_ = [1]struct{}{}[NumSyms-C.CAPI_NCCL_SYM_COUNT]
)

func status(s C.capi_status) Status {
	st := Status{Code: int32(s.code)}
	if s.detail != nil {
		st.Detail = C.GoString(s.detail)
		C.free(unsafe.Pointer(s.detail))
	}
	return st
}

// NCCLSymbols lists every NCCL function the shim binds, in Sym order, each
// named as the shim's C table names it. For one function, use Present and
// SymSince instead.
func NCCLSymbols() []SymInfo {
	syms := make([]SymInfo, NumSyms)
	for i := range syms {
		syms[i] = SymInfo{
			Name:    C.GoString(C.capi_nccl_sym_name(C.int(i))),
			Since:   SymSince[i],
			Present: Present(Sym(i)),
		}
	}
	return syms
}

// present holds, per Sym, whether the loaded NCCL has the function: filled
// once by LoadNCCL, nil while no NCCL is loaded.
var present atomic.Pointer[[NumSyms]bool]

// Present reports whether the loaded NCCL has the function sym (false
// while none is loaded, or for a sym out of range). It is an array index.
func Present(sym Sym) bool {
	p := present.Load()
	return p != nil && uint(sym) < NumSyms && p[sym]
}

// LoadNCCL opens the library at path and resolves every symbol.
func LoadNCCL(path string) (errmsg string, ok bool) {
	msg, ok := load(path, func(p *C.char, e *C.char, n C.size_t) C.int { return C.capi_nccl_load(p, e, n) })
	if ok {
		var have [NumSyms]bool
		for i := range have {
			have[i] = C.capi_nccl_sym_present(C.int(i)) != 0
		}
		present.Store(&have)
	}
	return msg, ok
}

// LoadCUDA opens the CUDA driver library at path and resolves every symbol.
func LoadCUDA(path string) (errmsg string, ok bool) {
	return load(path, func(p *C.char, e *C.char, n C.size_t) C.int { return C.capi_cuda_load(p, e, n) })
}

func load(path string, f func(*C.char, *C.char, C.size_t) C.int) (string, bool) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [1024]C.char
	if f(cpath, &buf[0], C.size_t(len(buf))) != 0 {
		return C.GoString(&buf[0]), false
	}
	return "", true
}

// NCCLPath is the file the loaded NCCL came from, or "".
func NCCLPath() string { return goString(C.capi_nccl_path()) }

// CUDAPath is the file the loaded CUDA driver came from, or "".
func CUDAPath() string { return goString(C.capi_cuda_path()) }

// UnloadNCCL closes NCCL again, for a library the loader rejects after
// opening it (not NCCL, too old).
func UnloadNCCL() {
	present.Store(nil)
	C.capi_nccl_unload()
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// Cell is 8 bytes of C memory for an output NCCL may write after the call
// returns (a communicator, a window, a handle).
type Cell struct{ p *C.uintptr_t }

// NewCell allocates a zeroed cell.
func NewCell() Cell { return Cell{(*C.uintptr_t)(C.calloc(1, 8))} }

// Load reads the cell atomically (NCCL may write it from another thread).
func (c Cell) Load() uintptr { return atomic.LoadUintptr((*uintptr)(unsafe.Pointer(c.p))) }

// Store writes the cell.
func (c Cell) Store(v uintptr) { atomic.StoreUintptr((*uintptr)(unsafe.Pointer(c.p)), v) }

// Free releases the cell. Free on a zero Cell does nothing.
func (c Cell) Free() {
	if c.p != nil {
		C.free(unsafe.Pointer(c.p))
	}
}

func (c Cell) c() *C.uintptr_t { return c.p }

// ---------------------------------------------------------------------------
// NCCL: library, versions, errors.

func GetVersion() (int, Status) {
	var v C.int
	st := status(C.capi_ncclGetVersion(&v))
	return int(v), st
}

func GetUniqueID(id *[128]byte) Status {
	return status(C.capi_ncclGetUniqueId((*C.capi_unique_id)(unsafe.Pointer(id))))
}

// GetErrorString is ncclGetErrorString, or "" when NCCL is not loaded.
func GetErrorString(code int32) string { return goString(C.capi_ncclGetErrorString(C.int(code))) }

// GetLastError is ncclGetLastError (a process-wide buffer), or "".
func GetLastError() string {
	p := C.capi_ncclGetLastError()
	if p == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p)
}

// ---------------------------------------------------------------------------
// NCCL: communicator creation. ctx is the CUDA context made current for the
// call (NCCL binds the new rank to the current device).

func CommInitRankConfig(ctx uintptr, out Cell, nranks int, id *[128]byte, rank int, cfg *Config) Status {
	return status(C.capi_ncclCommInitRankConfig(C.uintptr_t(ctx), out.c(), C.int(nranks),
		(*C.capi_unique_id)(unsafe.Pointer(id)), C.int(rank), cfg.c()))
}

func CommInitRankScalable(ctx uintptr, out Cell, nranks, rank int, ids [][128]byte, cfg *Config) Status {
	var p *C.capi_unique_id
	if len(ids) > 0 {
		p = (*C.capi_unique_id)(unsafe.Pointer(&ids[0]))
	}
	return status(C.capi_ncclCommInitRankScalable(C.uintptr_t(ctx), out.c(), C.int(nranks), C.int(rank),
		C.int(len(ids)), p, cfg.c()))
}

func CommSplit(comm uintptr, color, key int, out Cell, cfg *Config) Status {
	return status(C.capi_ncclCommSplit(C.uintptr_t(comm), C.int(color), C.int(key), out.c(), cfg.c()))
}

// CommShrink sorts exclude in place (NCCL does): pass a copy.
func CommShrink(comm uintptr, exclude []int32, out Cell, cfg *Config, flags int) Status {
	var p *C.int
	if len(exclude) > 0 {
		p = (*C.int)(unsafe.Pointer(&exclude[0]))
	}
	return status(C.capi_ncclCommShrink(C.uintptr_t(comm), p, C.int(len(exclude)), out.c(), cfg.c(), C.int(flags)))
}

func CommGetUniqueID(comm uintptr, id *[128]byte) Status {
	return status(C.capi_ncclCommGetUniqueId(C.uintptr_t(comm), (*C.capi_unique_id)(unsafe.Pointer(id))))
}

// CommGrow: comm is 0 on a joining rank, which binds to ctx's device; id may
// be nil on existing ranks other than the coordinator.
func CommGrow(ctx, comm uintptr, nranks int, id *[128]byte, rank int, out Cell, cfg *Config) Status {
	return status(C.capi_ncclCommGrow(C.uintptr_t(ctx), C.uintptr_t(comm), C.int(nranks),
		(*C.capi_unique_id)(unsafe.Pointer(id)), C.int(rank), out.c(), cfg.c()))
}

// ---------------------------------------------------------------------------
// NCCL: teardown, state, queries.

func CommFinalize(comm uintptr) Status { return status(C.capi_ncclCommFinalize(C.uintptr_t(comm))) }
func CommDestroy(comm uintptr) Status  { return status(C.capi_ncclCommDestroy(C.uintptr_t(comm))) }
func CommAbort(comm uintptr) Status    { return status(C.capi_ncclCommAbort(C.uintptr_t(comm))) }
func CommResume(comm uintptr) Status   { return status(C.capi_ncclCommResume(C.uintptr_t(comm))) }

func CommRevoke(comm uintptr, flags int) Status {
	return status(C.capi_ncclCommRevoke(C.uintptr_t(comm), C.int(flags)))
}

func CommSuspend(comm uintptr, flags int) Status {
	return status(C.capi_ncclCommSuspend(C.uintptr_t(comm), C.int(flags)))
}

func CommGetAsyncError(comm uintptr) (int32, Status) {
	var v C.int
	st := status(C.capi_ncclCommGetAsyncError(C.uintptr_t(comm), &v))
	return int32(v), st
}

func CommCount(comm uintptr) (int, Status) {
	var v C.int
	st := status(C.capi_ncclCommCount(C.uintptr_t(comm), &v))
	return int(v), st
}

func CommCuDevice(comm uintptr) (int, Status) {
	var v C.int
	st := status(C.capi_ncclCommCuDevice(C.uintptr_t(comm), &v))
	return int(v), st
}

func CommUserRank(comm uintptr) (int, Status) {
	var v C.int
	st := status(C.capi_ncclCommUserRank(C.uintptr_t(comm), &v))
	return int(v), st
}

func CommMemStats(comm uintptr, stat int) (uint64, Status) {
	var v C.uint64_t
	st := status(C.capi_ncclCommMemStats(C.uintptr_t(comm), C.int(stat), &v))
	return uint64(v), st
}

// ---------------------------------------------------------------------------
// NCCL: memory, registration, windows, reduction operators.

func MemAlloc(ctx uintptr, size uint64) (uintptr, Status) {
	var p C.uintptr_t
	st := status(C.capi_ncclMemAlloc(C.uintptr_t(ctx), &p, C.size_t(size)))
	return uintptr(p), st
}

func MemFree(ptr uintptr) Status { return status(C.capi_ncclMemFree(C.uintptr_t(ptr))) }

func CommRegister(comm, buf uintptr, size uint64) (uintptr, Status) {
	var h C.uintptr_t
	st := status(C.capi_ncclCommRegister(C.uintptr_t(comm), C.uintptr_t(buf), C.size_t(size), &h))
	return uintptr(h), st
}

func CommDeregister(comm, handle uintptr) Status {
	return status(C.capi_ncclCommDeregister(C.uintptr_t(comm), C.uintptr_t(handle)))
}

// CommWindowRegister writes the window into out, possibly later (at group end
// or in the background): out must stay allocated until then.
func CommWindowRegister(comm, buf uintptr, size uint64, out Cell, flags int) Status {
	return status(C.capi_ncclCommWindowRegister(C.uintptr_t(comm), C.uintptr_t(buf), C.size_t(size), out.c(), C.int(flags)))
}

func CommWindowDeregister(comm, win uintptr) Status {
	return status(C.capi_ncclCommWindowDeregister(C.uintptr_t(comm), C.uintptr_t(win)))
}

func WinGetUserPtr(comm, win uintptr) (uintptr, Status) {
	var p C.uintptr_t
	st := status(C.capi_ncclWinGetUserPtr(C.uintptr_t(comm), C.uintptr_t(win), &p))
	return uintptr(p), st
}

func GetLsaMultimemDevicePointer(win uintptr, offset uint64) (uintptr, Status) {
	var p C.uintptr_t
	st := status(C.capi_ncclGetLsaMultimemDevicePointer(C.uintptr_t(win), C.size_t(offset), &p))
	return uintptr(p), st
}

func GetLsaDevicePointer(win uintptr, offset uint64, lsaRank int) (uintptr, Status) {
	var p C.uintptr_t
	st := status(C.capi_ncclGetLsaDevicePointer(C.uintptr_t(win), C.size_t(offset), C.int(lsaRank), &p))
	return uintptr(p), st
}

func GetPeerDevicePointer(win uintptr, offset uint64, peer int) (uintptr, Status) {
	var p C.uintptr_t
	st := status(C.capi_ncclGetPeerDevicePointer(C.uintptr_t(win), C.size_t(offset), C.int(peer), &p))
	return uintptr(p), st
}

// GetMultimemDeviceLeInfo is ncclGetMultimemDeviceLeInfo (NCCL 2.31.2): the
// multicast logical endpoint id and offset of the byte at offset in win.
func GetMultimemDeviceLeInfo(win uintptr, offset uint64) (uint32, uint64, Status) {
	var id C.uint32_t
	var off C.size_t
	st := status(C.capi_ncclGetMultimemDeviceLeInfo(C.uintptr_t(win), C.size_t(offset), &id, &off))
	return uint32(id), uint64(off), st
}

// GetPeerDeviceLeInfo is ncclGetPeerDeviceLeInfo (NCCL 2.31.2): the logical
// endpoint id and offset of the byte at offset in the window win of world
// rank peer.
func GetPeerDeviceLeInfo(win uintptr, offset uint64, peer int) (uint32, uint64, Status) {
	var id C.uint32_t
	var off C.size_t
	st := status(C.capi_ncclGetPeerDeviceLeInfo(C.uintptr_t(win), C.size_t(offset), C.int(peer), &id, &off))
	return uint32(id), uint64(off), st
}

// RedOpCreatePreMulSum: scalar is a device address (residence 0) or the
// address of host memory NCCL reads during the call (residence 1).
func RedOpCreatePreMulSum(scalar uintptr, datatype, residence int32, comm uintptr) (int32, Status) {
	var op C.int
	st := status(C.capi_ncclRedOpCreatePreMulSum(&op, C.uintptr_t(scalar), C.int(datatype), C.int(residence), C.uintptr_t(comm)))
	return int32(op), st
}

// RedOpCreatePreMulSumHost passes a host scalar of up to 8 bytes; NCCL copies
// it during the call.
func RedOpCreatePreMulSumHost(scalar uint64, datatype int32, comm uintptr) (int32, Status) {
	p := (*C.uint64_t)(C.malloc(8))
	defer C.free(unsafe.Pointer(p))
	*p = C.uint64_t(scalar)
	return RedOpCreatePreMulSum(uintptr(unsafe.Pointer(p)), datatype, 1, comm)
}

func RedOpDestroy(op int32, comm uintptr) Status {
	return status(C.capi_ncclRedOpDestroy(C.int(op), C.uintptr_t(comm)))
}

// ---------------------------------------------------------------------------
// NCCL: collectives and point-to-point. One cgo crossing each.

func AllReduce(send, recv uintptr, count uint64, dt, op int32, comm, stream uintptr) Status {
	return status(C.capi_ncclAllReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Broadcast(send, recv uintptr, count uint64, dt int32, root int, comm, stream uintptr) Status {
	return status(C.capi_ncclBroadcast(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(root),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Reduce(send, recv uintptr, count uint64, dt, op int32, root int, comm, stream uintptr) Status {
	return status(C.capi_ncclReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(op),
		C.int(root), C.uintptr_t(comm), C.uintptr_t(stream)))
}

func AllGather(send, recv uintptr, sendcount uint64, dt int32, comm, stream uintptr) Status {
	return status(C.capi_ncclAllGather(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(sendcount), C.int(dt),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func ReduceScatter(send, recv uintptr, recvcount uint64, dt, op int32, comm, stream uintptr) Status {
	return status(C.capi_ncclReduceScatter(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(recvcount), C.int(dt),
		C.int(op), C.uintptr_t(comm), C.uintptr_t(stream)))
}

func AlltoAll(send, recv uintptr, count uint64, dt int32, comm, stream uintptr) Status {
	return status(C.capi_ncclAlltoAll(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Gather(send, recv uintptr, count uint64, dt int32, root int, comm, stream uintptr) Status {
	return status(C.capi_ncclGather(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(root),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Scatter(send, recv uintptr, count uint64, dt int32, root int, comm, stream uintptr) Status {
	return status(C.capi_ncclScatter(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(root),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Send(buf uintptr, count uint64, dt int32, peer int, comm, stream uintptr) Status {
	return status(C.capi_ncclSend(C.uintptr_t(buf), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(comm),
		C.uintptr_t(stream)))
}

func Recv(buf uintptr, count uint64, dt int32, peer int, comm, stream uintptr) Status {
	return status(C.capi_ncclRecv(C.uintptr_t(buf), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(comm),
		C.uintptr_t(stream)))
}

func PutSignal(local uintptr, count uint64, dt int32, peer int, peerWin uintptr, peerWinOffset uint64,
	sigIdx, ctx int, flags uint32, comm, stream uintptr) Status {
	return status(C.capi_ncclPutSignal(C.uintptr_t(local), C.size_t(count), C.int(dt), C.int(peer),
		C.uintptr_t(peerWin), C.size_t(peerWinOffset), C.int(sigIdx), C.int(ctx), C.uint(flags),
		C.uintptr_t(comm), C.uintptr_t(stream)))
}

func Signal(peer, sigIdx, ctx int, flags uint32, comm, stream uintptr) Status {
	return status(C.capi_ncclSignal(C.int(peer), C.int(sigIdx), C.int(ctx), C.uint(flags), C.uintptr_t(comm),
		C.uintptr_t(stream)))
}

func WaitSignal(descs []WaitSignalDesc, comm, stream uintptr) Status {
	var p *C.capi_wait_signal_desc
	if len(descs) > 0 {
		p = (*C.capi_wait_signal_desc)(unsafe.Pointer(&descs[0]))
	}
	return status(C.capi_ncclWaitSignal(C.int(len(descs)), p, C.uintptr_t(comm), C.uintptr_t(stream)))
}

// BenchFloor is one cgo call to a C function that does nothing: the floor
// under any call of the binding, for benchmarks.
func BenchFloor() int32 { return int32(C.capi_bench_floor()) }

// WaitStreams polls the streams not marked in done (cuStreamQuery in
// context ctxs[i]), marking those found done; while one is busy it checks
// comms[i] (ncclCommGetAsyncError; 0: none) and yields the core
// (sched_yield), all inside one C call, until every stream is done
// (WaitDone), sliceNs nanoseconds have passed (WaitSlice), a query failed
// (WaitCUDA: code is the CUresult of stream which) or a communicator
// reported an error (WaitNCCL: code is the ncclResult_t of comms[which]).
// The four slices have the same length. Without cgo, kind is 0 and code
// NotLoaded.
func WaitStreams(ctxs, streams, comms []uintptr, done []byte, sliceNs int64) (kind, which int, code int32) {
	n := len(streams)
	if n == 0 {
		return WaitDone, 0, 0
	}
	if WaitDone != C.CAPI_WAIT_DONE || WaitSlice != C.CAPI_WAIT_SLICE || WaitCUDA != C.CAPI_WAIT_CUDA || WaitNCCL != C.CAPI_WAIT_NCCL {
		panic("capi: WaitStreams: the shim's CAPI_WAIT_ values differ from Go's")
	}
	if len(ctxs) != n || len(comms) != n || len(done) != n {
		panic("capi: WaitStreams: slices of different lengths")
	}
	var w, c C.int
	k := C.capi_wait_streams(C.int(n), (*C.uintptr_t)(unsafe.Pointer(&ctxs[0])), (*C.uintptr_t)(unsafe.Pointer(&streams[0])),
		(*C.uintptr_t)(unsafe.Pointer(&comms[0])), (*C.uchar)(unsafe.Pointer(&done[0])), C.longlong(sliceNs), &w, &c)
	return int(k), int(w), int32(c)
}

// BenchAllReduceLoop runs iters in-place all-reduces from a C loop: the
// reference the Go call path is measured against.
func BenchAllReduceLoop(buf uintptr, count uint64, dt int32, comm, stream uintptr, iters int) Status {
	return status(C.capi_bench_allreduce_loop(C.uintptr_t(buf), C.size_t(count), C.int(dt), C.uintptr_t(comm),
		C.uintptr_t(stream), C.long(iters)))
}

// ---------------------------------------------------------------------------
// NCCL: groups.

func GroupStart() Status { return status(C.capi_ncclGroupStart()) }
func GroupEnd() Status   { return status(C.capi_ncclGroupEnd()) }

// GroupSimulateEnd returns ncclSimInfo_t.estimatedTime.
func GroupSimulateEnd(version uint32) (float32, Status) {
	info := C.capi_sim_info{
		size:          C.size_t(unsafe.Sizeof(C.capi_sim_info{})),
		magic:         SimInfoMagic,
		version:       C.uint(version),
		estimatedTime: -1,
	}
	st := status(C.capi_ncclGroupSimulateEnd(&info))
	return float32(info.estimatedTime), st
}

// ---------------------------------------------------------------------------
// NCCL: device-API structs.

// QueryProperties calls ncclCommQueryProperties on raw, a versioned
// ncclCommProperties_t whose header the caller filled (see Props*).
func QueryProperties(comm uintptr, raw unsafe.Pointer) Status {
	return status(C.capi_ncclCommQueryProperties(C.uintptr_t(comm), raw))
}

// DevComm is ncclDevComm_t storage in C memory (NCCL may fill it at group end).
type DevComm struct{ p *C.capi_devcomm }

// NewDevComm allocates zeroed, 8-aligned storage for a device communicator.
func NewDevComm() DevComm { return DevComm{(*C.capi_devcomm)(C.calloc(1, C.size_t(DevCommSize)))} }

// Bytes copies the device communicator's bytes.
func (d DevComm) Bytes() []byte { return C.GoBytes(unsafe.Pointer(d.p), C.int(DevCommSize)) }

// Addr is the host address of the storage (for a kernel argument).
func (d DevComm) Addr() uintptr { return uintptr(unsafe.Pointer(d.p)) }

// Free releases the storage.
func (d DevComm) Free() {
	if d.p != nil {
		C.free(unsafe.Pointer(d.p))
	}
}

// DevCommCreate calls ncclDevCommCreate with reqs, the bytes of a versioned
// ncclDevCommRequirements_t (copied into C memory for the call).
func DevCommCreate(comm uintptr, reqs []byte, out DevComm) Status {
	p := C.CBytes(reqs)
	defer C.free(p)
	return status(C.capi_ncclDevCommCreate(C.uintptr_t(comm), p, out.p))
}

func DevCommDestroy(comm uintptr, dc DevComm) Status {
	return status(C.capi_ncclDevCommDestroy(C.uintptr_t(comm), dc.p))
}

// ---------------------------------------------------------------------------
// CUDA driver. ctx is made current first when nonzero. Results are CUresult,
// or Missing / NotLoaded.

func CuInit() int32 { return int32(C.capi_cuInit()) }

func CuGetErrorName(code int32) string {
	var p *C.char
	if C.capi_cuGetErrorName(C.int(code), &p) != 0 {
		return ""
	}
	return goString(p)
}

func CuGetErrorString(code int32) string {
	var p *C.char
	if C.capi_cuGetErrorString(C.int(code), &p) != 0 {
		return ""
	}
	return goString(p)
}

func CuDriverGetVersion() (int, int32) {
	var v C.int
	r := C.capi_cuDriverGetVersion(0, &v)
	return int(v), int32(r)
}

func CuDeviceGetCount() (int, int32) {
	var v C.int
	r := C.capi_cuDeviceGetCount(0, &v)
	return int(v), int32(r)
}

func CuDeviceGet(ordinal int) (int, int32) {
	var v C.int
	r := C.capi_cuDeviceGet(0, &v, C.int(ordinal))
	return int(v), int32(r)
}

func CuDeviceGetName(dev int) (string, int32) {
	var buf [256]C.char
	r := C.capi_cuDeviceGetName(0, &buf[0], C.int(len(buf)), C.int(dev))
	if r != 0 {
		return "", int32(r)
	}
	return C.GoString(&buf[0]), 0
}

func CuDeviceGetAttribute(attr, dev int) (int, int32) {
	var v C.int
	r := C.capi_cuDeviceGetAttribute(0, &v, C.int(attr), C.int(dev))
	return int(v), int32(r)
}

func CuDeviceTotalMem(dev int) (uint64, int32) {
	var v C.size_t
	r := C.capi_cuDeviceTotalMem_v2(0, &v, C.int(dev))
	return uint64(v), int32(r)
}

func CuDeviceGetPCIBusID(dev int) (string, int32) {
	var buf [64]C.char
	r := C.capi_cuDeviceGetPCIBusId(0, &buf[0], C.int(len(buf)), C.int(dev))
	if r != 0 {
		return "", int32(r)
	}
	return C.GoString(&buf[0]), 0
}

func CuDeviceGetUUID(dev int) ([16]byte, int32) {
	var u [16]byte
	r := C.capi_cuDeviceGetUuid_v2(0, (*C.uchar)(unsafe.Pointer(&u[0])), C.int(dev))
	return u, int32(r)
}

func CuDevicePrimaryCtxRetain(dev int) (uintptr, int32) {
	var ctx C.uintptr_t
	r := C.capi_cuDevicePrimaryCtxRetain(0, &ctx, C.int(dev))
	return uintptr(ctx), int32(r)
}

func CuCtxSynchronize(ctx uintptr) int32 { return int32(C.capi_cuCtxSynchronize(C.uintptr_t(ctx))) }

func CuMemGetInfo(ctx uintptr) (free, total uint64, r int32) {
	var f, t C.size_t
	r = int32(C.capi_cuMemGetInfo_v2(C.uintptr_t(ctx), &f, &t))
	return uint64(f), uint64(t), r
}

func CuStreamCreate(ctx uintptr, flags uint32) (uintptr, int32) {
	var s C.uintptr_t
	r := C.capi_cuStreamCreate(C.uintptr_t(ctx), &s, C.uint(flags))
	return uintptr(s), int32(r)
}

func CuStreamDestroy(ctx, s uintptr) int32 {
	return int32(C.capi_cuStreamDestroy_v2(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func CuStreamSynchronize(ctx, s uintptr) int32 {
	return int32(C.capi_cuStreamSynchronize(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func CuStreamQuery(ctx, s uintptr) int32 {
	return int32(C.capi_cuStreamQuery(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func CuEventCreate(ctx uintptr, flags uint32) (uintptr, int32) {
	var e C.uintptr_t
	r := C.capi_cuEventCreate(C.uintptr_t(ctx), &e, C.uint(flags))
	return uintptr(e), int32(r)
}

func CuEventDestroy(ctx, e uintptr) int32 {
	return int32(C.capi_cuEventDestroy_v2(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func CuEventRecord(ctx, e, s uintptr) int32 {
	return int32(C.capi_cuEventRecord(C.uintptr_t(ctx), C.uintptr_t(e), C.uintptr_t(s)))
}

func CuEventSynchronize(ctx, e uintptr) int32 {
	return int32(C.capi_cuEventSynchronize(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func CuEventQuery(ctx, e uintptr) int32 {
	return int32(C.capi_cuEventQuery(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func CuEventElapsedTime(ctx, start, end uintptr) (float32, int32) {
	var ms C.float
	r := C.capi_cuEventElapsedTime(C.uintptr_t(ctx), &ms, C.uintptr_t(start), C.uintptr_t(end))
	return float32(ms), int32(r)
}

func CuMemAlloc(ctx uintptr, bytes uint64) (uintptr, int32) {
	var p C.uintptr_t
	r := C.capi_cuMemAlloc_v2(C.uintptr_t(ctx), &p, C.size_t(bytes))
	return uintptr(p), int32(r)
}

func CuMemFree(ctx, p uintptr) int32 {
	return int32(C.capi_cuMemFree_v2(C.uintptr_t(ctx), C.uintptr_t(p)))
}

func CuMemsetD8(ctx, dst uintptr, value byte, n uint64) int32 {
	return int32(C.capi_cuMemsetD8_v2(C.uintptr_t(ctx), C.uintptr_t(dst), C.uchar(value), C.size_t(n)))
}

func CuMemsetD8Async(ctx, dst uintptr, value byte, n uint64, s uintptr) int32 {
	return int32(C.capi_cuMemsetD8Async(C.uintptr_t(ctx), C.uintptr_t(dst), C.uchar(value), C.size_t(n), C.uintptr_t(s)))
}

// CuMemcpyHtoD copies n bytes from host memory src. src may be Go memory:
// the driver has read it by the time the call returns.
func CuMemcpyHtoD(ctx, dst uintptr, src unsafe.Pointer, n uint64) int32 {
	return int32(C.capi_cuMemcpyHtoD_v2(C.uintptr_t(ctx), C.uintptr_t(dst), src, C.size_t(n)))
}

func CuMemcpyDtoH(ctx uintptr, dst unsafe.Pointer, src uintptr, n uint64) int32 {
	return int32(C.capi_cuMemcpyDtoH_v2(C.uintptr_t(ctx), dst, C.uintptr_t(src), C.size_t(n)))
}

func CuMemcpyDtoD(ctx, dst, src uintptr, n uint64) int32 {
	return int32(C.capi_cuMemcpyDtoD_v2(C.uintptr_t(ctx), C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n)))
}

// CuMemcpyHtoDAsync: from pageable memory (all Go memory is), the driver
// stages src before it returns, so src need not outlive the call.
func CuMemcpyHtoDAsync(ctx, dst uintptr, src unsafe.Pointer, n uint64, s uintptr) int32 {
	return int32(C.capi_cuMemcpyHtoDAsync_v2(C.uintptr_t(ctx), C.uintptr_t(dst), src, C.size_t(n), C.uintptr_t(s)))
}

// CuMemcpyDtoHAsync: to pageable memory the driver returns only once the
// copy is complete.
func CuMemcpyDtoHAsync(ctx uintptr, dst unsafe.Pointer, src uintptr, n uint64, s uintptr) int32 {
	return int32(C.capi_cuMemcpyDtoHAsync_v2(C.uintptr_t(ctx), dst, C.uintptr_t(src), C.size_t(n), C.uintptr_t(s)))
}

func CuMemcpyDtoDAsync(ctx, dst, src uintptr, n uint64, s uintptr) int32 {
	return int32(C.capi_cuMemcpyDtoDAsync_v2(C.uintptr_t(ctx), C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n), C.uintptr_t(s)))
}

// CuPointerGetAttributeInt reads an int-valued attribute of a device address.
func CuPointerGetAttributeInt(attr int, p uintptr) (int, int32) {
	var v C.int
	r := C.capi_cuPointerGetAttribute(0, unsafe.Pointer(&v), C.int(attr), C.uintptr_t(p))
	return int(v), int32(r)
}

// NonBlockingAdd counts communicators NCCL runs non-blocking (delta +1 when
// one is adopted, -1 when it is released): while none is alive, gated
// calls skip their readiness check.
func NonBlockingAdd(delta int) { C.capi_nonblocking_add(C.int(delta)) }

// openGroups is the shim's count of threads with a group open; gateBusy
// its count of reasons for the gate to check (group.h), for the tests.
var (
	openGroups = (*int32)(unsafe.Pointer(&C.capi_open_groups))
	gateBusy   = (*int32)(unsafe.Pointer(&C.capi_gate_busy))
)

// GroupDepth is the calling thread's group nesting depth as the shim counts
// it. While no thread has a group open it answers without a cgo call.
func GroupDepth() int {
	if atomic.LoadInt32(openGroups) == 0 {
		return 0
	}
	return int(C.capi_group_depth())
}

// GroupID is the id of the calling thread's outermost open group, the
// same for every operation of that group and distinct from every other
// group of the process; 0 outside a group. While no thread has a group
// open it answers without a cgo call.
func GroupID() uint64 {
	if atomic.LoadInt32(openGroups) == 0 {
		return 0
	}
	return uint64(C.capi_group_id())
}

// GroupHeld is how many threads' open groups hold work of comm: from the
// group's first call that queues work on comm until GroupRelease after its
// end.
func GroupHeld(comm uintptr) int { return int(C.capi_group_held(C.uintptr_t(comm))) }

// GroupRelease releases the holds of the communicators GroupTake returned.
func GroupRelease(comms []uintptr) {
	if len(comms) > 0 {
		C.capi_group_release((*C.uintptr_t)(unsafe.Pointer(&comms[0])), C.int(len(comms)))
	}
}

// GroupOrphaned reports whether a thread ended inside a group that held
// work of comm (NCCL can never run that work).
func GroupOrphaned(comm uintptr) bool { return C.capi_group_orphaned(C.uintptr_t(comm)) != 0 }

// GroupRecords is how many communicators the shim's group table records
// (held by an open group, or orphaned).
func GroupRecords() int { return int(C.capi_group_records()) }

// GroupForget drops the shim's records of comm, before it is freed.
func GroupForget(comm uintptr) { C.capi_group_forget(C.uintptr_t(comm)) }

// GroupMark marks the calling thread's innermost group as opened by a
// manual GroupStart.
func GroupMark() { C.capi_group_mark() }

// GroupInnerManual reports whether the calling thread's innermost group was
// marked by GroupMark.
func GroupInnerManual() bool { return C.capi_group_inner_manual() != 0 }

// GroupTake returns the communicators the calling thread's outermost group
// used and clears the list; their holds stay until GroupRelease. Call it
// on the thread that ended the group.
func GroupTake() []uintptr {
	var buf [64]C.uintptr_t
	n := int(C.capi_group_take(&buf[0], C.int(len(buf))))
	if n <= len(buf) {
		out := make([]uintptr, n)
		for i := range out {
			out[i] = uintptr(buf[i])
		}
		return out
	}
	big := make([]C.uintptr_t, n)
	n = int(C.capi_group_take(&big[0], C.int(n)))
	out := make([]uintptr, n)
	for i := range out {
		out[i] = uintptr(big[i])
	}
	return out
}

// ---------------------------------------------------------------------------
// CUDA graphs: stream capture, instantiate, launch (cuda/graph.go). Every
// symbol is optional: a driver without one returns Missing.

func CuStreamBeginCapture(ctx, s uintptr, mode int32) int32 {
	return int32(C.capi_cuStreamBeginCapture_v2(C.uintptr_t(ctx), C.uintptr_t(s), C.int(mode)))
}

func CuStreamEndCapture(ctx, s uintptr) (uintptr, int32) {
	var g C.uintptr_t
	r := C.capi_cuStreamEndCapture(C.uintptr_t(ctx), C.uintptr_t(s), &g)
	return uintptr(g), int32(r)
}

func CuStreamIsCapturing(ctx, s uintptr) (int32, int32) {
	var st C.int
	r := C.capi_cuStreamIsCapturing(C.uintptr_t(ctx), C.uintptr_t(s), &st)
	return int32(st), int32(r)
}

// CuStreamGetCaptureInfo asks cuStreamGetCaptureInfo_v3 (CUDA 12.3), else
// cuStreamGetCaptureInfo_v2 (CUDA 11.3), for the capture status and id.
func CuStreamGetCaptureInfo(ctx, s uintptr) (status int32, id uint64, r int32) {
	var st C.int
	var cid C.uint64_t
	r = int32(C.capi_cuStreamGetCaptureInfo_v3(C.uintptr_t(ctx), C.uintptr_t(s), &st, &cid))
	if r == Missing {
		r = int32(C.capi_cuStreamGetCaptureInfo_v2(C.uintptr_t(ctx), C.uintptr_t(s), &st, &cid))
	}
	return int32(st), uint64(cid), r
}

func CuGraphInstantiate(ctx, g uintptr, flags uint64) (uintptr, int32) {
	var e C.uintptr_t
	r := C.capi_cuGraphInstantiateWithFlags(C.uintptr_t(ctx), &e, C.uintptr_t(g), C.ulonglong(flags))
	return uintptr(e), int32(r)
}

func CuGraphLaunch(ctx, e, s uintptr) int32 {
	return int32(C.capi_cuGraphLaunch(C.uintptr_t(ctx), C.uintptr_t(e), C.uintptr_t(s)))
}

func CuGraphExecDestroy(ctx, e uintptr) int32 {
	return int32(C.capi_cuGraphExecDestroy(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func CuGraphDestroy(ctx, g uintptr) int32 {
	return int32(C.capi_cuGraphDestroy(C.uintptr_t(ctx), C.uintptr_t(g)))
}

// CuThreadExchangeStreamCaptureMode sets the calling OS thread's stream
// capture interaction mode (0 global, 1 thread-local, 2 relaxed) and
// returns the one it had (cuThreadExchangeStreamCaptureMode). The caller
// keeps its goroutine locked to the thread while the mode matters.
func CuThreadExchangeStreamCaptureMode(mode int32) (prev int32, r int32) {
	m := C.int(mode)
	r = int32(C.capi_cuThreadExchangeStreamCaptureMode(0, &m))
	return int32(m), r
}

// vmmProp is a CUmemAllocationProp for pinned memory of device dev, with no
// shareable handle type (32 bytes).
func vmmProp(dev int32) [32]byte {
	var p [32]byte
	p[0] = 1 // type CU_MEM_ALLOCATION_TYPE_PINNED; requestedHandleTypes 0
	p[8] = 1 // location.type CU_MEM_LOCATION_TYPE_DEVICE
	p[12], p[13], p[14], p[15] = byte(dev), byte(dev>>8), byte(dev>>16), byte(dev>>24)
	return p
}

// CuMemGetAllocationGranularity is the minimum granularity of pinned
// memory of device dev (CU_MEM_ALLOC_GRANULARITY_MINIMUM).
func CuMemGetAllocationGranularity(ctx uintptr, dev int32) (uint64, int32) {
	p := vmmProp(dev)
	var g C.size_t
	r := C.capi_cuMemGetAllocationGranularity(C.uintptr_t(ctx), &g, unsafe.Pointer(&p), 0)
	return uint64(g), int32(r)
}

// CuMemCreate makes a physical allocation of size bytes on device dev.
func CuMemCreate(ctx uintptr, dev int32, size uint64) (uint64, int32) {
	p := vmmProp(dev)
	var h C.uint64_t
	r := C.capi_cuMemCreate(C.uintptr_t(ctx), &h, C.size_t(size), unsafe.Pointer(&p), 0)
	return uint64(h), int32(r)
}

// CuMemRelease releases a physical allocation of CuMemCreate.
func CuMemRelease(ctx uintptr, h uint64) int32 {
	return int32(C.capi_cuMemRelease(C.uintptr_t(ctx), C.uint64_t(h)))
}

// CuMemAddressReserve reserves size bytes of device address space.
func CuMemAddressReserve(ctx uintptr, size, align uint64) (uintptr, int32) {
	var p C.uintptr_t
	r := C.capi_cuMemAddressReserve(C.uintptr_t(ctx), &p, C.size_t(size), C.size_t(align), 0, 0)
	return uintptr(p), int32(r)
}

// CuMemAddressFree frees address space of CuMemAddressReserve.
func CuMemAddressFree(ctx, p uintptr, size uint64) int32 {
	return int32(C.capi_cuMemAddressFree(C.uintptr_t(ctx), C.uintptr_t(p), C.size_t(size)))
}

// CuMemMap maps the whole physical allocation h (size bytes) at p.
func CuMemMap(ctx, p uintptr, size uint64, h uint64) int32 {
	return int32(C.capi_cuMemMap(C.uintptr_t(ctx), C.uintptr_t(p), C.size_t(size), 0, C.uint64_t(h), 0))
}

// CuMemUnmap unmaps [p, p+size).
func CuMemUnmap(ctx, p uintptr, size uint64) int32 {
	return int32(C.capi_cuMemUnmap(C.uintptr_t(ctx), C.uintptr_t(p), C.size_t(size)))
}

// CuMemSetAccess lets device dev read and write [p, p+size).
func CuMemSetAccess(ctx, p uintptr, size uint64, dev int32) int32 {
	var d [12]byte
	d[0] = 1 // location.type CU_MEM_LOCATION_TYPE_DEVICE
	d[4], d[5], d[6], d[7] = byte(dev), byte(dev>>8), byte(dev>>16), byte(dev>>24)
	d[8] = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	return int32(C.capi_cuMemSetAccess(C.uintptr_t(ctx), C.uintptr_t(p), C.size_t(size), unsafe.Pointer(&d), 1))
}

//go:build amd64 || arm64

package cuda

import "unsafe"

// noescape returns p, hidden from escape analysis (the //go:noescape of an
// assembly function, where the runtime uses its own noescape). Launch uses
// it for memory that only the call itself reads: the boxed arguments
// ([KernelArg.PutKernelArg] may not keep its receiver or dst) and the C
// call's buffers (capi's launch is declared noescape), so that neither
// moves to the heap.
//
//go:noescape
func noescape(p unsafe.Pointer) unsafe.Pointer

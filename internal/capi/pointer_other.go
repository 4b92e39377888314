//go:build !linux || !cgo

package capi

// PointerInfo is a stub: nothing can be loaded.
type PointerInfo struct {
	MemoryType uint32
	Device     int32
	Base       uintptr
	Size       uint64
}

// CuPointerInfo is a stub: the driver is never loaded.
func CuPointerInfo(ctx, p uintptr) (PointerInfo, int32) { return PointerInfo{}, NotLoaded }

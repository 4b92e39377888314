//go:build !linux || !cgo

package capi

// MaxKernelArgs is the most arguments one launch passes.
const MaxKernelArgs = 256

func Launch(ctx, fn, stream uintptr, cfg *LaunchConfig, buf *byte, offs *uint16, nargs int) int32 {
	return NotLoaded
}

func BenchLaunchLoop(ctx, fn, stream uintptr, cfg *LaunchConfig, buf *byte, offs *uint16, nargs, iters, ctxMode int) int32 {
	return NotLoaded
}

func BenchSetLockEach(on bool) {}

func CuModuleLoad(ctx uintptr, image []byte, log []byte) (uintptr, int32) { return 0, NotLoaded }
func CuModuleUnload(ctx, mod uintptr) int32                               { return NotLoaded }
func CuModuleGetFunction(ctx, mod uintptr, name []byte) (uintptr, int32)  { return 0, NotLoaded }
func CuFuncGetAttribute(ctx, fn uintptr, attr int) (int, int32)           { return 0, NotLoaded }
func CuFuncSetAttribute(ctx, fn uintptr, attr, value int) int32           { return NotLoaded }
func CuFuncGetParamInfo(ctx, fn uintptr, index int) (offset, size uint64, r int32) {
	return 0, 0, NotLoaded
}
func CuOccupancyMaxActiveBlocksPerMultiprocessor(ctx, fn uintptr, blockSize int, smem uint64) (int, int32) {
	return 0, NotLoaded
}

// CopyTo copies nothing: nothing can be loaded.
func (d DevComm) CopyTo(dst []byte, n int) int { return 0 }

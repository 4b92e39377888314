package nccl

import (
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// What package cuda hands this package without exporting it (package
// cudabridge says why), asserted once to the types cudabridge documents.
var (
	// resolveStream is a stream's handle and device (-1: the zero Stream,
	// any device), or an error wrapping [cuda.ErrClosed] after Destroy.
	resolveStream = cudabridge.StreamResolve.(func(cuda.Stream) (handle uintptr, dev int, err error))
	// allocationMemory is the state of an allocation's memory (nil for nil).
	allocationMemory = cudabridge.AllocationMemory.(func(*cuda.Allocation) *cudabridge.Memory)
)

// primaryContext is device dev's primary CUcontext, retained on first use.
func primaryContext(dev int) (uintptr, error) { return cudabridge.PrimaryContext(dev) }

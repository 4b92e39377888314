package cuda_test

import (
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// What package cuda hands the module's other packages through cudabridge,
// asserted to the types cudabridge documents (as the nccl and watchdog
// packages assert them).
var (
	resolveStream    = cudabridge.StreamResolve.(func(cuda.Stream) (uintptr, int, error))
	allocationMemory = cudabridge.AllocationMemory.(func(*cuda.Allocation) *cudabridge.Memory)
	recordEvent      = cudabridge.EventRecord.(func(*cuda.Event, uintptr) error)
	queryEvent       = cudabridge.EventQuery.(func(*cuda.Event) cuda.Result)
)

// TestBridgeFilled: package cuda fills every variable of cudabridge in its
// init, so the packages that call them never find one nil.
func TestBridgeFilled(t *testing.T) {
	if cudabridge.CheckRange == nil || cudabridge.PrimaryContext == nil || cudabridge.ErrFreed == nil {
		t.Errorf("CheckRange set %v, PrimaryContext set %v, ErrFreed %v", cudabridge.CheckRange != nil, cudabridge.PrimaryContext != nil, cudabridge.ErrFreed)
	}
	if allocationMemory(nil) != nil {
		t.Error("AllocationMemory(nil) is not nil")
	}
}

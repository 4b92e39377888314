package cuda

import (
	"errors"

	"github.com/nccl4go/nccl/internal/cudabridge"
)

// init hands the module's other packages what they need of this one
// without exporting it (package cudabridge says why and how).
func init() {
	cudabridge.CheckRange = func(p uintptr, bytes uint64, dev int) (bool, error) {
		err := checkRange(p, bytes, Device(dev))
		var arg *ArgError
		return errors.As(err, &arg), err
	}
	cudabridge.PrimaryContext = func(dev int) (uintptr, error) { return Device(dev).context("PrimaryContext") }
	cudabridge.ErrFreed = closedError("Verify", "memory freed")
	cudabridge.StreamResolve = Stream.resolve
	cudabridge.AllocationMemory = func(a *Allocation) *cudabridge.Memory {
		if a == nil {
			return nil
		}
		return &a.m
	}
	cudabridge.EventRecord = (*Event).recordHandle
	cudabridge.EventQuery = (*Event).query
	cudabridge.EventResolve = (*Event).resolve
}

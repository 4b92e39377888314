package watchdog

import (
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// What package cuda hands this package without exporting it (package
// cudabridge says why), asserted once to the types cudabridge documents.
var (
	// recordEvent records ev on a raw stream handle (the one a Hook is
	// told of), allocating nothing.
	recordEvent = cudabridge.EventRecord.(func(ev *cuda.Event, stream uintptr) error)
	// queryEvent is cuEventQuery's code for ev (Success, NotReady, or why
	// it cannot be queried), allocating nothing.
	queryEvent = cudabridge.EventQuery.(func(ev *cuda.Event) cuda.Result)
)

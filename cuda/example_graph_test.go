package cuda_test

import (
	"fmt"

	"github.com/nccl4go/nccl/cuda"
)

// Capture work queued on a stream into a graph once, then replay it: the
// host pays one launch per replay instead of one call per operation.
// (Needs a GPU: no Output.)
func ExampleStream_Capture() {
	s, err := cuda.Device(0).NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Destroy()
	x, err := cuda.Alloc[float32](0, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Free()
	g, err := s.Capture(cuda.CaptureThreadLocal, func() error {
		return x.MemsetAsync(0, s) // or a collective of the nccl package on s
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Destroy()
	e, err := g.Instantiate()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Destroy()
	for range 100 {
		if err := e.Launch(s); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(s.Synchronize())
}

package nccl_test

import (
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// The README's table of collectives: each makes one C call and no heap
// allocation (AllReduce: TestAllReduceNoAllocations; Send and Recv:
// TestSendNoAllocations), on a stream of its own and on the default one.
func TestEveryCollectiveNoAllocations(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		one, other := collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(4)...)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		for _, st := range []cuda.Stream{s, {}} {
			for name, call := range map[string]func() error{
				"Broadcast":     func() error { return c.Broadcast(one, one, 0, st) },
				"Reduce":        func() error { return c.Reduce(one, one, nccl.Max, 0, st) },
				"AllGather":     func() error { return c.AllGather(one, other, st) },
				"ReduceScatter": func() error { return c.ReduceScatter(one, other, nccl.Sum, st) },
				"AllToAll":      func() error { return c.AllToAll(one, other, st) },
				"Gather":        func() error { return c.Gather(one, other, 0, st) },
				"Scatter":       func() error { return c.Scatter(one, other, 0, st) },
			} {
				wantHotPath(t, name, func() {
					if err := call(); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				})
			}
		}
	})
}

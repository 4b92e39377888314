package nccl_test

import (
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CommHash's doc: the same on all the communicator's ranks, and another
// communicator's differs (the fake hashes the unique id, as NCCL does).
func TestCommHashSameOnAllRanks(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23100}, func(t *testing.T) {
		hashes := func() []uint64 {
			comms := initAll(t, 0, 1)
			t.Cleanup(func() { nccl.DestroyAll(comms...) })
			var hs []uint64
			for i, c := range comms {
				h, err := c.CommHash()
				if err != nil || h == 0 {
					t.Fatalf("rank %d: CommHash = %#x, %v", i, h, err)
				}
				hs = append(hs, h)
			}
			return hs
		}
		a, b := hashes(), hashes()
		if a[0] != a[1] || b[0] != b[1] {
			t.Errorf("CommHash per rank %#x and %#x; want one value per communicator", a, b)
		}
		if a[0] == b[0] {
			t.Errorf("two communicators share CommHash %#x", a[0])
		}
	})
}

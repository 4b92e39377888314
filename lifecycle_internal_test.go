package nccl

import (
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// The C cells of Split and Shrink are freed once NCCL's job is known to be
// over, not kept for the parent's life.
func TestFakeChildCellsFreed(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		id, err := NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := Init(3, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		cells := func() int {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.life.cells)
		}
		for i := 0; i < 5; i++ {
			child, err := c.Split(0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			child.Destroy()
			if _, err := c.Split(NoColor, 0, nil); err != nil {
				t.Fatal(err)
			}
			s, err := c.Shrink([]int{2}, nil, ShrinkDefault)
			if err != nil {
				t.Fatal(err)
			}
			s.Destroy()
		}
		if n := cells(); n != 0 {
			t.Errorf("%d child cells kept after the children were ready", n)
		}
		// A pending child keeps its cell until it is resolved.
		var pend *Communicator
		if err := Group(func() error {
			var err error
			pend, err = c.Split(0, 0, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n := cells(); n != 1 {
			t.Errorf("%d child cells for one unresolved child", n)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if n := cells(); n != 0 {
			t.Errorf("%d child cells after the parent's Destroy", n)
		}
		// The child NCCL made is still the caller's to destroy.
		if err := pend.Destroy(); err != nil {
			t.Errorf("Destroy of the child resolved after its parent's Destroy: %v", err)
		}
	})
}

package nccl_test

import (
	"context"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/trace"
)

// On real NCCL, blocking and non-blocking: a hook is told of every
// operation, lifecycle ones included (Split, Shrink where the loaded NCCL
// has it, Finalize, Destroy), each once, with the sequence numbers the
// ranks share, and collectives on their stream.
func TestGPUHooksLifecycle(t *testing.T) {
	gputest.Require(t)
	hooksLifecycle(t)
}

// TestHooksLifecycleFake runs TestGPUHooksLifecycle's checks on the fakes.
func TestHooksLifecycleFake(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, hooksLifecycle)
}

func hooksLifecycle(t *testing.T) {
	r, err := nccl.Version()
	if err != nil {
		t.Fatal(err)
	}
	for _, blocking := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.InitContext(ctx, 1, 0, id, &nccl.Config{Blocking: nccl.Ptr(blocking)})
		if err != nil {
			t.Fatalf("blocking %v: Init: %v", blocking, err)
		}
		h := &countHook{}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := cuda.AllocFrom(0, []float32{1, 2, 3, 4})
		if err != nil {
			t.Fatal(err)
		}
		buf := nccl.BufferOf(mem)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
			t.Fatal(err)
		}
		want := []trace.Op{trace.AllReduce, trace.Split}
		child, err := c.SplitContext(ctx, 0, 0, nil)
		if err != nil {
			t.Fatalf("blocking %v: Split: %v", blocking, err)
		}
		if err := child.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if err := c.DestroyContext(ctx); err != nil {
			t.Fatalf("blocking %v: Destroy: %v", blocking, err)
		}
		want = append(want, trace.Finalize, trace.Destroy)
		remove()
		var got []trace.Op
		for i, op := range h.ops {
			got = append(got, op.Event.Op)
			if op.OnStream != (op.Event.Op == trace.AllReduce) {
				t.Errorf("blocking %v: %v told with OnStream %v", blocking, op.Event.Op, op.OnStream)
			}
			if op.Event.Op == trace.AllReduce && op.Event.Stream != s.Handle() {
				t.Errorf("blocking %v: AllReduce told on stream %#x, want %#x", blocking, op.Event.Stream, s.Handle())
			}
			if i < 2 && op.Ref.Seq() != uint64(i+1) {
				t.Errorf("blocking %v: %v has seq %d, want %d", blocking, op.Event.Op, op.Ref.Seq(), i+1)
			}
		}
		if !equalOps(got, want) {
			t.Errorf("NCCL %s, blocking %v: hook told %v, want %v", r, blocking, got, want)
		}
		s.Destroy()
		mem.Free()
	}
}

package nccl_test

import (
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// opHook keeps the reduction operator of each queued operation.
type opHook struct{ ops []trace.RedOp }

func (h *opHook) Queued(op nccl.QueuedOp) { h.ops = append(h.ops, op.Event.RedOp) }
func (h *opHook) GroupEnded()             {}

// The recorder keeps a reduction operator in a byte. NCCL numbers custom
// operators from 5 up (the fake as NCCL: ncclNumOps + a slot); the 252nd
// live one is 256, which the recorder used to keep as 0: "sum", a built-in
// operator the analyzer compares across ranks. It must stay a custom one.
func TestRecorderKeepsCustomOpsCustom(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		var last *nccl.CustomOp
		for i := 0; i < 252; i++ {
			op, err := nccl.PreMulSum(c, float32(2))
			if err != nil {
				t.Fatalf("PreMulSum #%d: %v", i, err)
			}
			last = op
		}
		if last.Op() != 256 {
			t.Fatalf("the 252nd custom operator is %d, want 256 (NCCL's numbering)", int(last.Op()))
		}
		h := &opHook{}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		defer remove()
		b := collBuf(t, 0, float32(1), 2)
		if err := c.AllReduce(b, b, last.Op(), cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce: %v", err)
		}
		if len(h.ops) != 1 || h.ops[0].Builtin() {
			t.Errorf("recorded %v for custom operator 256, want a custom operator", h.ops)
		}
	})
}

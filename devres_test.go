package nccl_test

import (
	"errors"
	"math"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// LLA2ACalcSlots returns NCCL's maxElts × ⌈maxEltSize/8⌉, refuses what
// NCCL would overflow or misread, and needs NCCL 2.28.3.
func TestFakeLLA2ACalcSlots(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		for _, tc := range []struct{ elts, size, want int }{
			{32, 16, 64}, {32, 17, 96}, {1, 1, 1}, {0, 8, 0}, {5, 0, 0},
		} {
			got, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
			if err != nil || got != tc.want {
				t.Errorf("LLA2ACalcSlots(%d, %d) = %d, %v; want %d", tc.elts, tc.size, got, err, tc.want)
			}
		}
		if got, err := nccl.LLA2ACalcSlots(1<<28-1, 64); err != nil || got != (1<<28-1)*8 {
			t.Errorf("the largest: %d, %v", got, err)
		}
		calls := faketest.Calls(t, "ncclLLA2ACalcSlots")
		for _, tc := range []struct {
			elts, size int
			arg        string
		}{{-1, 8, "maxElts"}, {8, -1, "maxEltSize"}, {1 << 28, 64, "maxElts"}, {math.MaxInt32, 9, "maxElts"}, {1, math.MaxInt32, "maxElts"}} {
			_, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
			var ae *nccl.ArgError
			if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, nccl.ErrInvalidArgument) {
				t.Errorf("LLA2ACalcSlots(%d, %d): %v, want an ArgError for %s", tc.elts, tc.size, err, tc.arg)
			}
		}
		if n := faketest.Calls(t, "ncclLLA2ACalcSlots"); n != calls {
			t.Errorf("NCCL called %d times for refused arguments", n-calls)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		_, err := nccl.LLA2ACalcSlots(1, 8)
		if !errors.Is(err, nccl.ErrUnsupported) || err.Error() != "nccl: ncclLLA2ACalcSlots: requires NCCL 2.28.3, loaded 2.27.3" {
			t.Errorf("on 2.27.3: %v", err)
		}
	})
}

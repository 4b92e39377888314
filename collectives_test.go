package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CPU tests of the collectives, on the fake libraries: every check the
// binding makes before calling NCCL (one test each), single-rank data
// movement, the in-progress protocol, and the hot path's allocations.

func TestCollectiveBufferOnOtherDevice(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		send := collBuf(t, 1, f32s(4)...)
		recv := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.AllReduce(send, recv, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "device 1", "device 0")
		wantArgErr(t, c.Send(send, 0, cuda.Stream{}), "Send", "buf", "device 1")
		noNCCLCall(t, "ncclAllReduce")
	})
}

func TestCollectiveTypeMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		send := collBuf(t, 0, f32s(4)...)
		recv := collBuf[int32](t, 0, 1, 2, 3, 4)
		wantArgErr(t, c.AllReduce(send, recv, nccl.Sum, cuda.Stream{}), "AllReduce", "recv", "int32", "float32")
		wantArgErr(t, c.AllGather(send, recv, cuda.Stream{}), "AllGather", "recv", "int32")
		noNCCLCall(t, "ncclAllReduce")
	})
}

func TestAllReduceCountMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		err := c.AllReduce(collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(5)...), nccl.Sum, cuda.Stream{})
		wantArgErr(t, err, "AllReduce", "recv", "5 elements", "4")
	})
}

func TestBroadcastRootCountMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 1, 0)
		err := c.Broadcast(collBuf(t, 0, f32s(3)...), collBuf(t, 0, f32s(4)...), 1, cuda.Stream{})
		wantArgErr(t, err, "Broadcast", "send", "3 elements")
		// Not the root: send is not read.
		if err := c.Broadcast(collBuf(t, 0, f32s(3)...), collBuf(t, 0, f32s(4)...), 0, cuda.Stream{}); err != nil {
			t.Errorf("Broadcast off the root: %v", err)
		}
	})
}

func TestReduceRootCountMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		err := c.Reduce(collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(8)...), nccl.Sum, 0, cuda.Stream{})
		wantArgErr(t, err, "Reduce", "recv", "8 elements", "4")
	})
}

func TestAllGatherCountNotNRanksTimesSend(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		err := c.AllGather(collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(9)...), cuda.Stream{})
		wantArgErr(t, err, "AllGather", "recv", "9 elements", "2*4")
	})
}

func TestReduceScatterCountNotNRanksTimesRecv(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		// 9 = 2*4 + 1: nccl4py would drop the last element; nccl4go refuses.
		err := c.ReduceScatter(collBuf(t, 0, f32s(9)...), collBuf(t, 0, f32s(4)...), nccl.Sum, cuda.Stream{})
		wantArgErr(t, err, "ReduceScatter", "send", "9 elements", "2*4")
	})
}

func TestAllToAllCountMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		err := c.AllToAll(collBuf(t, 0, f32s(8)...), collBuf(t, 0, f32s(10)...), cuda.Stream{})
		wantArgErr(t, err, "AllToAll", "recv", "10 elements", "8")
	})
}

func TestAllToAllRemainder(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		err := c.AllToAll(collBuf(t, 0, f32s(9)...), collBuf(t, 0, f32s(9)...), cuda.Stream{})
		wantArgErr(t, err, "AllToAll", "send", "9 elements", "multiple of nranks 2")
		noNCCLCall(t, "ncclAlltoAll")
	})
}

func TestGatherRootCount(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 1, 0)
		err := c.Gather(collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(7)...), 1, cuda.Stream{})
		wantArgErr(t, err, "Gather", "recv", "7 elements", "2*4")
	})
}

func TestScatterRootCount(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		err := c.Scatter(collBuf(t, 0, f32s(7)...), collBuf(t, 0, f32s(4)...), 0, cuda.Stream{})
		wantArgErr(t, err, "Scatter", "send", "7 elements", "2*4")
	})
}

// Off the root, the unused buffer may be the zero Buffer.
func TestRootedCollectivesOffRootTakeZeroBuffer(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 1, 0)
		b := collBuf(t, 0, f32s(4)...)
		s := cuda.Stream{}
		for name, err := range map[string]error{
			"Broadcast": c.Broadcast(nccl.Buffer{}, b, 0, s),
			"Reduce":    c.Reduce(b, nccl.Buffer{}, nccl.Max, 0, s),
			"Gather":    c.Gather(b, nccl.Buffer{}, 0, s),
			"Scatter":   c.Scatter(nccl.Buffer{}, b, 0, s),
		} {
			if err != nil {
				t.Errorf("%s off the root with the zero Buffer: %v", name, err)
			}
		}
		// On the root the same calls are refused.
		wantArgErr(t, c.Broadcast(nccl.Buffer{}, b, 1, s), "Broadcast", "send", "null")
		wantArgErr(t, c.Reduce(b, nccl.Buffer{}, nccl.Sum, 1, s), "Reduce", "recv", "null")
	})
}

func TestRootOutOfRange(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		big := collBuf(t, 0, f32s(8)...)
		s := cuda.Stream{}
		for _, root := range []int{-1, 2} {
			wantArgErr(t, c.Broadcast(b, b, root, s), "Broadcast", "root", "not in [0, 2)")
			wantArgErr(t, c.Reduce(b, b, nccl.Sum, root, s), "Reduce", "root")
			wantArgErr(t, c.Gather(b, big, root, s), "Gather", "root")
			wantArgErr(t, c.Scatter(big, b, root, s), "Scatter", "root")
		}
		noNCCLCall(t, "ncclBroadcast")
	})
}

func TestEmptyBuffer(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		s := collSlice(t, 0, f32s(4)...)
		empty, err := s.Sub(2, 2)
		if err != nil {
			t.Fatal(err)
		}
		wantArgErr(t, c.AllReduce(nccl.BufferOf(empty), nccl.BufferOf(empty), nccl.Sum, cuda.Stream{}), "AllReduce", "send", "0 elements")
	})
}

func TestZeroBuffer(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.AllReduce(nccl.Buffer{}, b, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "null device address")
	})
}

func TestFreedBuffer(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		s, err := cuda.AllocFrom(0, f32s(4))
		if err != nil {
			t.Fatal(err)
		}
		b := nccl.BufferOf(s)
		s.Free()
		err = c.AllReduce(nccl.BufferOf(s), b, nccl.Sum, cuda.Stream{})
		wantArgErr(t, err, "AllReduce", "send", "freed")
		if !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("%v does not match ErrClosed", err)
		}
	})
}

func TestUnknownDataType(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		s := collSlice(t, 0, f32s(4)...)
		raw := nccl.RawBuffer(s.Ptr(), 4, nccl.DataType(42), 0)
		wantArgErr(t, c.AllReduce(raw, raw, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "unknown data type 42")
	})
}

func TestInvalidReductionOperator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.AllReduce(b, b, nccl.RedOp(-1), cuda.Stream{}), "AllReduce", "op", "not a reduction operator")
		// A value in the custom range that no CustomOp of c has.
		wantArgErr(t, c.ReduceScatter(b, b, nccl.RedOp(77), cuda.Stream{}), "ReduceScatter", "op", "not an open custom operator")
	})
}

func TestFloat8ReductionNeedsSM90(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, cuda.Float8E4M3From(1.5), cuda.Float8E4M3From(-2))
		err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "compute capability 9.0") {
			t.Errorf("fp8 AllReduce on sm_80: %v, want ErrUnsupported naming compute capability 9.0", err)
		}
		wantArgErr(t, err, "AllReduce", "op", "float8e4m3")
		// Moving fp8 data needs no sm_90.
		if err := c.AllGather(b, b, cuda.Stream{}); err != nil {
			t.Errorf("fp8 AllGather on sm_80: %v", err)
		}
		noNCCLCall(t, "ncclAllReduce")
	}, "FAKE_CUDA_CC=80")
}

// NCCL's one-rank path has no fp8 kernel for Avg or PreMulSum: the binding
// refuses them on a one-rank communicator, and lets Sum through.
func TestFloat8ScalingOpsOnOneRank(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, cuda.Float8E4M3From(1.5), cuda.Float8E4M3From(-2))
		pre, err := nccl.PreMulSum(c, cuda.Float8E4M3From(2))
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []nccl.RedOp{nccl.Avg, pre.Op()} {
			err := c.AllReduce(b, b, op, cuda.Stream{})
			if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "one-rank") {
				t.Errorf("fp8 AllReduce %v on one rank: %v, want ErrUnsupported naming the one-rank path", op, err)
			}
			wantArgErr(t, err, "AllReduce", "op", "float8e4m3")
		}
		noNCCLCall(t, "ncclAllReduce")
		if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("fp8 Sum on one rank: %v", err)
		}
	})
}

func TestFloat8NeedsNCCL2243(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22304}, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, cuda.Float8E5M2From(1.5))
		err := c.AllGather(b, b, cuda.Stream{})
		var ue *nccl.UnsupportedError
		if !errors.As(err, &ue) || ue.Since != 22403 {
			t.Errorf("fp8 on NCCL 2.23.4: %v, want an UnsupportedError since 2.24.3", err)
		}
	})
}

func TestStreamOfOtherDevice(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		s, err := cuda.Device(1).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		wantArgErr(t, c.AllReduce(b, b, nccl.Sum, s), "AllReduce", "stream", "cuda:1", "cuda:0")
		wantArgErr(t, c.Recv(b, 0, s), "Recv", "stream", "cuda:1")
		noNCCLCall(t, "ncclAllReduce")
	})
}

func TestStreamDestroyed(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		s.Destroy()
		err = c.AllReduce(b, b, nccl.Sum, s)
		wantArgErr(t, err, "AllReduce", "stream", "destroyed")
		if !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("%v does not match cuda.ErrClosed", err)
		}
	})
}

func TestOverlapNotInPlace(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		s := collSlice(t, 0, f32s(8)...)
		a, _ := s.Sub(0, 4)
		b, _ := s.Sub(1, 5)
		wantArgErr(t, c.AllReduce(nccl.BufferOf(a), nccl.BufferOf(b), nccl.Sum, cuda.Stream{}), "AllReduce", "recv", "overlaps", "recv == send")
		noNCCLCall(t, "ncclAllReduce")
	})
}

func TestAllToAllInPlaceRejected(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(8)...)
		wantArgErr(t, c.AllToAll(b, b, cuda.Stream{}), "AllToAll", "recv", "does not work in place")
	})
}

// In place, AllGather's send must be this rank's block of recv and
// ReduceScatter's recv this rank's block of send; any other overlap is
// refused.
func TestInPlaceLayouts(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 1, 0)
		s := cuda.Stream{}
		all := collSlice(t, 0, f32s(8)...)
		block0, _ := all.Sub(0, 4)
		block1, _ := all.Sub(4, 8)
		if err := c.AllGather(nccl.BufferOf(block1), nccl.BufferOf(all), s); err != nil {
			t.Errorf("AllGather in place at rank 1's block: %v", err)
		}
		wantArgErr(t, c.AllGather(nccl.BufferOf(block0), nccl.BufferOf(all), s), "AllGather", "recv", "send == recv + rank*send.Bytes()")
		if err := c.ReduceScatter(nccl.BufferOf(all), nccl.BufferOf(block1), nccl.Sum, s); err != nil {
			t.Errorf("ReduceScatter in place at rank 1's block: %v", err)
		}
		wantArgErr(t, c.ReduceScatter(nccl.BufferOf(all), nccl.BufferOf(block0), nccl.Sum, s), "ReduceScatter", "recv", "recv == send + rank*recv.Bytes()")
		if err := c.Gather(nccl.BufferOf(block1), nccl.BufferOf(all), 1, s); err != nil {
			t.Errorf("Gather in place on the root: %v", err)
		}
		wantArgErr(t, c.Gather(nccl.BufferOf(block0), nccl.BufferOf(all), 1, s), "Gather", "recv", "in-place layout")
		if err := c.Scatter(nccl.BufferOf(all), nccl.BufferOf(block1), 1, s); err != nil {
			t.Errorf("Scatter in place on the root: %v", err)
		}
		wantArgErr(t, c.Scatter(nccl.BufferOf(all), nccl.BufferOf(block0), 1, s), "Scatter", "recv", "in-place layout")
	})
}

func TestNewCollectivesNeedNCCL2283(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		s := cuda.Stream{}
		for name, err := range map[string]error{
			"ncclAlltoAll": c.AllToAll(b, collBuf(t, 0, f32s(4)...), s),
			"ncclGather":   c.Gather(b, collBuf(t, 0, f32s(4)...), 0, s),
			"ncclScatter":  c.Scatter(b, collBuf(t, 0, f32s(4)...), 0, s),
		} {
			var ue *nccl.UnsupportedError
			if !errors.As(err, &ue) || ue.Feature != name || ue.Since != 22803 {
				t.Errorf("%s on NCCL 2.27.3: %v, want an UnsupportedError since 2.28.3", name, err)
			}
		}
	})
}

func TestCollectiveOnNullAndDestroyedCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		b := collBuf(t, 0, f32s(4)...)
		var null nccl.Communicator
		if err := null.AllReduce(b, b, nccl.Sum, cuda.Stream{}); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("AllReduce on the null communicator: %v", err)
		}
		var nilc *nccl.Communicator
		if err := nilc.Send(b, 0, cuda.Stream{}); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("Send on a nil *Communicator: %v", err)
		}
		c := collComm(t, 1, 0, 0)
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("AllReduce after Destroy: %v, want ErrClosed", err)
		}
	})
}

// With one rank the fake moves the data, so results are checkable.
func TestOneRankDataMovement(t *testing.T) {
	collFake(t, oneRankDataMovement)
}

// TestOneRankDataMovementAfterPageableUpload: the driver's cuMemcpyHtoD from
// pageable memory may return before the data is on the device, and the
// communicator's stream (non-blocking) does not wait for it. On an H200
// (NCCL 2.30.7, eight GPU test processes beside it) an in-place Reduce read
// zeros for inputs uploaded with cuda.AllocFrom. Under the fake's rule
// (FAKE_CUDA_PAGEABLE_H2D) the collectives must still read what AllocFrom
// uploaded.
func TestOneRankDataMovementAfterPageableUpload(t *testing.T) {
	collFake(t, oneRankDataMovement, "FAKE_CUDA_PAGEABLE_H2D=1")
}

func oneRankDataMovement(t *testing.T) {
	c := collComm(t, 1, 0, 0)
	s, err := cuda.Device(0).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	in := f32s(6)
	send := collSlice(t, 0, in...)
	check := func(what string, got cuda.Slice[float32], want []float32) {
		t.Helper()
		h, err := got.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if h[i] != want[i] {
				t.Fatalf("%s: %v, want %v", what, h, want)
			}
		}
	}
	calls := []struct {
		name string
		call func(send, recv nccl.Buffer) error
	}{
		{"AllReduce", func(a, b nccl.Buffer) error { return c.AllReduce(a, b, nccl.Sum, s) }},
		{"Broadcast", func(a, b nccl.Buffer) error { return c.Broadcast(a, b, 0, s) }},
		{"Reduce", func(a, b nccl.Buffer) error { return c.Reduce(a, b, nccl.Min, 0, s) }},
		{"AllGather", func(a, b nccl.Buffer) error { return c.AllGather(a, b, s) }},
		{"ReduceScatter", func(a, b nccl.Buffer) error { return c.ReduceScatter(a, b, nccl.Avg, s) }},
		{"AllToAll", func(a, b nccl.Buffer) error { return c.AllToAll(a, b, s) }},
		{"Gather", func(a, b nccl.Buffer) error { return c.Gather(a, b, 0, s) }},
		{"Scatter", func(a, b nccl.Buffer) error { return c.Scatter(a, b, 0, s) }},
	}
	for _, k := range calls {
		recv := collSlice(t, 0, make([]float32, 6)...)
		if err := k.call(nccl.BufferOf(send), nccl.BufferOf(recv)); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		check(k.name, recv, in)
	}
}

// A blocking communicator whose collectives NCCL reports in progress (as
// real NCCL does for several ranks) waits for each; a non-blocking one
// returns at once and waits before its next call.
func TestCollectiveInProgress(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		for i := range 3 {
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("blocking AllReduce %d: %v", i, err)
			}
			if err := c.AsyncError(); err != nil {
				t.Fatalf("after blocking AllReduce %d: %v, want idle", i, err)
			}
		}
		id, _ := nccl.NewUniqueID()
		nb, err := nccl.Init(2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		defer nb.Destroy()
		if err := nb.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := nb.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("non-blocking AllReduce %d: %v", i, err)
			}
		}
		if err := nb.AsyncError(); !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("AsyncError right after a non-blocking AllReduce: %v, want ErrInProgress", err)
		}
		if err := nb.Wait(t.Context()); err != nil {
			t.Errorf("Wait: %v", err)
		}
	}, "FAKE_NCCL_COLL_POLLS=3")
}

// An NCCL failure comes back as an *Error naming the operation, with
// NCCL's last error as detail.
func TestCollectiveNCCLError(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Op != "AllReduce" || ne.Code != nccl.SystemError || !errors.Is(err, nccl.ErrSystem) {
			t.Fatalf("AllReduce with ncclSystemError: %v", err)
		}
	}, "FAKE_NCCL_FAIL=ncclAllReduce=2")
}

// The hot path: no heap allocation and one cgo call per AllReduce.
func TestAllReduceNoAllocations(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(1)...)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		call := func() {
			if err := c.AllReduce(b, b, nccl.Sum, s); err != nil {
				t.Fatal(err)
			}
		}
		wantHotPath(t, "AllReduce", call)
		// A custom operator and the default stream stay on the hot path.
		op, err := nccl.PreMulSum(c, float32(2))
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		if n := testing.AllocsPerRun(1000, func() { c.AllReduce(b, b, op.Op(), cuda.Stream{}) }); n != 0 {
			t.Errorf("AllReduce with a CustomOp: %v allocations per call, want 0", n)
		}
	})
}

// Sizes that would wrap: a count whose byte size or end overflows is
// refused before anything compares addresses (overlapping buffers would
// otherwise look disjoint).
func TestBufferSizeOverflow(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		p := collBuf(t, 0, f32s(4)...).Ptr
		s := nccl.RawBuffer(p, 1<<61, nccl.Float64, 0)
		r := nccl.RawBuffer(p+8, 1<<61, nccl.Float64, 0)
		wantArgErr(t, c.AllReduce(s, r, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "larger than any device memory")
		wantArgErr(t, c.AllToAll(s, s, cuda.Stream{}), "AllToAll", "send", "larger than any device memory")
		wantArgErr(t, c.Send(nccl.RawBuffer(p, 1<<62, nccl.Float64, 0), 0, cuda.Stream{}), "Send", "buf", "larger than any device memory")
		top := nccl.RawBuffer(^uintptr(0)-15, 4, nccl.Float64, 0)
		wantArgErr(t, c.AllReduce(top, top, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "past the end of the address space")
		// The largest size allowed passes the size checks, and the memory
		// check then finds it runs past its allocation (NCCL never sees it).
		big := nccl.RawBuffer(p, 1<<56, nccl.Int8, 0)
		wantArgErr(t, c.AllReduce(big, big, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "run past the end of its allocation")
		if n := faketest.Calls(t, "ncclAllReduce"); n != 0 {
			t.Errorf("ncclAllReduce called %d times, want 0", n)
		}
		wantArgErr(t, c.AllReduce(nccl.RawBuffer(p, 1<<56+1, nccl.Int8, 0), big, nccl.Sum, cuda.Stream{}), "AllReduce", "send", "2^56")
	})
}

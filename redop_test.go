package nccl_test

import (
	"errors"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// With one rank the fake's PreMulSum multiplies float32 and float64 data.
func TestPreMulSumHostScalar(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		op, err := nccl.PreMulSum(c, 2.5)
		if err != nil {
			t.Fatalf("PreMulSum: %v", err)
		}
		if op.Type() != nccl.Float64 || op.Op().Builtin() {
			t.Errorf("Type %v, Op %v: want float64 and a custom value", op.Type(), op.Op())
		}
		send := collBuf(t, 0, 1.0, -2, 0.5)
		recv := collSlice(t, 0, 0.0, 0, 0)
		if err := c.AllReduce(send, nccl.BufferOf(recv), op.Op(), cuda.Stream{}); err != nil {
			t.Fatalf("AllReduce: %v", err)
		}
		got, _ := recv.ToHost()
		if want := []float64{2.5, -5, 1.25}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("got %v, want %v", got, want)
		}
		if err := op.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func TestPreMulSumDeviceScalar(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		scalar := collSlice(t, 0, float32(-3))
		op, err := nccl.PreMulSumDevice(c, scalar)
		if err != nil {
			t.Fatalf("PreMulSumDevice: %v", err)
		}
		defer op.Close()
		buf := collSlice(t, 0, float32(1), 2)
		if err := c.ReduceScatter(nccl.BufferOf(buf), nccl.BufferOf(buf), op.Op(), cuda.Stream{}); err != nil {
			t.Fatalf("ReduceScatter: %v", err)
		}
		if got, _ := buf.ToHost(); got[0] != -3 || got[1] != -6 {
			t.Errorf("got %v, want [-3 -6]", got)
		}
	})
}

func TestPreMulSumDeviceScalarChecked(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		_, err := nccl.PreMulSumDevice(c, collSlice(t, 0, float32(1), 2))
		wantArgErr(t, err, "PreMulSumDevice", "scalar", "2 elements")
		_, err = nccl.PreMulSumDevice(c, collSlice(t, 1, float32(1)))
		wantArgErr(t, err, "PreMulSumDevice", "scalar", "cuda:1")
		_, err = nccl.PreMulSumDevice(c, cuda.Slice[float32]{})
		wantArgErr(t, err, "PreMulSumDevice", "scalar")
		noNCCLCall(t, "ncclRedOpCreatePreMulSum")
	})
}

func TestCustomOpTypeMismatch(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		op, err := nccl.PreMulSum(c, int32(3))
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.AllReduce(b, b, op.Op(), cuda.Stream{}), "AllReduce", "op", "int32", "float32")
		noNCCLCall(t, "ncclAllReduce")
	})
}

func TestCustomOpOfAnotherCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		a := collComm(t, 1, 0, 0)
		b := collComm(t, 1, 0, 0)
		op, err := nccl.PreMulSum(a, float32(3))
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		buf := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, b.AllReduce(buf, buf, op.Op(), cuda.Stream{}), "AllReduce", "op", "not an open custom operator")
		if err := a.AllReduce(buf, buf, op.Op(), cuda.Stream{}); err != nil {
			t.Errorf("on its own communicator: %v", err)
		}
	})
}

func TestCustomOpClosed(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		op, err := nccl.PreMulSum(c, float32(3))
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := op.Close(); err != nil {
			t.Errorf("second Close: %v, want nil", err)
		}
		if n := faketest.Calls(t, "ncclRedOpDestroy"); n != 1 {
			t.Errorf("ncclRedOpDestroy called %d times, want 1", n)
		}
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.Reduce(b, b, op.Op(), 0, cuda.Stream{}), "Reduce", "op", "not an open custom operator")
	})
}

// Destroy closes the operators still open; Close after it is a no-op.
func TestCustomOpsDestroyedWithCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		var ops []*nccl.CustomOp
		for _, v := range []float32{1.5, 2, 4} {
			op, err := nccl.PreMulSum(c, v)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
		}
		if err := ops[1].Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if n := faketest.Calls(t, "ncclRedOpDestroy"); n != 3 {
			t.Errorf("ncclRedOpDestroy called %d times, want 3", n)
		}
		for i, op := range ops {
			if err := op.Close(); err != nil {
				t.Errorf("Close of operator %d after Destroy: %v", i, err)
			}
		}
	})
}

func TestPreMulSumOnNullCommunicator(t *testing.T) {
	collFake(t, func(t *testing.T) {
		var c nccl.Communicator
		if _, err := nccl.PreMulSum(&c, 1.0); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("PreMulSum on the null communicator: %v", err)
		}
		if _, err := nccl.PreMulSum[float32](nil, 1); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("PreMulSum on nil: %v", err)
		}
	})
}

func TestPreMulSumFloat8NeedsNCCL2243(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22304}, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		if _, err := nccl.PreMulSum(c, cuda.Float8E4M3From(2)); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("fp8 PreMulSum on NCCL 2.23.4: %v, want ErrUnsupported", err)
		}
	})
}

// A nil *CustomOp neither panics nor passes for a built-in operator.
func TestNilCustomOp(t *testing.T) {
	var o *nccl.CustomOp
	if err := o.Close(); err != nil {
		t.Errorf("Close on nil: %v", err)
	}
	if o.Op().Builtin() || o.Type().Valid() || o.String() != "nccl.CustomOp(nil)" {
		t.Errorf("nil CustomOp: Op %v, Type %v, String %q", o.Op(), o.Type(), o.String())
	}
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.AllReduce(b, b, o.Op(), cuda.Stream{}), "AllReduce", "op")
	})
}

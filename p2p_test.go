package nccl_test

import (
	"runtime"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

func TestPeerOutOfRange(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		for _, peer := range []int{-1, 2} {
			wantArgErr(t, c.Send(b, peer, cuda.Stream{}), "Send", "peer", "not in [0, 2)")
			wantArgErr(t, c.Recv(b, peer, cuda.Stream{}), "Recv", "peer", "not in [0, 2)")
		}
		noNCCLCall(t, "ncclSend")
		noNCCLCall(t, "ncclRecv")
	})
}

func TestRecvBufferChecked(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		wantArgErr(t, c.Recv(nccl.Buffer{}, 1, cuda.Stream{}), "Recv", "buf", "null device address")
		wantArgErr(t, c.Send(collBuf(t, 1, f32s(2)...), 1, cuda.Stream{}), "Send", "buf", "device 1")
	})
}

// A send or receive to this rank outside a group could only hang in NCCL:
// refused before the call.
func TestSelfSendRecvOutsideGroup(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 1, 0)
		b := collBuf(t, 0, f32s(4)...)
		wantArgErr(t, c.Send(b, 1, cuda.Stream{}), "Send", "peer", "1 is this rank", "matching Recv")
		wantArgErr(t, c.Recv(b, 1, cuda.Stream{}), "Recv", "peer", "1 is this rank", "matching Send")
		noNCCLCall(t, "ncclSend")
		noNCCLCall(t, "ncclRecv")
	})
}

// A rank sends to itself inside a group; the fake matches the pair at the
// group's end and copies the data.
func TestSelfSendRecvInGroup(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		in := []int64{-7, 3, 1 << 40, 12}
		send := collBuf(t, 0, in...)
		recvSlice := collSlice(t, 0, make([]int64, 4)...)
		err := nccl.Group(func() error {
			if err := c.Send(send, 0, cuda.Stream{}); err != nil {
				return err
			}
			return c.Recv(nccl.BufferOf(recvSlice), 0, cuda.Stream{})
		})
		if err != nil {
			t.Fatalf("Group: %v", err)
		}
		got, err := recvSlice.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if got[i] != in[i] {
				t.Fatalf("received %v, want %v", got, in)
			}
		}
	})
}

// The hot path of Send: no heap allocation, one cgo call.
func TestSendNoAllocations(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		b := collBuf(t, 0, f32s(1)...)
		call := func() {
			if err := c.Send(b, 1, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		call()
		if n := testing.AllocsPerRun(1000, call); n != 0 {
			t.Errorf("Send: %v allocations per call, want 0", n)
		}
		recv := func() {
			if err := c.Recv(b, 1, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(1000, recv); n != 0 {
			t.Errorf("Recv: %v allocations per call, want 0", n)
		}
		for name, f := range map[string]func(){"Send": call, "Recv": recv} {
			before := runtime.NumCgoCall()
			for range 100 {
				f()
			}
			if d := runtime.NumCgoCall() - before; d != 100 {
				t.Errorf("%d cgo calls for 100 %s calls, want 100", d, name)
			}
		}
	})
}

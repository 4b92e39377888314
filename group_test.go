package nccl_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Groups nest; only the outermost end reaches NCCL's launch, and the depth
// is back to 0 afterwards.
func TestGroupNests(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := nccl.Group(func() error {
			if d := capi.GroupDepth(); d != 1 {
				t.Errorf("depth %d inside Group", d)
			}
			return nccl.Group(func() error {
				if d := capi.GroupDepth(); d != 2 {
					t.Errorf("depth %d inside the nested Group", d)
				}
				return c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
			})
		})
		if err != nil {
			t.Fatalf("Group: %v", err)
		}
		if d := capi.GroupDepth(); d != 0 {
			t.Errorf("depth %d after Group", d)
		}
		if n := faketest.Calls(t, "ncclGroupEnd"); n != 2 {
			t.Errorf("%d ncclGroupEnd calls, want 2", n)
		}
	})
}

// fn's error and the group end's error are joined; the group is ended.
func TestGroupJoinsErrors(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		mine := errors.New("mine")
		err := nccl.Group(func() error {
			c.Send(b, 0, cuda.Stream{}) // to self, never received: the group's end fails
			return mine
		})
		if !errors.Is(err, mine) || !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("Group = %v, want both fn's error and the end's ncclInvalidUsage", err)
		}
		if d := capi.GroupDepth(); d != 0 {
			t.Errorf("depth %d after a failed Group", d)
		}
	})
}

// A panic in fn ends the group and goes on.
func TestGroupEndsOnPanic(t *testing.T) {
	collFake(t, func(t *testing.T) {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want boom", r)
				}
			}()
			nccl.Group(func() error { panic("boom") })
		}()
		if d := capi.GroupDepth(); d != 0 {
			t.Errorf("depth %d after a panic in Group", d)
		}
		if n := faketest.Calls(t, "ncclGroupEnd"); n != 1 {
			t.Errorf("%d ncclGroupEnd calls, want 1", n)
		}
	})
}

func TestGroupStartEnd(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		if err := nccl.GroupStart(); err != nil {
			t.Fatal(err)
		}
		sendErr := c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
		if err := nccl.GroupEnd(); err != nil || sendErr != nil {
			t.Fatalf("AllReduce %v, GroupEnd %v", sendErr, err)
		}
		if err := nccl.GroupEnd(); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("GroupEnd without a group: %v, want ErrInvalidUsage", err)
		}
	})
}

// The fake simulates with an estimate of 42.5: GroupSimulate reads it as
// microseconds.
func TestGroupSimulateEstimate(t *testing.T) {
	collFake(t, func(t *testing.T) {
		est, err := nccl.GroupSimulate(func() error { return nil })
		if err != nil || est != 42500*time.Nanosecond {
			t.Errorf("GroupSimulate = %v, %v; want 42.5µs", est, err)
		}
		if d := capi.GroupDepth(); d != 0 {
			t.Errorf("depth %d after GroupSimulate", d)
		}
	})
}

// Collectives of a non-blocking communicator inside GroupSimulate are
// refused, not issued: NCCL would run them, not simulate them.
func TestGroupSimulateRefusesWork(t *testing.T) {
	collFake(t, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.InitContext(context.Background(), 1, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Destroy()
		send := collBuf(t, 0, f32s(4)...)
		recv := collSlice(t, 0, make([]float32, 4)...)
		est, err := nccl.GroupSimulate(func() error {
			c.AllReduce(send, nccl.BufferOf(recv), nccl.Sum, cuda.Stream{}) // error dropped on purpose
			return nil
		})
		if !errors.Is(err, nccl.ErrUnsupported) || est != 0 || !strings.Contains(err.Error(), "would run") {
			t.Errorf("GroupSimulate(AllReduce) = %v, %v; want 0 and ErrUnsupported", est, err)
		}
		noNCCLCall(t, "ncclAllReduce")
		if got, _ := recv.ToHost(); got[1] != 0 {
			t.Errorf("recv changed: %v", got)
		}
		// After the simulation the thread is a normal one again.
		if err := c.AllReduce(send, nccl.BufferOf(recv), nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("AllReduce after GroupSimulate: %v", err)
		}
	})
}

// A simulation on one goroutine does not affect the others.
func TestGroupSimulateOtherGoroutines(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		inside, release := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := nccl.GroupSimulate(func() error {
				close(inside)
				<-release
				return nil
			})
			done <- err
		}()
		<-inside
		for range 100 {
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce beside a simulation: %v", err)
			}
		}
		close(release)
		if err := <-done; err != nil {
			t.Errorf("GroupSimulate: %v", err)
		}
	})
}

func TestGroupSimulateMustBeOutermost(t *testing.T) {
	collFake(t, func(t *testing.T) {
		var simErr error
		err := nccl.Group(func() error {
			_, simErr = nccl.GroupSimulate(func() error { return nil })
			return nil
		})
		if err != nil || !errors.Is(simErr, nccl.ErrInvalidUsage) {
			t.Errorf("GroupSimulate inside Group = %v (Group %v), want ErrInvalidUsage", simErr, err)
		}
	})
}

func TestGroupSimulateNeedsNCCL2223(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 21901}, func(t *testing.T) {
		_, err := nccl.GroupSimulate(func() error { return nil })
		var ue *nccl.UnsupportedError
		if !errors.As(err, &ue) || ue.Feature != "ncclGroupSimulateEnd" || ue.Since != 22203 {
			t.Errorf("GroupSimulate on NCCL 2.19.1: %v, want an UnsupportedError since 2.22.3", err)
		}
	})
}

// A nil function is an argument error, not a panic (nothing is loaded).
func TestGroupNilFunction(t *testing.T) {
	wantArg(t, "Group(nil)", nccl.Group(nil), "fn")
	wantArg(t, "GroupContext(nil)", nccl.GroupContext(context.Background(), nil), "fn")
	est, err := nccl.GroupSimulate(nil)
	wantArg(t, "GroupSimulate(nil)", err, "fn")
	if est != 0 {
		t.Errorf("GroupSimulate(nil) estimated %v", est)
	}
}

package nccl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// seqObserver remembers what it was told.
type seqObserver struct {
	ops    []nccl.QueuedOp
	groups int // GroupEnded calls
}

func (o *seqObserver) Queued(op nccl.QueuedOp) { o.ops = append(o.ops, op) }
func (o *seqObserver) GroupEnded()             { o.groups++ }

// Every queued operation is recorded in the flight recorder, in order, and
// told to the hook with its sequence number; a dump names them.
func TestFlightRecorderRecordsCalls(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "world"})
		defer c.Destroy()
		buf := collBuf(t, 0, f32s(4)...)
		obs := &seqObserver{}
		if _, err := addHook(c, obs); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Broadcast(buf, buf, 0, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		// A refused call is not recorded.
		if err := c.AllReduce(buf, nccl.Buffer{}, nccl.Sum, cuda.Stream{}); err == nil {
			t.Fatal("AllReduce into no buffer accepted")
		}
		tc, err := c.TraceComm()
		if err != nil {
			t.Fatal(err)
		}
		if tc.Seq() != 4 || tc.Info().Name != "world" || tc.Info().Size != 1 {
			t.Fatalf("trace comm: seq %d, info %+v; want 4 collectives of \"world\"", tc.Seq(), tc.Info())
		}
		if len(obs.ops) != 4 {
			t.Fatalf("observer told of %d operations, want 4", len(obs.ops))
		}
		for i, op := range obs.ops {
			want := trace.AllReduce
			if i == 3 {
				want = trace.Broadcast
			}
			if op.Ref.Seq() != uint64(i+1) || op.Event.Op != want || op.Event.Count != 4 || op.Comm != c || op.Event.Watched {
				t.Errorf("operation %d: seq %d, %+v", i, op.Ref.Seq(), op.Event)
			}
		}
		var out bytes.Buffer
		if err := trace.Default().Dump(&out, "test"); err != nil {
			t.Fatal(err)
		}
		var d struct {
			Entries []struct {
				Op    string `json:"op"`
				Seq   uint64 `json:"seq"`
				Dtype string `json:"dtype"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Entries) != 4 || d.Entries[0].Op != "AllReduce" || d.Entries[3].Op != "Broadcast" || d.Entries[0].Dtype != "float32" {
			t.Fatalf("dump entries %+v", d.Entries)
		}
	})
}

// After AbortCause, every call says the communicator was aborted and why.
func TestAbortCause(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		cause := errors.New("watchdog: AllReduce #7 did not complete in 10s")
		if err := c.AbortCause(cause); err != nil {
			t.Fatal(err)
		}
		buf := collBuf(t, 0, f32s(4)...)
		err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{})
		var se *nccl.StateError
		if !errors.Is(err, cause) || !errors.Is(err, nccl.ErrClosed) || !errors.As(err, &se) || !strings.Contains(err.Error(), "AllReduce #7") {
			t.Fatalf("AllReduce after AbortCause: %v; want a StateError wrapping the cause and ErrClosed", err)
		}
		if err := c.AbortCause(errors.New("second")); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("second AbortCause: %v, want ErrClosed", err)
		}
		if _, err := c.NRanks(); !errors.Is(err, cause) {
			t.Errorf("NRanks: %v; the first cause stays", err)
		}
	})
}

func TestBlockingAccessor(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		b := fakeComm(t, 1, 0, nil)
		nb := fakeComm(t, 1, 0, &nccl.Config{Blocking: nccl.Ptr(false)})
		if !b.Blocking() || nb.Blocking() {
			t.Errorf("Blocking: %v for a blocking communicator, %v for a non-blocking one", b.Blocking(), nb.Blocking())
		}
		b.Destroy()
		nb.Destroy()
		var null nccl.Communicator
		if b.Blocking() || null.Blocking() {
			t.Error("a destroyed or null communicator says it is blocking")
		}
	})
}

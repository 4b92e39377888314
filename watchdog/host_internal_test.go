package watchdog

import (
	"errors"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// A host-side operation (a Split, as the root package reports one: on no
// stream) is followed by its flight-recorder entry: one the call path
// completes is done, one it never completes times out, blamed by name.
func TestHostOperationTimesOut(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.Init(1, 0, id, &nccl.Config{CommName: "world"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Destroy()
		const timeout = 40 * time.Millisecond
		w, err := Watch(c, &Options{Timeout: timeout, PollInterval: 2 * time.Millisecond, NoDump: true, Action: ActionNone})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		tc, err := c.TraceComm()
		if err != nil {
			t.Fatal(err)
		}
		queue := func(op trace.Op) trace.Ref {
			ev := trace.Event{Op: op}
			ref := tc.Record(ev)
			w.queued(&nccl.QueuedOp{Comm: c, Trace: tc, Ref: ref, Event: ev})
			return ref
		}
		done := queue(trace.Finalize)
		tc.Start(done)
		tc.Complete(done)
		for p := w.Stats().Polls; w.Stats().Polls < p+2*uint64(timeout/(2*time.Millisecond)); {
			time.Sleep(time.Millisecond)
		}
		if w.Err() != nil || w.Stats().Pending != 0 {
			t.Fatalf("a completed Finalize: Err %v, stats %+v", w.Err(), w.Stats())
		}
		hung := queue(trace.Split)
		tc.Start(hung)
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a Split never completed was not reported")
		}
		var te *TimeoutError
		if err := w.Err(); !errors.As(err, &te) || te.Op.Op != trace.Split || te.Op.Seq != hung.Seq() || te.Waited < timeout {
			t.Errorf("Err = %v; want a timeout of Split #%d", err, hung.Seq())
		}
	})
}

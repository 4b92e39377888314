package perf

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nccl4go/nccl/internal/faketest"
)

// waitBench is a one-rank bench of an all-reduce of 4096 bytes on the
// fake libraries, ready to issue and wait.
func waitBench(t *testing.T, ctx context.Context, timeout time.Duration) *bench {
	t.Helper()
	w, err := LocalWorld(context.Background(), []int{0}, CommConfig("all_reduce"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	o := DefaultOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.Check, o.Timeout = 4096, 4096, 0, timeout
	coll, _ := lookupTest(o.Test)
	b := &bench{ctx: ctx, opts: o, coll: coll, world: w, comms: w.Comms}
	t.Cleanup(b.free)
	if _, err := b.setup(); err != nil {
		t.Fatal(err)
	}
	b.dt, _ = lookupType("float")
	b.op, _ = lookupOp("sum")
	b.root = -1
	b.setSize(4096)
	return b
}

// TestSyncStreamsFewCgoCalls: waiting for a long operation (the fake
// stream stays busy for 20000 queries) polls inside C, a few cgo calls per
// millisecond, not three per poll (cuStreamQuery, ncclCommGetAsyncError,
// and the yield) as the Go loop did: with ranks pinned one core each,
// every return to Go let the runtime's threads compete with NCCL's proxy
// thread (1.08-1.29x slower than nccl-tests on an H200).
func TestSyncStreamsFewCgoCalls(t *testing.T) {
	const polls = 20000
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_STREAM_BUSY=" + strconv.Itoa(polls)}}, func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b := waitBench(t, context.Background(), 0)
		if err := b.startColl(false, 0); err != nil {
			t.Fatal(err)
		}
		before := runtime.NumCgoCall()
		if err := b.syncStreams(); err != nil {
			t.Fatal(err)
		}
		calls := runtime.NumCgoCall() - before
		t.Logf("%d cgo calls for a wait of %d polls", calls, polls)
		if calls > polls/10 {
			t.Errorf("%d cgo calls for a wait of %d polls: the wait polls from Go", calls, polls)
		}
		// Waited out: the stream is done now.
		if ok, err := b.ranks[0].stream.Done(); !ok || err != nil {
			t.Errorf("after the wait: stream done %v, %v", ok, err)
		}
	})
}

// TestSyncStreamsCancel: a wait that would never end (the stream busy for
// 2^40 queries) still ends with the context's error soon after the
// cancellation, and with ErrTimeout at the -z timeout.
func TestSyncStreamsCancel(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_STREAM_BUSY=1099511627776"}}, func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t.Run("context", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b := waitBench(t, ctx, 0)
			if err := b.startColl(false, 0); err != nil {
				t.Fatal(err)
			}
			var cancelled time.Time
			go func() {
				time.Sleep(20 * time.Millisecond)
				cancelled = time.Now()
				cancel()
			}()
			err := b.syncStreams()
			late := time.Since(cancelled)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			t.Logf("returned %v after the cancellation", late)
			if late > 2*time.Second {
				t.Errorf("returned %v after the cancellation", late)
			}
		})
		t.Run("timeout", func(t *testing.T) {
			b := waitBench(t, context.Background(), 30*time.Millisecond)
			if err := b.startColl(false, 0); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			err := b.syncStreams()
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err %v, want ErrTimeout", err)
			}
			if d := time.Since(t0); d < 30*time.Millisecond || d > 5*time.Second {
				t.Errorf("timed out after %v, want 30ms", d)
			}
		})
	})
}

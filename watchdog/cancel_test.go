package watchdog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
	"github.com/nccl4go/nccl/watchdog"
)

// Cancelled contexts during init, split and a collective loop, on the fake
// NCCL whose operations in progress never complete (FAKE_NCCL_HANG): each
// wait returns within its deadline plus a second, with an error matching
// both the context's and ErrInProgress, and leaves no communicator alive
// (faketest.Main checks).

var nonBlocking = &nccl.Config{Blocking: nccl.Ptr(false)}

// within fails unless took is at most d plus a second.
func within(t *testing.T, what string, took, d time.Duration) {
	t.Helper()
	if took > d+time.Second {
		t.Errorf("%s returned after %v, deadline %v", what, took, d)
	}
}

func TestCancelInit(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=1"}}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		const d = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		c, err := nccl.InitContext(ctx, 4, 1, id, nonBlocking)
		within(t, "InitContext", time.Since(start), d)
		if c != nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nccl.ErrInProgress) {
			t.Errorf("InitContext = %v, %v; want DeadlineExceeded and ErrInProgress", c, err)
		}
	})
}

func TestCancelSplit(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_HANG=ncclCommSplit"}}, func(t *testing.T) {
		c := oneRank(t, nonBlocking)
		defer c.Abort()
		ctx, cancel := context.WithCancel(context.Background())
		const d = 200 * time.Millisecond
		time.AfterFunc(d, cancel)
		start := time.Now()
		child, err := c.SplitContext(ctx, 0, 0, nonBlocking)
		within(t, "SplitContext", time.Since(start), d)
		if child != nil && child.IsValid() || !errors.Is(err, context.Canceled) {
			t.Errorf("SplitContext = %v, %v; want context.Canceled", child, err)
		}
	})
}

// A loop of collectives on a non-blocking communicator whose all-reduce
// stays in progress: a cancelled Wait ends it; and, with no context at
// all, the watchdog does (the operation was never launched).
func TestCancelCollectiveLoop(t *testing.T) {
	env := faketest.Env{Extra: []string{"FAKE_NCCL_HANG=ncclAllReduce", "FAKE_NCCL_COLL_POLLS=0"}}
	t.Run("context", func(t *testing.T) {
		faketest.Run(t, env, func(t *testing.T) {
			c := oneRank(t, nonBlocking)
			defer c.Abort()
			buf := floats(t, 16)
			ctx, cancel := context.WithCancel(context.Background())
			const d = 200 * time.Millisecond
			time.AfterFunc(d, cancel)
			start := time.Now()
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				if err = c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err == nil {
					err = c.Wait(ctx)
				}
			}
			within(t, "the loop", time.Since(start), d)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("loop ended with %v, want context.Canceled", err)
			}
		})
	})
	t.Run("watchdog", func(t *testing.T) {
		faketest.Run(t, env, func(t *testing.T) {
			c := oneRank(t, nonBlocking)
			buf := floats(t, 16)
			const timeout = 200 * time.Millisecond
			w, err := watchdog.Watch(c, &watchdog.Options{Timeout: timeout, PollInterval: 5 * time.Millisecond, NoDump: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			start := time.Now()
			for i := 0; i < 100 && err == nil; i++ {
				if err = c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err == nil {
					err = c.Wait(context.Background())
				}
			}
			within(t, "the loop", time.Since(start), timeout)
			var te *watchdog.TimeoutError
			if !errors.As(err, &te) || te.Op.Op != trace.AllReduce || te.Op.Seq != 1 || !te.NotLaunched {
				t.Fatalf("loop ended with %v, want the watchdog's TimeoutError on AllReduce #1, not launched", err)
			}
			if !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("loop error %v does not match ErrClosed", err)
			}
		})
	})
}

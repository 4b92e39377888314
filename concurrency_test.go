package nccl_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Several goroutines call collectives, custom operators and queries on one
// communicator at once (run with -race); NCCL sees the calls one at a time.
func TestConcurrentCalls(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 8 {
			b := collBuf(t, 0, f32s(8)...)
			half := collSlice(t, 0, f32s(4)...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					var err error
					switch (g + i) % 5 {
					case 0:
						err = c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
					case 1:
						err = c.ReduceScatter(b, nccl.BufferOf(half), nccl.Max, cuda.Stream{})
					case 2:
						err = c.Send(b, 1, cuda.Stream{})
					case 3:
						var op *nccl.CustomOp
						if op, err = nccl.PreMulSum(c, float32(g)); err == nil {
							err = errors.Join(c.AllReduce(b, b, op.Op(), cuda.Stream{}), op.Close())
						}
					case 4:
						_, err = c.NRanks()
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}, "FAKE_NCCL_COLL_POLLS=2") // every collective goes in progress: calls wait for each other
}

// Abort goes through while other goroutines are calling, and while calls
// wait for an operation that never completes; every call then fails with
// an error wrapping ErrClosed, and none hangs.
func TestAbortDuringCalls(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		var wg sync.WaitGroup
		var ok, closed atomic.Int64
		start := make(chan struct{})
		for range 8 {
			b := collBuf(t, 0, f32s(8)...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
					switch {
					case err == nil:
						ok.Add(1)
						continue
					case errors.Is(err, nccl.ErrClosed):
						closed.Add(1)
					default:
						t.Errorf("AllReduce during Abort: %v", err)
					}
					return
				}
			}()
		}
		close(start)
		time.Sleep(20 * time.Millisecond) // the calls now wait on the hanging operation
		aborted := make(chan error)
		go func() { aborted <- c.Abort() }()
		select {
		case err := <-aborted:
			if err != nil {
				t.Errorf("Abort: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Abort blocked by the calls in flight")
		}
		wg.Wait()
		if closed.Load() != 8 {
			t.Errorf("%d of 8 goroutines saw ErrClosed (%d calls succeeded)", closed.Load(), ok.Load())
		}
	}, "FAKE_NCCL_COLL_POLLS=1", "FAKE_NCCL_HANG=ncclAllReduce")
}

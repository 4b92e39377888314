package perf

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/cudabridge"
)

// waitSlice is how long one C call of syncStreams polls before it returns
// to Go, which then checks the context and the timeout: cancellation is
// seen within about this long.
const waitSlice = time.Millisecond

// waitState holds what syncStreams hands the C loop, one entry per rank,
// built once per run (setup).
type waitState struct {
	ctxs, streams, comms []uintptr
	done                 []byte
}

func (w *waitState) init(ranks []*rankState) error {
	n := len(ranks)
	w.ctxs, w.streams, w.comms, w.done = make([]uintptr, n), make([]uintptr, n), make([]uintptr, n), make([]byte, n)
	for i, r := range ranks {
		ctx, err := cudabridge.PrimaryContext(int(r.dev))
		if err != nil {
			return &RunError{"stream", err}
		}
		w.ctxs[i], w.streams[i], w.comms[i] = ctx, r.stream.Handle(), r.comm.Handle()
	}
	return nil
}

// syncStreams waits until every rank's stream is done (nccl-tests'
// testStreamSynchronize), watching the communicators' asynchronous errors,
// the timeout and the context. The polling itself (cuStreamQuery,
// ncclCommGetAsyncError, sched_yield) runs in C, one cgo call per
// waitSlice: with ranks pinned one core each, NCCL's proxy thread shares
// the core, and every return to Go would let the Go runtime's threads run
// there too.
func (b *bench) syncStreams() error {
	w := &b.wait
	clear(w.done)
	var start time.Time // of the wait, read once a slice has passed
	for {
		kind, i, code := capi.WaitStreams(w.ctxs, w.streams, w.comms, w.done, int64(waitSlice))
		switch kind {
		case capi.WaitDone:
			return nil
		case capi.WaitSlice:
		case capi.WaitNCCL:
			// The binding's typed error, with NCCL's last-error detail.
			err := b.ranks[i].comm.AsyncError()
			if err == nil || errors.Is(err, nccl.ErrInProgress) {
				err = fmt.Errorf("nccl: ncclCommGetAsyncError: result %d", code)
			}
			b.abort()
			return err
		default: // capi.WaitCUDA, or nothing loaded
			if _, err := b.ranks[min(i, len(b.ranks)-1)].stream.Done(); err != nil {
				return err
			}
			return fmt.Errorf("cuda: cuStreamQuery: CUresult %d", code)
		}
		if start.IsZero() {
			start = time.Now().Add(-waitSlice)
		}
		if t := b.opts.Timeout; t > 0 && time.Since(start) > t {
			b.abort()
			host, _ := os.Hostname()
			return fmt.Errorf("%w (%v) on %s", ErrTimeout, t, host)
		}
		if err := b.ctx.Err(); err != nil {
			b.abort()
			return err
		}
	}
}

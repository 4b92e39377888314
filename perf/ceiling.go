package perf

import (
	"time"

	"github.com/nccl4go/nccl/cuda"
)

// Ceiling is the bandwidth limit of the path a row measured, where known,
// measured in the same run: so that a reader sees a result's ratio to its
// limit, not a bare number ("is this number expected?").
type Ceiling struct {
	// Path says what was measured, e.g. "device memcpy".
	Path string `json:"path"`
	// AlgBW is the limit in the units of the row's algbw (GB/s of the bytes
	// the collective moves per rank): the same bytes moved that way, timed
	// as the collective is (Iters operations, host clock, stream wait).
	AlgBW float64 `json:"alg_bw"`
}

// ceiling measures the limit of the current size's path: on a job of one
// rank NCCL copies the send buffer into the receive buffer on the GPU
// (out of place), so the limit is a device-to-device memcpy of the same
// bytes. Unknown (nil) for several ranks.
func (b *bench) ceiling() (*Ceiling, error) {
	if b.nranks != 1 || len(b.ranks) != 1 {
		return nil, nil
	}
	bytes := b.cnt.param * b.elt * uint64(b.coll.algFactor(1))
	if bytes == 0 {
		return nil, nil
	}
	r := b.ranks[0]
	dst := cuda.Wrap[uint8](r.recv, int(bytes), r.dev)
	src := cuda.Wrap[uint8](r.send, int(bytes), r.dev)
	if err := dst.CopyFromAsync(src, r.stream); err != nil { // warm-up
		return nil, err
	}
	if err := b.syncStreams(); err != nil {
		return nil, err
	}
	n := b.opts.Iters * b.opts.AggIters
	start := time.Now()
	for range n {
		if err := dst.CopyFromAsync(src, r.stream); err != nil {
			return nil, err
		}
	}
	if err := b.syncStreams(); err != nil {
		return nil, err
	}
	sec := time.Since(start).Seconds() / float64(n)
	return &Ceiling{Path: "device memcpy", AlgBW: float64(bytes) / 1e9 / sec}, nil
}

//go:build race

package trace

import "sync/atomic"

// put writes one word of a slot the caller holds. Under the race detector
// the stores are atomic, so that the seqlock's deliberate overlap of writer
// and reader is not reported.
func put(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

//go:build race

package trace

import "sync/atomic"

// put writes one word of a slot the caller holds, and store one of the
// writer's counters. Under the race detector they are atomic on every
// architecture (see word_atomic.go for why that is correct), so that the
// seqlock's deliberate overlap of writer and reader is not reported.
func put(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// store writes one of the writer's counters (see put).
func store(a *atomic.Uint64, v uint64) { a.Store(v) }

// raceWriter increments a plain counter on every Record, so that the race
// detector reports Records on one [Comm] that overlap (Record has a single
// writer: see Comm).
func raceWriter(n *int) { *n++ }

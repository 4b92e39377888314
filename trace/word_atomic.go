//go:build !amd64 && !race

package trace

import "sync/atomic"

// put writes one word of a slot the caller holds, and store one of the
// writer's counters, with atomic stores: on architectures with a weaker
// memory order than amd64's, arm64 in particular, a plain store after the
// store that marks a slot busy may become visible before it, and a reader
// could then accept a torn entry (see word_plain.go). With atomic stores the
// Go memory model proves the seqlock: all atomic operations behave as if in
// one sequentially consistent order, so if a reader's load of some word
// returned a writer's store W, the writer's busy-marking store, which
// precedes W in its goroutine, precedes the reader's second load of the
// version, and that load returns the busy version or a later one: never the
// even version the reader's first load saw (versions grow with the ticket,
// so none repeats). Likewise a dump that sees an entry also sees the counter
// stored before it. On arm64 an atomic store is STLR, which orders every
// earlier load and store before it.
func put(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// store writes one of the writer's counters (see put).
func store(a *atomic.Uint64, v uint64) { a.Store(v) }

// raceWriter counts Record's calls in race builds only (word_race.go).
func raceWriter(*int) {}

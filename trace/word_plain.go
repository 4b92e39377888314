//go:build amd64 && !race

package trace

import (
	"sync/atomic"
	"unsafe"
)

// put writes one word of a slot the caller holds, and store one of the
// writer's counters, with plain stores. Each seqlock (see slot) is correct
// only if a writer's stores become visible in program order: the store that
// marks the slot busy before the words, the words before the store that
// releases it, and a counter before the entry it counts. On amd64 the
// hardware keeps that order (x86-TSO: a core's stores are seen in program
// order, its loads are not reordered with older loads, and a locked
// instruction such as the update part's compare-and-swap orders everything),
// and the Go compiler emits every store in program order (stores are
// threaded through one memory state, and atomic operations are barriers to
// it), so a reader that loads the version, the words and the version again,
// all with atomic (plain MOV) loads, and sees the same even version twice,
// saw no word of a later writer. Go's memory model does not give this for
// plain stores (it is a data race in its terms); word_atomic.go, used on
// every other architecture and by the race detector, makes the same writes
// with atomic stores, where the memory model proves it (see there). A plain
// store costs a cycle where an atomic store on amd64 is an XCHG, a full
// barrier of 10 to 20 ns: Record makes nine.
func put(p *uint64, v uint64) { *p = v }

// store writes one of the writer's counters (see put).
func store(a *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(a)) = v }

// raceWriter counts Record's calls in race builds only (word_race.go).
func raceWriter(*int) {}

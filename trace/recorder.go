package trace

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nccl4go/nccl/internal/spin"
)

// BufferEnv names the environment variable that sizes the default
// recorder's rings, in entries per communicator: unset, [DefaultEntries]; 0,
// recording is off; a value that is not a number keeps DefaultEntries (and
// the dump's note says why).
const BufferEnv = "NCCL4GO_TRACE_BUFFER"

// DefaultEntries is the ring size the default recorder takes unless
// [BufferEnv] says otherwise: the last 2048 operations of each communicator
// (PyTorch's 2000, rounded up to a power of two; 256 KiB per communicator).
const DefaultEntries = 2048

// MaxEntries is the largest ring a recorder keeps per communicator (128 MiB
// of entries).
const MaxEntries = 1 << 20

// minEntries is the smallest ring: a non-zero size is rounded up to it.
const minEntries = 16

// Recorder is a flight recorder: for every communicator registered with it,
// a fixed ring of its most recent operations. Each communicator has a ring
// of its own, so a busy communicator never pushes a quiet one's history out
// (a hang usually sits on the quiet one) and communicators used from
// different goroutines share no cache line. Recording an operation costs a
// few plain stores and a read of a coarse clock word: no atomic
// read-modify-write, no lock, no allocation, so it stays on in production;
// a dump (Snapshot, [Dump], DumpFile) copies the rings without stopping the
// recording.
//
// A Recorder is safe for concurrent use. Its zero value is usable: it
// records nothing until SetSize (as New(0)), and registers communicators
// and dumps as any other. Entries recorded while the rings are resized may
// be lost.
type Recorder struct {
	mu       sync.Mutex // guards the fields below and resizing
	size     int        // entries per ring; 0 off
	comms    map[uint32]*Comm
	nextComm uint32
	rank     int    // process rank for dumps, when rankSet
	rankSet  bool   // SetRank was called
	envNote  string // a problem with BufferEnv, reported in dumps

	requests seenRequests // dump requests made or handled (coordinate.go)
}

// ring is a power-of-two array of slots.
type ring struct {
	slots []slot
	mask  uint64
}

// A slot holds one entry, in two parts with a seqlock each.
//
// The record part (ver, w) is written by Record alone: the communicator's
// single writer (see [Comm.Record]). ver is 0 while empty, else
// (ticket+1)<<1 | busy. The writer stores ver with busy set, then the
// words, then ver without busy; a reader loads ver, every word and ver
// again, and keeps the copy only when both loads agree and busy is clear.
//
// The update part (upd, u) is written by Start, Complete and CompleteIn,
// which may run on other goroutines (the watchdog's) and concurrently with
// each other, so they take it with a compare-and-swap. upd is
// (ticket+1)<<updShift | state<<2 | gpu<<1 | busy: the entry whose progress
// the words hold. Record never touches it: a reader uses the update part
// only when its ticket is the record part's, so a new entry starts
// "enqueued" without clearing anything.
//
// How the stores are ordered, and why readers never accept a torn copy, is
// said beside put (word_*.go).
type slot struct {
	ver atomic.Uint64
	w   [recWords]uint64
	upd atomic.Uint64
	u   [updWords]uint64
	_   [16 - 2 - recWords - updWords]uint64 // 128 bytes: two cache lines
}

const (
	recWords = 6
	updWords = 3
	updShift = 8
)

// Word indexes of the record part.
const (
	wSeq    = iota // sequence number in its class
	wMeta          // peer<<32 | op<<24 | dtype<<16 | redop<<8 | flags
	wCount         // elements
	wStream        // stream handle
	wGroup         // group id
	wEnq           // clock reading at Record
)

// Word indexes of the update part.
const (
	uStart = iota // clock reading at Start (0 none)
	uEnd          // clock reading at Complete
	uGPU          // duration measured by the caller, nanoseconds (updGPU)
)

// Flag bits of wMeta's low byte.
const flagWatched = 0x4

// Bits of upd below its ticket.
const (
	updBusy      = 0x1
	updGPU       = 0x2  // uGPU holds the duration
	updState     = 0xc  // State << 2
	updWatched   = 0x10 // Watch: followed (besides Event.Watched)
	updUnwatched = 0x20 // Unwatch: no longer followed
)

// New returns a recorder whose rings hold entries entries per communicator
// (rounded up to a power of two, at least 16, at most [MaxEntries]); entries
// <= 0 gives a recorder that records nothing until SetSize.
func New(entries int) *Recorder {
	r := &Recorder{}
	r.SetSize(entries)
	return r
}

var defaultRecorder = sync.OnceValue(func() *Recorder {
	v, set := os.LookupEnv(BufferEnv)
	n, note := entriesFromEnv(v, set)
	r := New(n)
	r.envNote = note
	return r
})

// Default is the process's recorder, the one the nccl package records into.
// It is on by default, with [DefaultEntries] per communicator, as PyTorch's
// flight recorder is: recording costs a few nanoseconds per call
// (BenchmarkRecord). The environment variable NCCL4GO_TRACE_BUFFER sizes it
// (entries; 0 turns it off), and SetSize changes it later. Sequence numbers
// count even while it is off.
func Default() *Recorder { return defaultRecorder() }

// entriesFromEnv reads [BufferEnv]'s value; unset or bad, it is
// [DefaultEntries] (a bad value says why).
func entriesFromEnv(v string, set bool) (int, string) {
	if !set {
		return DefaultEntries, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return DefaultEntries, fmt.Sprintf("%s=%q is not a number of entries (0 or more); using %d", BufferEnv, v, DefaultEntries)
	}
	return n, ""
}

// roundSize is the ring size SetSize makes of n: 0 for n <= 0, else the
// next power of two within [16, MaxEntries].
func roundSize(n int) int {
	if n <= 0 {
		return 0
	}
	n = min(max(n, minEntries), MaxEntries)
	size := minEntries
	for size < n {
		size <<= 1
	}
	return size
}

// SetSize resizes every communicator's ring to hold entries entries
// (rounded as [New] rounds them), keeping the newest entries that fit;
// entries <= 0 stops recording and drops the rings. Sequence numbers keep
// counting while recording is off, so they stay aligned across ranks.
func (r *Recorder) SetSize(entries int) {
	size := roundSize(entries)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.size = size
	for _, c := range r.comms {
		c.resize(size)
	}
}

// resize replaces c's ring by one of size entries, copying the newest
// entries that fit (r.mu held, so resizes do not overlap).
func (c *Comm) resize(size int) {
	old := c.ring.Load()
	if size == 0 {
		c.ring.Store(nil)
		return
	}
	if old != nil && len(old.slots) == size {
		return
	}
	nr := &ring{slots: make([]slot, size), mask: uint64(size - 1)}
	if old != nil {
		head := c.head.Load()
		var e rawEntry
		for i := range old.slots {
			if !old.slots[i].read(&e) {
				continue
			}
			if t := e.ticket; t+uint64(size) >= head {
				s := &nr.slots[t&nr.mask]
				if cur := s.ver.Load(); cur>>1 > t+1 {
					continue
				}
				s.w = e.w
				s.ver.Store(e.ver)
				s.u = e.u
				s.upd.Store(e.upd)
			}
		}
	}
	c.ring.Store(nr)
}

// Size is the number of entries each communicator's ring holds; 0 when
// recording is off.
func (r *Recorder) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
}

// Enabled reports whether the recorder records (its size is not 0).
func (r *Recorder) Enabled() bool { return r.Size() != 0 }

// SetRank sets the job-wide rank of this process, which dumps carry and
// DumpFile puts in the file's name. Unset, it is read from the launcher's
// environment (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
// SLURM_PROCID), else the rank of the first communicator registered.
func (r *Recorder) SetRank(rank int) {
	r.mu.Lock()
	r.rank, r.rankSet = rank, true
	r.mu.Unlock()
}

// processRankLocked is the rank dumps carry; r.mu held.
func (r *Recorder) processRankLocked() int {
	if r.rankSet {
		return r.rank
	}
	for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"} {
		if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n >= 0 {
			return n
		}
	}
	first := uint32(0)
	rank := -1
	for id, c := range r.comms {
		if first == 0 || id < first {
			first, rank = id, c.info.Rank
		}
	}
	return rank
}

// CommInfo is what a communicator's entries share, registered once.
type CommInfo struct {
	// Name labels the communicator for people: "world", "tp0", ...
	Name string
	// Hash identifies the communicator: the same on every rank of it,
	// different from the process's other communicators. The analyzer groups
	// the dumps of all ranks by it.
	Hash uint64
	// Rank is this process's rank in the communicator, Size its number of
	// ranks.
	Rank, Size int
	// Device is the CUDA device ordinal the communicator uses; -1 unknown.
	Device int
}

// Comm is a communicator registered with a recorder: it hands out the
// communicator's sequence numbers and records its operations.
//
// Record has one writer at a time: calls of Record on one Comm must not
// overlap (the nccl package makes them under the communicator's lock), which
// is what lets it record with plain stores; the race detector reports
// overlapping calls. Everything else (Start, Complete, CompleteIn, Lookup,
// Seq, Close, and dumps) is safe for concurrent use, with Record too. The
// zero Comm is usable: it belongs to no recorder and counts sequence
// numbers only.
type Comm struct {
	rec  *Recorder
	id   uint32
	info CommInfo
	ring atomic.Pointer[ring] // nil when recording is off

	_ [64]byte // keep the writer's counters off the read-only fields' line
	// Written by Record alone (put), read atomically by anyone. Record
	// stores the counter of an entry before the entry, and a dump copies
	// the entries before it reads the counters, so a dump never holds an
	// entry beyond its counters.
	head    atomic.Uint64 // tickets handed out: the next entry's ticket
	coll    atomic.Uint64
	p2p     atomic.Uint64
	writers int // race builds: a plain counter that reports overlapping Records

	lastStarted   atomic.Uint64 // highest collective sequence started
	lastCompleted atomic.Uint64 // highest collective sequence completed
	closedAt      atomic.Uint64 // order of Close among the recorder's communicators; 0 open
	_             [64]byte
}

// RegisterComm registers a communicator and returns the handle that records
// its operations. Registration takes a lock and allocates; do it when the
// communicator is created. The information stays in dumps after Close while
// the ring still holds entries of the communicator.
func (r *Recorder) RegisterComm(info CommInfo) *Comm {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.comms == nil {
		r.comms = map[uint32]*Comm{}
	}
	r.pruneLocked()
	r.nextComm++
	if r.nextComm == 0 {
		r.nextComm = 1
	}
	c := &Comm{rec: r, id: r.nextComm, info: info}
	c.resize(r.size)
	r.comms[c.id] = c
	return c
}

// MaxClosedComms is how many closed communicators (and their rings) a
// recorder keeps for dumps; beyond it, the longest closed are forgotten.
const MaxClosedComms = 16

// pruneLocked forgets the oldest closed communicators beyond
// [MaxClosedComms]; r.mu held.
func (r *Recorder) pruneLocked() {
	var closed []*Comm
	for _, c := range r.comms {
		if c.closedAt.Load() != 0 {
			closed = append(closed, c)
		}
	}
	if len(closed) < MaxClosedComms {
		return
	}
	slices.SortFunc(closed, func(a, b *Comm) int { return cmp.Compare(a.closedAt.Load(), b.closedAt.Load()) })
	for _, c := range closed[:len(closed)-MaxClosedComms+1] {
		delete(r.comms, c.id)
	}
}

// Info is the information the communicator was registered with.
func (c *Comm) Info() CommInfo { return c.info }

// Recorder is the recorder c records into (nil for the zero [Comm]).
func (c *Comm) Recorder() *Recorder { return c.rec }

// Close marks the communicator closed (destroyed or aborted): dumps say so.
// The recorder keeps the [MaxClosedComms] most recently closed communicators
// (and their rings) for dumps. Recording after Close still works.
// Idempotent.
func (c *Comm) Close() {
	c.closedAt.CompareAndSwap(0, closeOrder.Add(1))
}

// closeOrder orders Close calls.
var closeOrder atomic.Uint64

// Event is one operation as the caller hands it to Record: small integers
// and handles only, so recording copies no strings.
type Event struct {
	Op       Op
	DataType DataType // meaningful when Op.HasData
	RedOp    RedOp    // meaningful when Op.HasRedOp
	// Watched says the watchdog follows this operation and will call Start
	// and Complete; only then does the dump report a state and duration.
	Watched bool
	// Peer is the root of a rooted collective ([Op.HasRoot]) or the peer of a
	// point-to-point operation ([Op.HasPeer]); ignored otherwise.
	Peer int32
	// Count is the count argument of the NCCL call, in elements.
	Count uint64
	// Stream is the CUDA stream handle the operation was enqueued on.
	Stream uintptr
	// Group identifies the group (ncclGroupStart ... ncclGroupEnd) the
	// operation was enqueued in; 0 for none.
	Group uint64
}

// Ref refers to a recorded entry, for Start and Complete. The zero Ref
// refers to nothing; a Ref whose entry the ring has since overwritten refers
// to nothing either, and updating it does nothing.
type Ref struct {
	ticket uint64 // entry's ticket + 1; 0 none
	seq    uint64
}

// Seq is the sequence number Record gave the operation: its place among the
// communicator's collectives (1, 2, ...) or among its point-to-point
// operations; 0 for a local operation.
func (r Ref) Seq() uint64 { return r.seq }

// Recorded reports whether the operation went into the ring (false when
// the recorder is off).
func (r Ref) Recorded() bool { return r.ticket != 0 }

// Record notes that the operation e was enqueued on c now, and returns its
// entry's reference and sequence number. Calls on one [Comm] must not overlap
// (see Comm). It allocates nothing, takes no lock and makes no atomic
// read-modify-write: the time is the recorder's coarse clock (see
// [ClockEnv]), a word a ticker refreshes every millisecond while recording
// goes on. With the recorder off it only counts the sequence number.
func (c *Comm) Record(e Event) Ref {
	raceWriter(&c.writers)
	var seq uint64
	switch e.Op.info().class {
	case Collective:
		seq = c.coll.Load() + 1
		store(&c.coll, seq)
	case PointToPoint:
		seq = c.p2p.Load() + 1
		store(&c.p2p, seq)
	}
	rg := c.ring.Load()
	if rg == nil {
		return Ref{seq: seq}
	}
	t := c.head.Load()
	store(&c.head, t+1)
	now := clk.read()
	s := &rg.slots[t&rg.mask]
	v := (t + 1) << 1
	store(&s.ver, v|1)
	flags := uint64(0)
	if e.Watched {
		flags = flagWatched
	}
	put(&s.w[wSeq], seq)
	put(&s.w[wMeta], uint64(uint32(e.Peer))<<32|uint64(e.Op)<<24|uint64(e.DataType)<<16|uint64(e.RedOp)<<8|flags)
	put(&s.w[wCount], e.Count)
	put(&s.w[wStream], uint64(e.Stream))
	put(&s.w[wGroup], e.Group)
	put(&s.w[wEnq], uint64(now))
	store(&s.ver, v)
	return Ref{ticket: t + 1, seq: seq}
}

// Watch marks the entry ref refers to as watched: the caller (the
// watchdog, or any follower of operations) will call Start and Complete
// for it, so the dump reports its state and duration; an entry nobody
// watches reads only "enqueued". It does nothing for a zero or overwritten
// ref. Safe for concurrent use; it allocates nothing.
func (c *Comm) Watch(ref Ref) { c.setWatched(ref, updWatched) }

// Unwatch undoes Watch (and [Event.Watched]): the caller stops following the
// entry before it completed (a watchdog stopped while the operation was in
// flight), so the dump reads it "enqueued" (state unknown) rather than
// started and never completed, which the analyzer would call stuck.
func (c *Comm) Unwatch(ref Ref) { c.setWatched(ref, updUnwatched) }

// setWatched marks ref's entry with bit (updWatched or updUnwatched) in
// its update part, as update takes it.
func (c *Comm) setWatched(ref Ref, bit uint64) {
	s := c.slotOf(ref)
	if s == nil {
		return
	}
	u, ok := s.lockUpdate(ref.ticket)
	if !ok {
		return
	}
	store(&s.upd, ref.ticket<<updShift|u&(updState|updGPU)|bit)
}

// slotOf is the slot of ref's entry, or nil for a zero ref, a
// communicator without a ring, or an entry the ring has overwritten.
func (c *Comm) slotOf(ref Ref) *slot {
	if ref.ticket == 0 {
		return nil
	}
	rg := c.ring.Load()
	if rg == nil {
		return nil
	}
	s := &rg.slots[(ref.ticket-1)&rg.mask]
	if v := s.ver.Load(); v>>1 > ref.ticket {
		return nil // overwritten
	}
	return s
}

// lockUpdate takes s's update part for the entry of ticket (setting
// updBusy; the caller releases it by storing upd) and returns the update
// word as it was: the entry's progress so far, or 0 when the words held
// an older entry's progress, which it clears. ok is false, and nothing is
// taken, when a newer entry's progress is there.
func (s *slot) lockUpdate(ticket uint64) (u uint64, ok bool) {
	var bo spin.Backoff
	for spins := 0; ; spins++ {
		u = s.upd.Load()
		if u>>updShift > ticket {
			return 0, false // a newer entry's progress
		}
		if u&updBusy == 0 && s.upd.CompareAndSwap(u, u|updBusy) {
			break
		}
		if spins > 8 {
			bo.Wait()
		}
	}
	if u>>updShift != ticket {
		// The words hold an older entry's progress: start afresh.
		put(&s.u[uStart], 0)
		put(&s.u[uEnd], 0)
		put(&s.u[uGPU], 0)
		return 0, true
	}
	return u, true
}

// Start notes that the GPU began the operation ref refers to (for the
// watchdog). It does nothing for a zero or overwritten ref.
func (c *Comm) Start(ref Ref) {
	c.update(ref, Started, 0, false)
}

// Complete notes that the GPU finished the operation ref refers to; its
// duration is the time from Start (or from Record, when Start was not
// called) to now, on the recorder's clock (to about a millisecond with the
// default coarse clock: see [ClockEnv]).
func (c *Comm) Complete(ref Ref) {
	c.update(ref, Completed, 0, false)
}

// CompleteRange completes every entry from first to last: the operations
// c recorded consecutively between them (first and last included), as
// Complete does for one. Entries the ring has overwritten are skipped; it
// does nothing when last was recorded before first or the refs are zero.
// The watchdog completes a run of operations that share one CUDA event
// with it.
func (c *Comm) CompleteRange(first, last Ref) { c.eachInRange(first, last, c.Complete) }

// UnwatchRange undoes Watch for every entry from first to last (see
// CompleteRange).
func (c *Comm) UnwatchRange(first, last Ref) { c.eachInRange(first, last, c.Unwatch) }

// eachInRange calls f with the [Ref] of each entry still in the ring from
// first to last (by ticket).
func (c *Comm) eachInRange(first, last Ref, f func(Ref)) {
	if first.ticket == 0 || last.ticket < first.ticket {
		return
	}
	f(first)
	if last.ticket == first.ticket {
		return
	}
	rg := c.ring.Load()
	if rg == nil {
		return
	}
	var e rawEntry
	for t := first.ticket + 1; t < last.ticket; t++ {
		s := &rg.slots[(t-1)&rg.mask]
		if s.readRecord(&e) && e.ticket+1 == t {
			f(Ref{ticket: t, seq: e.w[wSeq]})
		}
	}
	f(last)
}

// CompleteIn notes that the operation ref refers to finished after running
// for d, as measured by the caller (for example between two CUDA events).
func (c *Comm) CompleteIn(ref Ref, d time.Duration) {
	c.update(ref, Completed, d, true)
}

// update moves ref's entry to state st. The counters go first, so that a
// dump, which copies the entries before it reads the counters, never shows
// a state beyond them.
func (c *Comm) update(ref Ref, st State, d time.Duration, gpu bool) {
	s := c.slotOf(ref)
	if s == nil {
		return
	}
	// The meta word says whether the entry is a collective; it is read
	// under the record part's seqlock.
	var e rawEntry
	if s.readRecord(&e) && e.ticket+1 == ref.ticket && e.op().Class() == Collective {
		switch st {
		case Started:
			storeMax(&c.lastStarted, ref.seq)
		case Completed:
			storeMax(&c.lastStarted, ref.seq)
			storeMax(&c.lastCompleted, ref.seq)
		}
	}
	now := clk.read()
	u, ok := s.lockUpdate(ref.ticket)
	if !ok {
		return
	}
	cur := State(u & updState >> 2) // Enqueued for an entry without progress (u 0)
	next := ref.ticket<<updShift | uint64(max(cur, st))<<2 | u&(updGPU|updWatched|updUnwatched)
	switch {
	case st == Started && cur < Started:
		put(&s.u[uStart], uint64(now))
	case st == Completed && cur < Completed:
		put(&s.u[uEnd], uint64(now))
		if gpu {
			put(&s.u[uGPU], uint64(d))
			next |= updGPU
		}
	}
	store(&s.upd, next) // releases the update part (see put)
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if cur >= v || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// State is the state of the entry ref refers to; ok is false for a zero
// ref or an entry the ring has overwritten. The watchdog follows host-side
// operations ([Split], [Finalize], ...) by it.
func (c *Comm) State(ref Ref) (st State, ok bool) {
	s := c.slotOf(ref)
	var e rawEntry
	if s == nil || !s.read(&e) || e.ticket+1 != ref.ticket {
		return 0, false
	}
	return e.state(), true
}

// Lookup finds the newest entry of c with sequence number seq in the given
// class ([Collective] or [PointToPoint]), for callers that kept (comm, seq)
// rather than the [Ref]. It scans the ring, so it is for slow paths.
func (c *Comm) Lookup(class Class, seq uint64) (Ref, bool) {
	rg := c.ring.Load()
	if rg == nil || class == Local {
		return Ref{}, false
	}
	var e rawEntry
	best := Ref{}
	for i := range rg.slots {
		if !rg.slots[i].readRecord(&e) || e.w[wSeq] != seq || e.op().Class() != class {
			continue
		}
		if e.ticket+1 > best.ticket {
			best = Ref{ticket: e.ticket + 1, seq: seq}
		}
	}
	return best, best.ticket != 0
}

// Seq is the sequence number of c's last collective (0 before the first).
func (c *Comm) Seq() uint64 { return c.coll.Load() }

// P2PSeq is the sequence number of c's last point-to-point operation.
func (c *Comm) P2PSeq() uint64 { return c.p2p.Load() }

// rawEntry is a consistent copy of a slot: its record part, and its update
// part when that belongs to the same entry (else upd is 0: enqueued).
type rawEntry struct {
	ver    uint64
	ticket uint64
	w      [recWords]uint64
	upd    uint64
	u      [updWords]uint64
}

func (e *rawEntry) op() Op             { return Op(e.w[wMeta] >> 24) }
func (e *rawEntry) dataType() DataType { return DataType(e.w[wMeta] >> 16) }
func (e *rawEntry) redOp() RedOp       { return RedOp(e.w[wMeta] >> 8) }
func (e *rawEntry) peer() int          { return int(int32(uint32(e.w[wMeta] >> 32))) }
func (e *rawEntry) state() State       { return State(e.upd & updState >> 2) }
func (e *rawEntry) watched() bool {
	return (e.w[wMeta]&flagWatched != 0 || e.upd&updWatched != 0) && e.upd&updUnwatched == 0
}
func (e *rawEntry) gpu() bool { return e.upd&updGPU != 0 }

// read copies the slot into e and reports whether it holds a whole entry.
// It retries while a writer holds the slot, a bounded number of times.
func (s *slot) read(e *rawEntry) bool {
	if !s.readRecord(e) {
		return false
	}
	e.upd, e.u = 0, [updWords]uint64{}
	for range 100 {
		u1 := s.upd.Load()
		if u1>>updShift != e.ticket+1 {
			return true // no progress recorded for this entry
		}
		if u1&updBusy != 0 {
			spin.Yield()
			continue
		}
		var u [updWords]uint64
		for i := range u {
			u[i] = atomic.LoadUint64(&s.u[i])
		}
		if s.upd.Load() == u1 {
			e.upd, e.u = u1, u
			return true
		}
	}
	return true // progress kept changing: report the entry as enqueued
}

// readRecord copies the slot's record part into e.
func (s *slot) readRecord(e *rawEntry) bool {
	for range 100 {
		v1 := s.ver.Load()
		if v1 == 0 {
			return false
		}
		if v1&1 != 0 {
			spin.Yield()
			continue
		}
		for i := range e.w {
			e.w[i] = atomic.LoadUint64(&s.w[i])
		}
		if s.ver.Load() == v1 {
			e.ver, e.ticket = v1, v1>>1-1
			return true
		}
	}
	return false
}

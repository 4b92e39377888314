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
// recorder's rings, in entries per communicator: unset or 0, recording is
// off; a value that is not a number turns it on with DefaultEntries.
const BufferEnv = "NCCL4GO_TRACE_BUFFER"

// DefaultEntries is the ring size the default recorder takes when turned on
// without a size (BufferEnv unreadable, or the watchdog turning it on): the
// last 2048 operations of each communicator (256 KiB each).
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
// different goroutines share no cache line. Recording costs a few atomic
// instructions and a clock read, allocates nothing and takes no lock, so it
// can stay on in production; a dump (Snapshot, Dump, DumpFile) copies the
// rings without stopping the recording.
//
// A Recorder is safe for concurrent use. Entries recorded while the rings
// are resized may be lost, and when more goroutines than a ring has entries
// record on one communicator at the same instant, an older entry yields its
// slot to a newer one.
type Recorder struct {
	clk *clock

	mu       sync.Mutex // guards the fields below and resizing
	size     int        // entries per ring; 0 off
	comms    map[uint32]*Comm
	nextComm uint32
	rank     int    // process rank for dumps; -1 unknown
	envNote  string // a problem with BufferEnv, reported in dumps

	requests seenRequests // dump requests made or handled (coordinate.go)
}

// ring is a power-of-two array of slots.
type ring struct {
	slots []slot
	mask  uint64
}

// A slot holds one entry. Its version is the seqlock that keeps readers from
// returning an entry a writer is changing: 0 when empty, else
// ticket<<verShift | updates<<1 | busy, where ticket is the entry's ticket
// plus one, updates counts state changes (mod 128) and busy is set while a
// writer holds the slot. A writer takes the slot by a compare-and-swap that
// sets busy, writes the words and stores the new even version; a reader
// loads the version, every word and the version again, all atomically, and
// keeps the copy only if both versions are equal and not busy.
type slot struct {
	ver atomic.Uint64
	w   [slotWords]uint64
}

const (
	slotWords = 15 // the slot is 128 bytes: two cache lines
	verShift  = 8
)

// Word indexes of a slot.
const (
	wSeq    = iota // sequence number in its class
	wMeta          // comm id<<32 | op<<24 | dtype<<16 | redop<<8 | flags
	wCount         // elements
	wPeer          // root or peer, as int64
	wStream        // stream handle
	wGroup         // group id
	wEnq           // clock reading at Record
	wStart         // clock reading at Start (0 none)
	wEnd           // clock reading at Complete (0 none)
	wGPU           // duration measured by the caller, nanoseconds (flagGPU)
)

// Flag bits of wMeta's low byte.
const (
	flagState   = 0x3 // State
	flagWatched = 0x4
	flagGPU     = 0x8 // wGPU holds the duration
)

// New returns a recorder whose rings hold entries entries per communicator
// (rounded up to a power of two, at least 16, at most MaxEntries); entries
// <= 0 gives a recorder that records nothing until SetSize.
func New(entries int) *Recorder {
	r := &Recorder{clk: theClock(), comms: map[uint32]*Comm{}, rank: -1}
	r.SetSize(entries)
	return r
}

var defaultRecorder = sync.OnceValue(func() *Recorder {
	n, note := entriesFromEnv(os.Getenv(BufferEnv), os.Getenv(BufferEnv) != "")
	r := New(n)
	r.envNote = note
	return r
})

// Default is the process's recorder, the one the nccl package records into.
// Its size comes from the environment variable NCCL4GO_TRACE_BUFFER
// (entries; unset or 0: off; unreadable: DefaultEntries), and can be changed
// later with SetSize. It is off by default because recording costs more than
// its budget of 30 ns a call on the GPU machines measured (60-150 ns on an
// H200's host); the watchdog package turns it on for the communicators it
// watches. Sequence numbers count even while it is off.
func Default() *Recorder { return defaultRecorder() }

// entriesFromEnv reads BufferEnv's value; a bad value keeps the default and
// says why.
func entriesFromEnv(v string, set bool) (int, string) {
	if !set {
		return 0, ""
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
// (rounded as New rounds them), keeping the newest entries that fit;
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
// entries that fit.
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
				if cur := s.ver.Load(); cur>>verShift > t+1 {
					continue
				}
				s.w = e.w
				s.ver.Store(e.ver)
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
	r.rank = rank
	r.mu.Unlock()
}

// processRank is the rank dumps carry; r.mu held.
func (r *Recorder) processRankLocked() int {
	if r.rank >= 0 {
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
// communicator's sequence numbers and records its operations. Safe for
// concurrent use.
type Comm struct {
	rec  *Recorder
	id   uint32
	info CommInfo
	ring atomic.Pointer[ring] // nil when recording is off

	_             [64]byte      // keep the counters off the read-only fields' line
	head          atomic.Uint64 // tickets handed out: the next entry's ticket
	coll          atomic.Uint64
	p2p           atomic.Uint64
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
// MaxClosedComms; r.mu held.
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

// Recorder is the recorder c records into.
func (c *Comm) Recorder() *Recorder { return c.rec }

// Close marks the communicator closed (destroyed or aborted): dumps say so.
// The recorder keeps the MaxClosedComms most recently closed communicators
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
	// Peer is the root of a rooted collective (Op.HasRoot) or the peer of a
	// point-to-point operation (Op.HasPeer); ignored otherwise.
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
// entry's reference and sequence number. It allocates nothing and takes no
// lock. With the recorder off it only counts the sequence number.
func (c *Comm) Record(e Event) Ref {
	var seq uint64
	switch e.Op.info().class {
	case Collective:
		seq = c.coll.Add(1)
	case PointToPoint:
		seq = c.p2p.Add(1)
	}
	rg := c.ring.Load()
	if rg == nil {
		return Ref{seq: seq}
	}
	t := c.head.Add(1) - 1
	var now int64
	if clk.useCounter {
		now = counter()
	} else {
		now = int64(time.Since(clk.base))
	}
	s := &rg.slots[t&rg.mask]
	v := (t + 1) << verShift
	// Fast path: the slot is free and holds an older entry.
	if old := s.ver.Load(); old&1 != 0 || old>>verShift > t || !s.ver.CompareAndSwap(old, v|1) {
		if !s.claim(t) {
			return Ref{seq: seq}
		}
	}
	flags := uint64(Enqueued)
	if e.Watched {
		flags |= flagWatched
	}
	put(&s.w[wSeq], seq)
	put(&s.w[wMeta], uint64(c.id)<<32|uint64(e.Op)<<24|uint64(e.DataType)<<16|uint64(e.RedOp)<<8|flags)
	put(&s.w[wCount], e.Count)
	put(&s.w[wPeer], uint64(int64(e.Peer)))
	put(&s.w[wStream], uint64(e.Stream))
	put(&s.w[wGroup], e.Group)
	put(&s.w[wEnq], uint64(now))
	put(&s.w[wStart], 0)
	put(&s.w[wEnd], 0)
	put(&s.w[wGPU], 0)
	s.ver.Store(v)
	return Ref{ticket: t + 1, seq: seq}
}

// claim takes the slot for the entry with ticket t, marking it busy, when
// Record's fast path could not. It fails when the slot already holds a
// newer entry.
func (s *slot) claim(t uint64) bool {
	want := (t + 1) << verShift
	var bo spin.Backoff
	for spins := 0; ; spins++ {
		v := s.ver.Load()
		if v>>verShift > t+1 {
			return false
		}
		if v&1 == 0 && s.ver.CompareAndSwap(v, want|1) {
			return true
		}
		if spins > 8 {
			bo.Wait()
		}
	}
}

// Start notes that the GPU began the operation ref refers to (for the
// watchdog). It does nothing for a zero or overwritten ref.
func (c *Comm) Start(ref Ref) {
	c.update(ref, Started, 0, false)
}

// Complete notes that the GPU finished the operation ref refers to; its
// duration is the time from Start (or from Record, when Start was not
// called) to now.
func (c *Comm) Complete(ref Ref) {
	c.update(ref, Completed, 0, false)
}

// CompleteIn notes that the operation ref refers to finished after running
// for d, as measured by the caller (for example between two CUDA events).
func (c *Comm) CompleteIn(ref Ref, d time.Duration) {
	c.update(ref, Completed, d, true)
}

// update moves ref's entry to state st.
func (c *Comm) update(ref Ref, st State, d time.Duration, gpu bool) {
	if ref.ticket == 0 {
		return
	}
	rg := c.ring.Load()
	if rg == nil {
		return
	}
	now := c.rec.clk.now()
	s := &rg.slots[(ref.ticket-1)&rg.mask]
	var v uint64
	var bo spin.Backoff
	for spins := 0; ; spins++ {
		v = s.ver.Load()
		if v>>verShift != ref.ticket {
			return
		}
		if v&1 == 0 && s.ver.CompareAndSwap(v, v|1) {
			break
		}
		if spins > 8 {
			bo.Wait()
		}
	}
	meta := s.w[wMeta]
	put(&s.w[wMeta], meta&^flagState|uint64(st))
	switch st {
	case Started:
		put(&s.w[wStart], uint64(now))
	case Completed:
		put(&s.w[wEnd], uint64(now))
		if gpu {
			put(&s.w[wMeta], meta&^flagState|uint64(st)|flagGPU)
			put(&s.w[wGPU], uint64(d))
		}
	}
	// Next version: same ticket, one more update (mod 128), not busy.
	upd := (v>>1 + 1) & (1<<(verShift-1) - 1)
	s.ver.Store(v&^(1<<verShift-1) | upd<<1)
	if Op(meta>>24).info().class == Collective {
		switch st {
		case Started:
			storeMax(&c.lastStarted, ref.seq)
		case Completed:
			storeMax(&c.lastStarted, ref.seq)
			storeMax(&c.lastCompleted, ref.seq)
		}
	}
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
// operations (Split, Finalize, ...) by it.
func (c *Comm) State(ref Ref) (st State, ok bool) {
	if ref.ticket == 0 {
		return 0, false
	}
	rg := c.ring.Load()
	if rg == nil {
		return 0, false
	}
	var e rawEntry
	if !rg.slots[(ref.ticket-1)&rg.mask].read(&e) || e.ticket+1 != ref.ticket {
		return 0, false
	}
	return e.state(), true
}

// Lookup finds the newest entry of c with sequence number seq in the given
// class (Collective or PointToPoint), for callers that kept (comm, seq)
// rather than the Ref. It scans the ring, so it is for slow paths.
func (c *Comm) Lookup(class Class, seq uint64) (Ref, bool) {
	rg := c.ring.Load()
	if rg == nil || class == Local {
		return Ref{}, false
	}
	var e rawEntry
	best := Ref{}
	for i := range rg.slots {
		if !rg.slots[i].read(&e) || e.w[wSeq] != seq || e.op().Class() != class {
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

// rawEntry is a consistent copy of a slot.
type rawEntry struct {
	ver    uint64
	ticket uint64
	w      [slotWords]uint64
}

func (e *rawEntry) commID() uint32     { return uint32(e.w[wMeta] >> 32) }
func (e *rawEntry) op() Op             { return Op(e.w[wMeta] >> 24) }
func (e *rawEntry) dataType() DataType { return DataType(e.w[wMeta] >> 16) }
func (e *rawEntry) redOp() RedOp       { return RedOp(e.w[wMeta] >> 8) }
func (e *rawEntry) state() State       { return State(e.w[wMeta] & flagState) }
func (e *rawEntry) watched() bool      { return e.w[wMeta]&flagWatched != 0 }
func (e *rawEntry) gpu() bool          { return e.w[wMeta]&flagGPU != 0 }

// read copies the slot into e and reports whether it holds a whole entry.
// It retries while a writer holds the slot, a bounded number of times.
func (s *slot) read(e *rawEntry) bool {
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
			e.ver, e.ticket = v1, v1>>verShift-1
			return true
		}
	}
	return false
}

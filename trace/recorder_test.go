package trace

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRoundSize(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-1, 0}, {0, 0}, {1, 16}, {16, 16}, {17, 32}, {2048, 2048}, {2049, 4096}, {1 << 30, MaxEntries},
	} {
		if got := roundSize(c.in); got != c.want {
			t.Errorf("roundSize(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestEntriesFromEnv(t *testing.T) {
	for _, c := range []struct {
		v       string
		set     bool
		want    int
		hasNote bool
	}{
		{"", false, DefaultEntries, false},
		{"0", true, 0, false},
		{"100", true, 100, false},
		{"lots", true, DefaultEntries, true},
		{"-5", true, DefaultEntries, true},
	} {
		n, note := entriesFromEnv(c.v, c.set)
		if n != c.want || (note != "") != c.hasNote {
			t.Errorf("entriesFromEnv(%q, %v) = %d, %q; want %d, note %v", c.v, c.set, n, note, c.want, c.hasNote)
		}
	}
}

// TestWraparound fills a ring several times over: the dump holds exactly
// the newest entries, in order, with their sequence numbers.
func TestWraparound(t *testing.T) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "w", Hash: 7, Rank: 1, Size: 2, Device: 3})
	for i := range 100 {
		c.Record(Event{Op: AllReduce, DataType: Float32, Count: uint64(i)})
	}
	d := r.Snapshot("test")
	if len(d.Entries) != 16 {
		t.Fatalf("%d entries, want 16", len(d.Entries))
	}
	for i, e := range d.Entries {
		want := uint64(85 + i)
		if e.Seq != want || e.Count != want-1 || e.ID != want-1 {
			t.Errorf("entry %d: seq %d count %d id %d, want seq %d count %d id %d", i, e.Seq, e.Count, e.ID, want, want-1, want-1)
		}
		if e.Bytes != e.Count*4 {
			t.Errorf("entry %d: bytes %d for %d float32", i, e.Bytes, e.Count)
		}
	}
	if d.Recorded != 100 || d.BufferSize != 16 {
		t.Errorf("recorded %d, buffer %d; want 100, 16", d.Recorded, d.BufferSize)
	}
	if len(d.Comms) != 1 || d.Comms[0].LastSeq != 100 || d.Comms[0].Device != 3 || d.Comms[0].Hash != 7 {
		t.Errorf("comms = %+v", d.Comms)
	}
}

// TestSequenceClasses: collectives and point-to-point operations count
// apart; local operations take no number.
func TestSequenceClasses(t *testing.T) {
	r := New(64)
	c := r.RegisterComm(CommInfo{Name: "s", Rank: 0, Size: 2})
	var got []uint64
	for _, op := range []Op{Init, AllReduce, Send, Recv, Broadcast, Abort, Send} {
		got = append(got, c.Record(Event{Op: op, Peer: 1}).Seq())
	}
	want := []uint64{1, 2, 1, 2, 3, 0, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sequence numbers %v, want %v", got, want)
		}
	}
	if c.Seq() != 3 || c.P2PSeq() != 3 {
		t.Errorf("Seq %d P2PSeq %d, want 3 3", c.Seq(), c.P2PSeq())
	}
}

// TestOff: a recorder of size 0 records nothing but counts sequence
// numbers; SetSize turns it on and off.
func TestOff(t *testing.T) {
	r := New(0)
	c := r.RegisterComm(CommInfo{Name: "off", Rank: 0, Size: 1})
	ref := c.Record(Event{Op: AllReduce})
	if ref.Recorded() || ref.Seq() != 1 || r.Enabled() {
		t.Fatalf("off: ref %+v enabled %v", ref, r.Enabled())
	}
	c.Start(ref) // no effect, no panic
	r.SetSize(32)
	if !r.Enabled() || r.Size() != 32 {
		t.Fatalf("after SetSize(32): enabled %v size %d", r.Enabled(), r.Size())
	}
	ref = c.Record(Event{Op: AllReduce})
	if !ref.Recorded() || ref.Seq() != 2 {
		t.Fatalf("on: ref %+v", ref)
	}
	if n := len(r.Snapshot("").Entries); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
	r.SetSize(0)
	if n := len(r.Snapshot("").Entries); n != 0 {
		t.Fatalf("off again: %d entries, want 0", n)
	}
}

// TestResizeKeepsNewest: shrinking keeps the newest entries, growing keeps
// all, and references stay valid while their entry is kept.
func TestResizeKeepsNewest(t *testing.T) {
	r := New(64)
	c := r.RegisterComm(CommInfo{Name: "r", Rank: 0, Size: 1})
	var refs []Ref
	for range 40 {
		refs = append(refs, c.Record(Event{Op: AllGather, Watched: true}))
	}
	r.SetSize(16)
	d := r.Snapshot("")
	if len(d.Entries) != 16 || d.Entries[0].Seq != 25 || d.Entries[15].Seq != 40 {
		t.Fatalf("after shrink: %d entries, first seq %d", len(d.Entries), d.Entries[0].Seq)
	}
	c.Complete(refs[39])
	c.Complete(refs[0]) // dropped: no effect
	r.SetSize(128)
	d = r.Snapshot("")
	if len(d.Entries) != 16 {
		t.Fatalf("after grow: %d entries, want 16", len(d.Entries))
	}
	if last := d.Entries[15]; last.State != Completed {
		t.Errorf("last entry state %v, want completed", last.State)
	}
	for _, e := range d.Entries[:15] {
		if e.State != Enqueued {
			t.Errorf("seq %d state %v, want enqueued", e.Seq, e.State)
		}
	}
}

// TestStates follows an entry through Start and Complete, and checks
// CompleteIn's duration and Lookup.
func TestStates(t *testing.T) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "st", Rank: 0, Size: 1})
	a := c.Record(Event{Op: AllReduce, Watched: true})
	b := c.Record(Event{Op: Broadcast, Peer: 0, Watched: true})
	u := c.Record(Event{Op: Reduce, Peer: 0})
	c.Start(a)
	// Complete once the recorder's clock (coarse: refreshed by a ticker)
	// has moved on by a millisecond, however late the ticker runs.
	for t0, deadline := clk.read(), time.Now().Add(10*time.Second); clk.read() < t0+int64(time.Millisecond); {
		if time.Now().After(deadline) {
			t.Fatal("the recorder's clock did not advance in 10s")
		}
		time.Sleep(time.Millisecond)
	}
	c.Complete(a)
	c.CompleteIn(b, 1500*time.Microsecond)
	d := r.Snapshot("")
	if len(d.Entries) != 3 {
		t.Fatalf("%d entries", len(d.Entries))
	}
	ea, eb, eu := d.Entries[0], d.Entries[1], d.Entries[2]
	if ea.State != Completed || ea.StartedNs == 0 || ea.CompletedNs < ea.StartedNs || ea.DurationNs < int64(time.Millisecond) || ea.DurationNs > int64(time.Second) {
		t.Errorf("a: %+v", ea)
	}
	if eb.State != Completed || eb.DurationNs != int64(1500*time.Microsecond) || eb.StartedNs != 0 {
		t.Errorf("b: %+v", eb)
	}
	if eu.Watched || eu.State != Enqueued {
		t.Errorf("u: %+v", eu)
	}
	if d.Comms[0].LastCompletedSeq != 2 || d.Comms[0].LastStartedSeq != 2 {
		t.Errorf("last started %d completed %d, want 2 2", d.Comms[0].LastStartedSeq, d.Comms[0].LastCompletedSeq)
	}
	if ref, ok := c.Lookup(Collective, 3); !ok || ref != u {
		t.Errorf("Lookup(3) = %+v, %v; want %+v", ref, ok, u)
	}
	if _, ok := c.Lookup(PointToPoint, 3); ok {
		t.Error("Lookup found a p2p entry that does not exist")
	}
	if ea.EnqueuedNs > d.TimeNs || d.TimeNs-ea.EnqueuedNs > int64(time.Minute) {
		t.Errorf("enqueued %d, dump time %d", ea.EnqueuedNs, d.TimeNs)
	}
}

// TestClosedCommsPruned: closed communicators stay in dumps up to
// MaxClosedComms; open ones always.
func TestClosedCommsPruned(t *testing.T) {
	r := New(16)
	open := r.RegisterComm(CommInfo{Name: "open", Rank: 0, Size: 1})
	for i := range MaxClosedComms + 5 {
		c := r.RegisterComm(CommInfo{Name: "closed", Hash: uint64(i), Rank: 0, Size: 1})
		c.Record(Event{Op: AllReduce})
		c.Close()
		c.Close()
	}
	r.RegisterComm(CommInfo{Name: "last", Rank: 0, Size: 1})
	d := r.Snapshot("")
	closed, sawOpen := 0, false
	for _, c := range d.Comms {
		if c.Closed {
			closed++
		}
		if c.ID == open.id {
			sawOpen = true
		}
	}
	if closed > MaxClosedComms || closed < MaxClosedComms-1 || !sawOpen {
		t.Errorf("%d closed communicators kept (max %d), open kept %v", closed, MaxClosedComms, sawOpen)
	}
}

// TestConcurrentRecordAndDump records from many goroutines while others
// dump and resize: every entry dumped is whole (its words agree with each
// other), as the race detector also checks.
func TestConcurrentRecordAndDump(t *testing.T) {
	r := New(64)
	const writers = 8
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		c := r.RegisterComm(CommInfo{Name: "c", Hash: uint64(w % 2), Rank: 0, Size: 1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); !stop.Load(); i++ {
				// Every field derives from v, so a torn entry shows.
				v := i*writers + uint64(w)
				ref := c.Record(Event{Op: AllReduce, DataType: DataType(v % 12), RedOp: RedOp(v % 5), Count: v, Stream: uintptr(v), Group: v, Watched: true})
				if i%3 == 0 {
					c.Start(ref)
					c.CompleteIn(ref, time.Duration(v))
				}
			}
		}()
	}
	// Two goroutines share one communicator, taking turns as the nccl
	// package's callers do under the communicator's lock.
	shared := r.RegisterComm(CommInfo{Name: "shared", Rank: 0, Size: 1})
	var sharedMu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				sharedMu.Lock()
				shared.Record(Event{Op: Send, Peer: 0, Count: 5, Stream: 5, Group: 5})
				sharedMu.Unlock()
			}
		}()
	}
	// At least a few dumps, however slow the machine (one dump under the
	// race detector on a loaded 2-core VM took over 300 ms).
	deadline := time.Now().Add(300 * time.Millisecond)
	dumps := 0
	for dumps < 3 || time.Now().Before(deadline) {
		d := r.Snapshot("")
		dumps++
		for _, e := range d.Entries {
			if e.Op == Send {
				if e.Count != 5 || e.Stream != 5 || e.Group != 5 {
					t.Fatalf("torn shared entry: %+v", e)
				}
				continue
			}
			v := e.Count
			if e.Stream != Handle(v) || e.Group != v || e.DataType != DataType(v%12) || e.RedOp != RedOp(v%5) {
				t.Fatalf("torn entry: %+v", e)
			}
			if e.State == Completed && e.DurationNs != int64(v) {
				t.Fatalf("torn duration: %+v", e)
			}
		}
		if dumps%10 == 0 {
			r.SetSize(16 << (dumps / 10 % 3))
		}
		if err := d.Write(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d dumps while recording", dumps)
}

// TestEnqueueTimes: entries carry their enqueue time to the millisecond
// with the coarse clock: each lies between wall-clock readings taken around
// its Record, less at most a tick and a little scheduling slack. Records
// are spread over idle gaps longer than the ticker's idle limit, so both the
// first record after a stop (a precise reading) and records while the
// ticker runs are checked. A loaded machine can delay the ticker, so a
// trial that misses is repeated; a broken clock misses every trial.
func TestEnqueueTimes(t *testing.T) {
	const slack = tickPeriod + 2*time.Millisecond
	var last string
	for trial := range 10 {
		r := New(64)
		c := r.RegisterComm(CommInfo{Name: "t", Rank: 0, Size: 1})
		type span struct{ before, after time.Time }
		var spans []span
		for i := range 40 {
			switch {
			case i == 20:
				time.Sleep(idleTicks*tickPeriod + 20*time.Millisecond) // the ticker stops
			case i%5 == 0:
				time.Sleep(3 * time.Millisecond)
			}
			b := time.Now()
			c.Record(Event{Op: AllReduce})
			spans = append(spans, span{b, time.Now()})
		}
		d := r.Snapshot("")
		if len(d.Entries) != len(spans) {
			t.Fatalf("%d entries, want %d", len(d.Entries), len(spans))
		}
		last = ""
		for i, e := range d.Entries {
			got := time.Unix(0, e.EnqueuedNs)
			if got.Before(spans[i].before.Add(-slack)) || got.After(spans[i].after.Add(time.Millisecond)) {
				last = fmt.Sprintf("trial %d: entry %d enqueued at %v, recorded between %v and %v (clock %s)",
					trial, i, got.Format("15:04:05.000000"), spans[i].before.Format("15:04:05.000000"), spans[i].after.Format("15:04:05.000000"), d.Clock)
				break
			}
		}
		if last == "" {
			return
		}
		t.Log(last)
	}
	t.Error(last)
}

// TestCoarseClockStops: the ticker refreshes the word while records come
// and ends once they stop; the next read finds it stopped and reads the
// monotonic clock.
func TestCoarseClockStops(t *testing.T) {
	c := newClock("")
	if got := c.read(); c.state.Load() != tickUsed || got <= 0 {
		t.Fatalf("first read: state %d, time %d", c.state.Load(), got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.state.Load() != tickStopped {
		if time.Now().After(deadline) {
			t.Fatalf("ticker still running after 10s without reads (state %d)", c.state.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := c.precise()
	if got := c.read(); got < before {
		t.Errorf("read after stop %d, before it %d: stale", got, before)
	}
	if m := newClock("mono"); m.name() != "mono" || m.read() <= 0 || m.state.Load() != tickMono {
		t.Errorf("mono clock: name %q state %d", m.name(), m.state.Load())
	}
}

// TestDumpClockIsMono backs the package doc's "clock" field: a dump says
// "mono" (Go's monotonic clock, converted to Unix time), whichever of the
// coarse and the per-call clock NCCL4GO_TRACE_CLOCK picked.
func TestDumpClockIsMono(t *testing.T) {
	r := New(4)
	r.RegisterComm(CommInfo{Name: "t", Rank: 0, Size: 1}).Record(Event{Op: AllReduce})
	if d := r.Snapshot(""); d.Clock != "mono" {
		t.Errorf("dump clock %q, want \"mono\"", d.Clock)
	}
}

// CompleteRange completes the entries recorded from first to last, skips
// the ones the ring overwrote, and leaves the others alone; UnwatchRange
// gives them up.
func TestCompleteRange(t *testing.T) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "range", Hash: 1, Size: 1})
	var refs []Ref
	for range 20 { // the ring keeps the last 16: entries 5-20
		refs = append(refs, c.Record(Event{Op: AllReduce, DataType: Float32, Count: 1, Watched: true}))
	}
	c.CompleteRange(refs[2], refs[17]) // 3-18: 3 and 4 are gone
	c.UnwatchRange(refs[18], refs[18])
	c.CompleteRange(refs[19], refs[18]) // backwards: nothing
	c.CompleteRange(Ref{}, refs[19])    // zero first: nothing
	var got []string
	for _, e := range r.Snapshot("test").Entries {
		st := "-"
		if e.Watched {
			st = e.State.String()
		}
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, st))
	}
	var want []string
	for i := 5; i <= 18; i++ {
		want = append(want, fmt.Sprintf("%d:completed", i))
	}
	want = append(want, "19:-", "20:enqueued")
	if !slices.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
}

package trace

import (
	"sync"
	"testing"
)

// benchEvent is a typical collective.
var benchEvent = Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 1 << 20, Stream: 0x7f00deadbeef, Watched: true}

// BenchmarkRecord is the cost the recorder adds to one collective: Record
// on a communicator, from one goroutine.
func BenchmarkRecord(b *testing.B) {
	r := New(DefaultEntries)
	c := r.RegisterComm(CommInfo{Name: "bench", Hash: 1, Rank: 0, Size: 1})
	b.ReportAllocs()
	for b.Loop() {
		c.Record(benchEvent)
	}
}

// BenchmarkRecordParallel records from GOMAXPROCS goroutines, each on a
// communicator of its own, into one ring.
func BenchmarkRecordParallel(b *testing.B) {
	r := New(DefaultEntries)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := r.RegisterComm(CommInfo{Name: "bench", Hash: 1, Rank: 0, Size: 1})
		for pb.Next() {
			c.Record(benchEvent)
		}
	})
}

// BenchmarkRecordParallelOneComm records from GOMAXPROCS goroutines on one
// communicator, under a lock as the nccl package records under the
// communicator's (the worst case, not the common one).
func BenchmarkRecordParallelOneComm(b *testing.B) {
	r := New(DefaultEntries)
	c := r.RegisterComm(CommInfo{Name: "bench", Hash: 1, Rank: 0, Size: 1})
	var mu sync.Mutex
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			c.Record(benchEvent)
			mu.Unlock()
		}
	})
}

// BenchmarkRecordWatched is Record plus the watchdog's Start and Complete.
func BenchmarkRecordWatched(b *testing.B) {
	r := New(DefaultEntries)
	c := r.RegisterComm(CommInfo{Name: "bench", Hash: 1, Rank: 0, Size: 1})
	b.ReportAllocs()
	for b.Loop() {
		ref := c.Record(benchEvent)
		c.Start(ref)
		c.Complete(ref)
	}
}

// BenchmarkRecordOff is Record with the recorder off: the sequence number
// only.
func BenchmarkRecordOff(b *testing.B) {
	r := New(0)
	c := r.RegisterComm(CommInfo{Name: "bench", Hash: 1, Rank: 0, Size: 1})
	b.ReportAllocs()
	for b.Loop() {
		c.Record(benchEvent)
	}
}

// BenchmarkClock is one reading of the recording clock, for comparison:
// the coarse word Record reads ("coarse"), and Go's monotonic clock that
// Start and Complete read, and Record with NCCL4GO_TRACE_CLOCK=mono
// ("mono").
func BenchmarkClock(b *testing.B) {
	b.Run("coarse", func(b *testing.B) {
		var sink int64
		for b.Loop() {
			sink += clk.read()
		}
		_ = sink
	})
	b.Run("mono", func(b *testing.B) {
		var sink int64
		for b.Loop() {
			sink += clk.precise()
		}
		_ = sink
	})
}

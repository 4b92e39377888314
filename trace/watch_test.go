package trace

import "testing"

// Watch marks an entry watched and Unwatch clears it; a zero or
// overwritten ref changes nothing; the rest of the entry stays.
func TestWatchUnwatch(t *testing.T) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "w", Hash: 1, Size: 1, Device: -1})
	ref := c.Record(Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 8})
	watched := func() (bool, State) {
		t.Helper()
		d := r.Snapshot("test")
		if len(d.Entries) != 1 || d.Entries[0].Count != 8 || d.Entries[0].Op != AllReduce {
			t.Fatalf("entries %+v", d.Entries)
		}
		return d.Entries[0].Watched, d.Entries[0].State
	}
	if w, _ := watched(); w {
		t.Fatal("recorded watched")
	}
	c.Watch(ref)
	c.Start(ref)
	if w, st := watched(); !w || st != Started {
		t.Fatalf("after Watch and Start: watched %v, %v", w, st)
	}
	c.Unwatch(ref)
	if w, _ := watched(); w {
		t.Fatal("watched after Unwatch")
	}
	c.Watch(Ref{}) // nothing to mark
	for range 16 { // overwrite the entry
		c.Record(Event{Op: Broadcast})
	}
	c.Watch(ref)
	for _, e := range r.Snapshot("test").Entries {
		if e.Watched {
			t.Fatalf("an overwritten ref marked %+v", e)
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.Watch(ref); c.Unwatch(ref) }); n != 0 {
		t.Errorf("Watch and Unwatch allocate %v", n)
	}
}

// A collective after the last watched one, which nobody followed (the
// watchdog stopped), does not make the analyzer call the job stuck; a
// watched one that did not complete still does.
func TestAnalyzeUnwatchedAfterWatched(t *testing.T) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "w", Hash: 1, Size: 1, Device: -1})
	ref := c.Record(Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 8})
	c.Watch(ref)
	c.Start(ref)
	c.Complete(ref)
	c.Record(Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 8}) // after the watch ended
	if v := Analyze([]*Dump{r.Snapshot("x")}).Comms[0].Verdict; v != VerdictOK {
		t.Errorf("unwatched collective after a watched one: verdict %s, want ok", v)
	}
	hung := c.Record(Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 8})
	c.Watch(hung)
	c.Start(hung)
	if v := Analyze([]*Dump{r.Snapshot("x")}).Comms[0].Verdict; v != VerdictStuck {
		t.Errorf("a watched collective started and not completed: verdict %s, want stuck", v)
	}
}

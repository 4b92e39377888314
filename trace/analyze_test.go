package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// job simulates the ranks of one communicator, each with a recorder of its
// own (a process each).
type job struct {
	recs  []*Recorder
	comms []*Comm
}

func newJob(t *testing.T, name string, hash uint64, size int) *job {
	t.Helper()
	j := &job{}
	for r := range size {
		rec := New(64)
		rec.SetRank(r)
		j.recs = append(j.recs, rec)
		j.comms = append(j.comms, rec.RegisterComm(CommInfo{Name: name, Hash: hash, Rank: r, Size: size, Device: r}))
	}
	return j
}

// all records e on every rank, completing it when watched.
func (j *job) all(e Event) {
	for _, c := range j.comms {
		ref := c.Record(e)
		if e.Watched {
			c.Start(ref)
			c.Complete(ref)
		}
	}
}

// dumps snapshots the given ranks (all when none given).
func (j *job) dumps(ranks ...int) []*Dump {
	if len(ranks) == 0 {
		for r := range j.recs {
			ranks = append(ranks, r)
		}
	}
	var ds []*Dump
	for _, r := range ranks {
		ds = append(ds, roundTrip(j.recs[r].Snapshot("test")))
	}
	return ds
}

// roundTrip writes and reads back a dump, so the analyzer sees what a file
// holds.
func roundTrip(d *Dump) *Dump {
	var b bytes.Buffer
	if err := d.Write(&b); err != nil {
		panic(err)
	}
	d2, err := ReadDump(&b)
	if err != nil {
		panic(err)
	}
	return d2
}

var ar = Event{Op: AllReduce, DataType: Float32, RedOp: Sum, Count: 1024, Watched: true}

func mustContain(t *testing.T, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("report lacks %q:\n%s", p, text)
		}
	}
}

func TestAnalyzeConsistent(t *testing.T) {
	j := newJob(t, "world", 0xabc, 4)
	for range 10 {
		j.all(ar)
	}
	rep := Analyze(j.dumps())
	if len(rep.Comms) != 1 {
		t.Fatalf("%d comms", len(rep.Comms))
	}
	c := rep.Comms[0]
	if c.Verdict != VerdictOK || c.Disagreement != nil || len(c.Behind) != 0 || len(c.MissingDumps) != 0 {
		t.Errorf("verdict %v, disagreement %+v, behind %v, missing %v", c.Verdict, c.Disagreement, c.Behind, c.MissingDumps)
	}
	mustContain(t, rep.String(), "no disagreement", "AllReduce #10 (1024 float32, sum)", "Every rank completed every one of them")
}

func TestAnalyzeRankBehind(t *testing.T) {
	j := newJob(t, "world", 0xabc, 4)
	for range 16 {
		j.all(ar)
	}
	// Ranks 0, 1, 3 enqueue #17 and start it; rank 2 never does.
	for _, r := range []int{0, 1, 3} {
		j.comms[r].Start(j.comms[r].Record(ar))
	}
	time.Sleep(time.Millisecond)
	rep := Analyze(j.dumps())
	c := rep.Comms[0]
	if c.Verdict != VerdictBehind || c.Disagreement == nil || c.Disagreement.Seq != 17 {
		t.Fatalf("verdict %v, disagreement %+v", c.Verdict, c.Disagreement)
	}
	mustContain(t, rep.String(),
		`communicator "world" (hash 0x0000000000000abc, 4 ranks): behind`,
		`- rank 2 of 4 never enqueued AllReduce #17 (1024 float32, sum) that ranks 0, 1 and 3 enqueued`,
		"started on ranks 0, 1 and 3",
		"rank 2 last enqueued AllReduce #16 (1024 float32, sum), completed in")
}

func TestAnalyzeBehindElsewhere(t *testing.T) {
	// Rank 1 is stuck in a Send on another communicator.
	j := newJob(t, "dp", 1, 2)
	j.all(ar)
	pp := j.recs[1].RegisterComm(CommInfo{Name: "pp", Hash: 2, Rank: 0, Size: 2})
	pp.Start(pp.Record(Event{Op: Send, Peer: 1, DataType: BFloat16, Count: 4096, Watched: true}))
	j.comms[0].Record(ar)
	rep := Analyze(j.dumps())
	var dp *CommReport
	for i := range rep.Comms {
		if rep.Comms[i].Name == "dp" {
			dp = &rep.Comms[i]
		}
	}
	if dp == nil || dp.Verdict != VerdictBehind {
		t.Fatalf("dp report %+v", dp)
	}
	mustContain(t, rep.String(), `since then it enqueued Send #1 (4096 bfloat16, to rank 1) on communicator "pp", started`)
}

func TestAnalyzeDifferentOp(t *testing.T) {
	j := newJob(t, "world", 5, 3)
	j.all(ar)
	j.comms[0].Record(ar)
	j.comms[1].Record(ar)
	j.comms[2].Record(Event{Op: Broadcast, DataType: Float32, Count: 1024, Peer: 0})
	rep := Analyze(j.dumps())
	c := rep.Comms[0]
	if c.Verdict != VerdictMismatch || c.Disagreement.Seq != 2 || len(c.Disagreement.Groups) != 2 {
		t.Fatalf("verdict %v disagreement %+v", c.Verdict, c.Disagreement)
	}
	mustContain(t, rep.String(), "the ranks disagree on collective #2: ranks 0 and 1 enqueued AllReduce #2 (1024 float32, sum); rank 2 enqueued Broadcast #2 (1024 float32, root 0)")
}

func TestAnalyzeSizeMismatch(t *testing.T) {
	j := newJob(t, "world", 5, 2)
	for i := range 5 {
		for r, c := range j.comms {
			e := ar
			if i == 3 && r == 1 {
				e.Count = 512
			}
			c.Record(e)
		}
	}
	rep := Analyze(j.dumps())
	c := rep.Comms[0]
	if c.Verdict != VerdictMismatch || c.Disagreement.Seq != 4 {
		t.Fatalf("verdict %v disagreement %+v", c.Verdict, c.Disagreement)
	}
	mustContain(t, rep.String(), "rank 0 enqueued AllReduce #4 (1024 float32, sum); rank 1 enqueued AllReduce #4 (512 float32, sum)")
}

func TestAnalyzeTypeAndRootMismatch(t *testing.T) {
	j := newJob(t, "world", 5, 2)
	j.comms[0].Record(Event{Op: Reduce, DataType: Float32, Count: 8, Peer: 0})
	j.comms[1].Record(Event{Op: Reduce, DataType: Float32, Count: 8, Peer: 1})
	rep := Analyze(j.dumps())
	mustContain(t, rep.String(), "root 0", "root 1", "disagree on collective #1")
	j = newJob(t, "world", 6, 2)
	j.comms[0].Record(Event{Op: AllGather, DataType: Float16, Count: 8})
	j.comms[1].Record(Event{Op: AllGather, DataType: BFloat16, Count: 8})
	mustContain(t, Analyze(j.dumps()).String(), "(8 float16)", "(8 bfloat16)")
}

func TestAnalyzeMissingDump(t *testing.T) {
	j := newJob(t, "world", 9, 4)
	for range 3 {
		j.all(ar)
	}
	for _, r := range []int{0, 1, 2} {
		j.comms[r].Start(j.comms[r].Record(ar))
	}
	rep := Analyze(j.dumps(0, 1, 2))
	c := rep.Comms[0]
	if len(c.MissingDumps) != 1 || c.MissingDumps[0] != (RankRange{3, 3}) || c.Verdict != VerdictStuck {
		t.Fatalf("missing %v verdict %v", c.MissingDumps, c.Verdict)
	}
	mustContain(t, rep.String(), "no dump from rank 3 of 4", "ranks 0-2 did not complete AllReduce #4", "It may be waiting for rank 3, which left no dump")
}

func TestAnalyzeStuckEverywhere(t *testing.T) {
	j := newJob(t, "world", 9, 2)
	j.all(ar)
	for _, c := range j.comms {
		c.Start(c.Record(ar))
	}
	rep := Analyze(j.dumps())
	if rep.Comms[0].Verdict != VerdictStuck {
		t.Fatalf("verdict %v", rep.Comms[0].Verdict)
	}
	mustContain(t, rep.String(), "ranks 0 and 1 did not complete AllReduce #2", "stuck in NCCL")
}

func TestAnalyzeUnwatched(t *testing.T) {
	j := newJob(t, "world", 9, 2)
	e := ar
	e.Watched = false
	j.all(e)
	rep := Analyze(j.dumps())
	mustContain(t, rep.String(), "watchdog was off")
}

func TestAnalyzeP2P(t *testing.T) {
	j := newJob(t, "pp", 3, 2)
	send := Event{Op: Send, DataType: Float32, Count: 100, Peer: 1}
	recv := Event{Op: Recv, DataType: Float32, Count: 100, Peer: 0}
	j.comms[0].Record(send)
	j.comms[1].Record(recv)
	j.comms[0].Record(send) // rank 1 never posts the second receive
	rep := Analyze(j.dumps())
	if rep.Comms[0].Verdict != VerdictP2P {
		t.Fatalf("verdict %v", rep.Comms[0].Verdict)
	}
	mustContain(t, rep.String(), "rank 0 sent 2 times to rank 1, which posted 1 receives from it; rank 1 has no receive for Send #2 (100 float32, to rank 1)")

	j = newJob(t, "pp", 3, 2)
	j.comms[0].Record(send)
	recv.Count = 50
	j.comms[1].Record(recv)
	mustContain(t, Analyze(j.dumps()).String(), "does not match rank 1's receive 1 from it, Recv #1 (50 float32, from rank 0)")
}

func TestAnalyzeDuplicateAndJSON(t *testing.T) {
	j := newJob(t, "world", 4, 2)
	j.all(ar)
	ds := j.dumps()
	time.Sleep(time.Millisecond)
	ds = append(ds, roundTrip(j.recs[1].Snapshot("again")))
	rep := Analyze(ds)
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "rank 1 appears in two dumps") {
		t.Errorf("notes %q", rep.Notes)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Comms[0].Verdict != rep.Comms[0].Verdict || len(back.Comms[0].Ranks) != 2 {
		t.Errorf("JSON round trip: %+v", back)
	}
}

func TestRankList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{nil, "no rank"}, {[]int{2}, "rank 2"}, {[]int{1, 0}, "ranks 0 and 1"}, {[]int{0, 1, 3}, "ranks 0, 1 and 3"},
		{[]int{0, 1, 2, 3, 7}, "ranks 0-3 and 7"}, {[]int{0, 1, 2, 3}, "ranks 0-3"},
	} {
		if got := rankList(c.in); got != c.want {
			t.Errorf("rankList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

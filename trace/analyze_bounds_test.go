package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hugeCommsDump is a small dump that declares 64 communicators of MaxRanks
// ranks each, this process holding rank 0 of each, with one collective
// each.
func hugeCommsDump() *Dump {
	d := &Dump{Schema: Schema, Version: SchemaVersion, Host: "h", PID: 1, Rank: 0, TimeNs: 1e9, Clock: "mono", Entries: []DumpEntry{}}
	for i := range 64 {
		d.Comms = append(d.Comms, DumpComm{ID: uint32(i + 1), Name: "c", Hash: Hash(i + 1), Rank: 0, Size: MaxRanks, LastSeq: 1})
		d.Entries = append(d.Entries, DumpEntry{ID: uint64(i), Comm: uint32(i + 1), Seq: 1, Class: Collective, Op: AllReduce, Count: 8, EnqueuedNs: 1})
	}
	return d
}

// The cost of an analysis follows the dump's size, not the communicator
// sizes it declares: a 14 KB dump of 64 communicators of MaxRanks ranks
// made Analyze hold 487 MB (one int per missing rank) and the CLI print
// 1.07 GB of JSON.
func TestAnalyzeCostBoundedByDump(t *testing.T) {
	d := roundTrip(hugeCommsDump())
	var dumpBytes bytes.Buffer
	d.Write(&dumpBytes)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := Analyze([]*Dump{d})
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("dump %d bytes; Analyze allocated %d bytes", dumpBytes.Len(), alloc)
	if limit := uint64(200 * dumpBytes.Len()); alloc > limit {
		t.Errorf("Analyze allocated %d bytes for a %d-byte dump (limit %d)", alloc, dumpBytes.Len(), limit)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	t.Logf("JSON %d bytes, text %d bytes", len(js), len(text))
	if len(js) > 20*dumpBytes.Len() || len(text) > 20*dumpBytes.Len() {
		t.Errorf("report of %d bytes (JSON) and %d (text) for a %d-byte dump", len(js), len(text), dumpBytes.Len())
	}
	c := rep.Comms[0]
	if len(c.MissingDumps) != 1 || c.MissingDumps[0] != (RankRange{First: 1, Last: MaxRanks - 1}) {
		t.Errorf("missing dumps %v, want one range 1-%d", c.MissingDumps, MaxRanks-1)
	}
	mustContain(t, text, "no dump from ranks 1-1048575 of 1048576")
	allocs := testing.AllocsPerRun(3, func() { Analyze([]*Dump{d}) })
	if allocs > 200*64 {
		t.Errorf("%.0f allocations for 64 communicators", allocs)
	}
}

func TestRankRanges(t *testing.T) {
	for _, c := range []struct {
		have []int
		size int
		want []RankRange
		text string
	}{
		{[]int{0, 1, 2, 3}, 4, nil, "no rank"},
		{[]int{0, 1, 3}, 4, []RankRange{{2, 2}}, "rank 2"},
		{[]int{1, 2}, 6, []RankRange{{0, 0}, {3, 5}}, "ranks 0 and 3-5"},
		{[]int{2}, 5, []RankRange{{0, 1}, {3, 4}}, "ranks 0, 1, 3 and 4"},
		{nil, 3, []RankRange{{0, 2}}, "ranks 0-2"},
	} {
		got := missingRanges(c.have, c.size)
		if len(got) != len(c.want) || (len(got) > 0 && !slicesEqual(got, c.want)) {
			t.Errorf("missingRanges(%v, %d) = %v, want %v", c.have, c.size, got, c.want)
		}
		if s := rangeList(got); s != c.text {
			t.Errorf("rangeList(%v) = %q, want %q", got, s, c.text)
		}
	}
}

func slicesEqual(a, b []RankRange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Dumps that contradict themselves are refused with a clear error (they
// were accepted, and the analyzer then reported a wrong finding).
func TestValidateRejectsContradictions(t *testing.T) {
	base := func() *Dump {
		d := &Dump{Schema: Schema, Version: SchemaVersion, Host: "h", PID: 1, TimeNs: 1e9, Entries: []DumpEntry{},
			Comms: []DumpComm{{ID: 1, Name: "w", Hash: 7, Rank: 0, Size: 2, LastSeq: 2, LastP2PSeq: 1}}}
		d.Entries = append(d.Entries,
			DumpEntry{ID: 0, Comm: 1, Seq: 1, Class: Collective, Op: AllReduce},
			DumpEntry{ID: 1, Comm: 1, Seq: 2, Class: Collective, Op: AllReduce},
			DumpEntry{ID: 2, Comm: 1, Seq: 1, Class: PointToPoint, Op: Send})
		return d
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("a consistent dump: %v", err)
	}
	for _, c := range []struct {
		name  string
		spoil func(d *Dump)
		want  string
	}{
		{"last_seq below the ring", func(d *Dump) { d.Comms[0].LastSeq = 1 }, "last_seq 1"},
		{"last_p2p_seq below the ring", func(d *Dump) { d.Comms[0].LastP2PSeq = 0 }, "last_p2p_seq 0"},
		{"the same collective seq twice", func(d *Dump) { d.Entries[1].Seq = 1 }, "seq 1 twice"},
		{"the same p2p seq twice", func(d *Dump) {
			d.Entries = append(d.Entries, DumpEntry{ID: 3, Comm: 1, Seq: 1, Class: PointToPoint, Op: Recv})
		}, "seq 1 twice"},
	} {
		d := base()
		c.spoil(d)
		err := d.Validate()
		var de *DumpError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a *DumpError saying %q", c.name, err, c.want)
		}
		// Through the reader too.
		var b bytes.Buffer
		d.Write(&b)
		if _, err := ReadDump(&b); err == nil {
			t.Errorf("%s: ReadDump accepted it", c.name)
		}
	}
}

// A file over the size limit is refused before it is read (it was read in
// full, 1 GiB, first).
func TestReadDumpFileTooLargeNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nccl4go-trace-rank0-pid1-1.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxDumpBytes + 1); err != nil { // sparse: no disk used
		t.Skip("cannot make a sparse file:", err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err = ReadDumpFile(path)
	runtime.ReadMemStats(&after)
	var de *DumpError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v, want a *DumpError saying it is too large", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("refusing it allocated %d bytes: it was read (in %v)", alloc, time.Since(start))
	}
}

// tailDump is a dump of comms communicators with one collective each,
// followed by tail entries of a communicator the dump no longer lists (the
// recorder forgets closed ones): about 19 MB as JSON for 4096 and 70000.
func tailDump(comms, tail int) *Dump {
	d := &Dump{Schema: Schema, Version: SchemaVersion, Host: "h", PID: 1, Rank: 0, TimeNs: 1e12, Clock: "mono", Entries: []DumpEntry{}}
	id := uint64(0)
	for i := range comms {
		d.Comms = append(d.Comms, DumpComm{ID: uint32(i + 1), Name: "c", Hash: Hash(i + 1), Rank: 0, Size: 1, LastSeq: 1})
		d.Entries = append(d.Entries, DumpEntry{ID: id, Comm: uint32(i + 1), Seq: 1, Class: Collective, Op: AllReduce, DataType: Float32, Count: 8, Bytes: 32, EnqueuedNs: 1})
		id++
	}
	for i := range tail {
		d.Entries = append(d.Entries, DumpEntry{ID: id, Comm: uint32(comms + 1), Seq: uint64(i + 1), Class: Collective, Op: AllReduce, DataType: Float32, Count: 8, Bytes: 32, EnqueuedNs: 2})
		id++
	}
	return d
}

// The analysis of a dump with many communicators and a long tail of
// entries of forgotten ones: it cost communicators × tail (3.8 s for a
// 19 MB dump).
func BenchmarkAnalyzeManyCommsLongTail(b *testing.B) {
	d := tailDump(4096, 70000)
	var buf bytes.Buffer
	d.Write(&buf)
	b.ReportAllocs()
	for b.Loop() {
		Analyze([]*Dump{d})
	}
	b.ReportMetric(float64(buf.Len())/1e6, "dump-MB")
}

package trace

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the dumps in testdata/hang (used by the CLI's tests)")

// TestHangTestdata checks the dumps in testdata/hang, a recorded hang that
// the CLI's tests analyze: on communicator "world" of 4 ranks, rank 2 never
// enqueued AllReduce #17 because it is stuck in a Send on "pp". With
// -update it records them anew.
func TestHangTestdata(t *testing.T) {
	dir := filepath.Join("testdata", "hang")
	if *update {
		os.RemoveAll(dir)
		j := newJob(t, "world", 0x5eed0f00d, 4)
		for range 16 {
			j.all(ar)
		}
		for _, r := range []int{0, 1, 3} {
			j.comms[r].Start(j.comms[r].Record(ar))
		}
		pp := j.recs[2].RegisterComm(CommInfo{Name: "pp", Hash: 0x77, Rank: 0, Size: 2, Device: 2})
		pp.Start(pp.Record(Event{Op: Send, Peer: 1, DataType: BFloat16, Count: 4096, Watched: true}))
		for r, rec := range j.recs {
			d := rec.Snapshot("watchdog: AllReduce #17 on \"world\" timed out after 10m0s")
			d.Host, d.PID = "node0", 1000+r
			if _, err := d.WriteFile(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "nccl4go-trace-*.json"))
	if err != nil || len(files) != 4 {
		t.Fatalf("testdata/hang holds %v (%v); run go test -run TestHangTestdata -update", files, err)
	}
	ds := readDumpFiles(t, files)
	rep := Analyze(ds)
	if rep.Comms[0].Name != "world" || rep.Comms[0].Verdict != VerdictBehind {
		t.Fatalf("report:\n%s", rep)
	}
}

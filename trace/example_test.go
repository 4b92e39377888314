package trace_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/nccl4go/nccl/trace"
)

// Recording as the nccl package does: register the communicator once,
// record each operation, and let the watchdog mark its progress.
func ExampleComm_Record() {
	rec := trace.New(1024)
	world := rec.RegisterComm(trace.CommInfo{Name: "world", Hash: 0xabc, Rank: 0, Size: 2, Device: 0})

	ref := world.Record(trace.Event{Op: trace.AllReduce, DataType: trace.Float32, RedOp: trace.Sum, Count: 1 << 20, Watched: true})
	world.Start(ref)
	world.Complete(ref)
	ref2 := world.Record(trace.Event{Op: trace.Send, DataType: trace.Float32, Count: 16, Peer: 1})

	d := rec.Snapshot("example")
	for _, e := range d.Entries {
		fmt.Println(e.Op, e.Class, "seq", e.Seq, e.State, e.Bytes, "bytes")
	}
	fmt.Println(ref.Seq(), ref2.Seq())
	// Output:
	// AllReduce collective seq 1 completed 4194304 bytes
	// Send p2p seq 1 enqueued 64 bytes
	// 1 1
}

// Analyzing the dumps of two ranks, one of which never called the second
// all-reduce.
func ExampleAnalyze() {
	var dumps []*trace.Dump
	for rank := range 2 {
		rec := trace.New(64)
		c := rec.RegisterComm(trace.CommInfo{Name: "world", Hash: 1, Rank: rank, Size: 2})
		calls := 2
		if rank == 1 {
			calls = 1
		}
		for range calls {
			c.Record(trace.Event{Op: trace.AllReduce, DataType: trace.BFloat16, RedOp: trace.Sum, Count: 4096})
		}
		dumps = append(dumps, rec.Snapshot("example"))
	}
	rep := trace.Analyze(dumps)
	c := rep.Comms[0]
	fmt.Println(c.Verdict, "at collective", c.Disagreement.Seq)
	sentence, _, _ := strings.Cut(c.Findings[0], " (up to") // the rest says how long ago
	fmt.Println(sentence)
	// Output:
	// behind at collective 2
	// rank 1 of 2 never enqueued AllReduce #2 (4096 bfloat16, sum) that rank 0 enqueued
}

// Dumping on SIGUSR1 into a directory, for `kill -USR1 <pid>`.
func ExampleRecorder_DumpOnSignal() {
	stop := trace.Default().DumpOnSignal(os.TempDir())
	defer stop()
	// ... the program runs; each SIGUSR1 writes a dump into the directory.
}

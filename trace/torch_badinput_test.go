package trace_test

import (
	"testing"

	"github.com/nccl4go/nccl/trace"
)

// TestExportTorchBadDumps: ExportTorch takes []*Dump from any source (not
// only ReadDumpFile, which validates): nil dumps, communicators whose rank
// is outside their size or whose size is absurd, and operations or states
// outside the known ones are errors or left out, never a panic or a
// 2^40-element allocation.
func TestExportTorchBadDumps(t *testing.T) {
	comm := func(rank, size int) trace.DumpComm {
		return trace.DumpComm{ID: 1, Name: "world", Hash: 5, Rank: rank, Size: size, LastSeq: 1}
	}
	dump := func(c trace.DumpComm, es ...trace.DumpEntry) *trace.Dump {
		return &trace.Dump{Schema: trace.Schema, Version: trace.SchemaVersion, Rank: 0, Comms: []trace.DumpComm{c}, Entries: es}
	}
	for name, dumps := range map[string][]*trace.Dump{
		"nil dump":        {nil},
		"rank above size": {dump(comm(3, 2))},
		"negative rank":   {dump(comm(-1, 2))},
		"negative size":   {dump(comm(0, -4))},
		"size 2^40":       {dump(comm(0, 1<<40))},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: ExportTorch panicked: %v", name, p)
				}
			}()
			if _, err := trace.ExportTorch(dumps); err == nil {
				t.Errorf("%s: ExportTorch accepted it", name)
			}
		}()
	}
	// An operation or a state this release does not know: left out or
	// named as unknown, not a panic.
	for _, e := range []trace.DumpEntry{
		{ID: 1, Comm: 1, Seq: 1, Class: trace.Collective, Op: trace.Op(250)},
		{ID: 1, Comm: 1, Class: trace.Local, Op: trace.Op(250)},
		{ID: 1, Comm: 1, Seq: 1, Class: trace.Collective, Op: trace.AllReduce, State: trace.State(200), Watched: true},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%+v: ExportTorch panicked: %v", e, p)
				}
			}()
			trace.ExportTorch([]*trace.Dump{dump(comm(0, 1), e)})
		}()
	}
}

package trace

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// TorchVersion is the version of PyTorch's flight-recorder dump format that
// [ExportTorch] writes: the "version" its C++ recorder writes (FlightRecorder.hpp's
// version_val), which PyTorch's analyzer requires to be the same in every
// rank's file and reads as major.minor.
const TorchVersion = "2.10"

// TorchPrefix is the file-name prefix PyTorch's recorder gives its dumps
// (the default of TORCH_FR_DUMP_TEMP_FILE, without its directory), and
// [WriteTorchDir] its files: <prefix><rank>. PyTorch's analyzer finds the
// rank of each file after the prefix.
const TorchPrefix = "nccl_trace_rank_"

// TorchFile is one rank's dump in PyTorch's flight-recorder format.
type TorchFile struct {
	Rank int    // the process's rank in the job (Dump.Rank)
	Data []byte // a Python pickle, as PyTorch's recorder writes it
}

// ExportTorch converts the dumps of the ranks of a job, one per rank, into
// the format PyTorch's flight recorder writes (a pickle per rank, format
// [TorchVersion]), so that PyTorch's analyzer (python -m
// torch.distributed.flight_recorder.fr_trace, or torchfrtrace) and tools
// built on its format read Go ranks. It needs every rank's dump it has at
// once: a communicator's member list ("ranks" in pg_config) maps its ranks
// to the dumps' process ranks, which only the dumps together know. A member
// that left no dump takes the next process rank after the member before it
// that no other member has: on a world communicator, its own rank.
//
// Each communicator becomes a process group named by its hash ("0x..."),
// with its name as the description. Collectives and point-to-point
// operations become entries as PyTorch's ProcessGroupNCCL records them:
// "nccl:all_reduce", "nccl:send 0->1", ..., with the NCCL call's count as
// the sizes ([[count]], or count times the communicator's size for the
// gathered side) and the element type as PyTorch names it ("Float",
// "BFloat16", ...). Operations PyTorch's analyzer does not know ([Signal],
// [PutSignal], [WaitSignal], [Init], [Shrink], [Grow] and local ones) are left out;
// [Split] is "nccl:split". States: "scheduled" (enqueued), "started",
// "completed", as the watchdog saw them. timeout_ms is 0 (a dump does not
// record it). The output is deterministic: the same dumps give the same
// bytes.
func ExportTorch(dumps []*Dump) ([]TorchFile, error) {
	type member struct{ commRank, procRank int }
	type pg struct {
		name, desc string
		size       int
		members    []member
		descRank   int // process rank that named desc
	}
	pgs := map[string]*pg{}
	seen := map[int]string{}
	pgOf := make([]map[uint32]string, len(dumps)) // per dump: comm id -> pg name
	for i, d := range dumps {
		if d == nil {
			return nil, fmt.Errorf("trace: export: dump %d is nil", i)
		}
		// Dumps built in memory were not checked by ReadDumpFile: a
		// communicator rank outside its size, or a size of 2^40, would
		// index out of range or exhaust memory below.
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("trace: export: dump %d: %w", i, err)
		}
		src := cmp.Or(d.Source(), fmt.Sprintf("dump %d", i))
		if d.Rank < 0 {
			return nil, fmt.Errorf("trace: export: %s: the dump has no process rank (-1); set RANK or Recorder.SetRank in the program", src)
		}
		if prev, ok := seen[d.Rank]; ok {
			return nil, fmt.Errorf("trace: export: %s and %s are both rank %d", prev, src, d.Rank)
		}
		seen[d.Rank] = src
		comms := slices.Clone(d.Comms)
		slices.SortFunc(comms, func(a, b DumpComm) int { return cmp.Compare(a.ID, b.ID) })
		pgOf[i] = map[uint32]string{}
		nth := map[Hash]int{}
		for _, c := range comms {
			nth[c.Hash]++
			name := c.Hash.String()
			if n := nth[c.Hash]; n > 1 {
				name += "_" + strconv.Itoa(n) // a later communicator with the same hash
			}
			pgOf[i][c.ID] = name
			p := pgs[name]
			if p == nil {
				p = &pg{name: name, desc: c.Name, size: c.Size, descRank: d.Rank}
				pgs[name] = p
			}
			if c.Size != p.size {
				return nil, fmt.Errorf("trace: export: %s: communicator %s (%q) has %d ranks here, %d in another dump", src, c.Hash, c.Name, c.Size, p.size)
			}
			if d.Rank < p.descRank {
				p.desc, p.descRank = c.Name, d.Rank
			}
			p.members = append(p.members, member{c.Rank, d.Rank})
		}
	}
	ranksOf := map[string]string{}
	for name, p := range pgs {
		byComm := make([]int, p.size)
		for r := range byComm {
			byComm[r] = -1
		}
		used := map[int]bool{}
		for _, m := range p.members {
			byComm[m.commRank] = m.procRank
			used[m.procRank] = true
		}
		// A member without a dump takes the next free process rank after
		// the member before it: its communicator rank on a world
		// communicator, and an order that keeps PyTorch's assumption that
		// group ranks follow process ranks wherever the dumps allow.
		var ranks []string
		prev := -1
		for _, g := range byComm {
			if g < 0 {
				g = prev + 1
				for used[g] {
					g++
				}
				used[g] = true
			}
			prev = g
			ranks = append(ranks, strconv.Itoa(g))
		}
		ranksOf[name] = "[" + strings.Join(ranks, ", ") + "]"
	}
	files := make([]TorchFile, 0, len(dumps))
	for i, d := range dumps {
		files = append(files, TorchFile{Rank: d.Rank, Data: torchDump(d, pgOf[i], func(name string) (string, string) {
			return pgs[name].desc, ranksOf[name]
		})})
	}
	slices.SortFunc(files, func(a, b TorchFile) int { return cmp.Compare(a.Rank, b.Rank) })
	return files, nil
}

// WriteTorchDir exports the dumps (see [ExportTorch]) into dir (created if
// missing), one file per rank named <prefix><rank> (prefix "" is
// [TorchPrefix]), and returns the files' paths. Each file appears whole or
// not at all.
func WriteTorchDir(dir, prefix string, dumps []*Dump) ([]string, error) {
	files, err := ExportTorch(dumps)
	if err != nil {
		return nil, err
	}
	prefix = cmp.Or(prefix, TorchPrefix)
	if strings.ContainsRune(prefix, os.PathSeparator) {
		return nil, fmt.Errorf("trace: export: prefix %q names a directory; give the directory apart", prefix)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trace: export: %w", err)
	}
	var paths []string
	for _, f := range files {
		path := filepath.Join(dir, prefix+strconv.Itoa(f.Rank))
		tmp, err := os.CreateTemp(dir, ".nccl4go-torch-*.tmp")
		if err != nil {
			return paths, fmt.Errorf("trace: export: %w", err)
		}
		_, werr := tmp.Write(f.Data)
		if err := errors.Join(werr, tmp.Close()); err != nil {
			os.Remove(tmp.Name())
			return paths, fmt.Errorf("trace: export to %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return paths, fmt.Errorf("trace: export: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// torchNames are PyTorch's profiling names of the operations it knows.
var torchNames = [numOps]string{
	AllReduce:     "all_reduce",
	Broadcast:     "broadcast",
	Reduce:        "reduce",
	AllGather:     "all_gather",
	ReduceScatter: "reduce_scatter",
	AllToAll:      "all_to_all",
	Gather:        "gather",
	Scatter:       "scatter",
	Send:          "send",
	Recv:          "recv",
	Split:         "split",
}

// torchDTypes are PyTorch's names (c10::toString of the ScalarType) of
// NCCL's data types.
var torchDTypes = [...]string{
	Int8: "Char", Uint8: "Byte", Int32: "Int", Uint32: "UInt32", Int64: "Long", Uint64: "UInt64",
	Float16: "Half", Float32: "Float", Float64: "Double", BFloat16: "BFloat16",
	Float8E4M3: "Float8_e4m3fn", Float8E5M2: "Float8_e5m2",
}

// torchStates are PyTorch's names of the states.
var torchStates = [...]string{Enqueued: "scheduled", Started: "started", Completed: "completed"}

// torchDump is one dump as PyTorch's recorder pickles it (dump_dict):
// version, pg_config, comm_lib_version, pg_status and entries.
func torchDump(d *Dump, pgOf map[uint32]string, pgInfo func(name string) (desc, ranks string)) []byte {
	comms := map[uint32]DumpComm{}
	for _, c := range d.Comms {
		comms[c.ID] = c
	}
	ids := make([]uint32, 0, len(d.Comms))
	for _, c := range d.Comms {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)

	pgConfig := pyDict{}
	pgStatus := pyDict{}
	for _, id := range ids {
		name := pgOf[id]
		desc, ranks := pgInfo(name)
		pgConfig = append(pgConfig, pyItem{name, pyDict{{"name", name}, {"desc", desc}, {"ranks", ranks}}})
		c := comms[id]
		pgStatus = append(pgStatus, pyItem{strconv.FormatUint(uint64(id), 10), pyDict{
			{"last_enqueued_collective", int64(c.LastSeq)},
			{"last_started_collective", int64(c.LastStartedSeq)},
			{"last_completed_collective", int64(c.LastCompletedSeq)},
		}})
	}
	slices.SortStableFunc(pgConfig, func(a, b pyItem) int { return cmp.Compare(a.k, b.k) })

	// Each entry carries both of its communicator's counters, as PyTorch's
	// do: the other class's counter is the last one seen before it.
	entries := pyList{}
	base := int64(d.Recorded) - int64(len(d.Entries)) // entries the rings no longer hold
	lastColl := map[uint32]uint64{}
	lastP2P := map[uint32]uint64{}
	byTicket := slices.Clone(d.Entries)
	slices.SortStableFunc(byTicket, func(a, b DumpEntry) int {
		return cmp.Or(cmp.Compare(a.Comm, b.Comm), cmp.Compare(a.ID, b.ID))
	})
	type counters struct{ coll, p2p uint64 }
	at := map[[2]uint64]counters{}
	for _, e := range byTicket {
		switch e.Class {
		case Collective:
			lastColl[e.Comm] = e.Seq
		case PointToPoint:
			lastP2P[e.Comm] = e.Seq
		}
		at[[2]uint64{uint64(e.Comm), e.ID}] = counters{lastColl[e.Comm], lastP2P[e.Comm]}
	}
	for i, e := range d.Entries {
		c, ok := comms[e.Comm]
		name := torchNames[e.Op]
		if !ok || name == "" {
			continue
		}
		switch e.Op {
		case Send:
			name += fmt.Sprintf(" %d->%d", c.Rank, derefOr(e.Peer, -1))
		case Recv:
			name += fmt.Sprintf(" %d<-%d", c.Rank, derefOr(e.Peer, -1))
		}
		in, out := torchSizes(e, int64(c.Size))
		var inT, outT pyList
		if e.Op.HasData() {
			t := pyValue(e.DataType.String())
			if int(e.DataType) < len(torchDTypes) {
				t = torchDTypes[e.DataType]
			}
			inT, outT = pyList{t}, pyList{t}
		}
		n := at[[2]uint64{uint64(e.Comm), e.ID}]
		var started, completed pyValue
		if e.StartedNs != 0 {
			started = e.StartedNs
		}
		if e.State == Completed && e.CompletedNs != 0 {
			completed = e.CompletedNs
			if started == nil {
				started = e.CompletedNs // as PyTorch's retire_completed does
			}
		}
		entry := pyDict{
			{"record_id", base + int64(i)},
			{"pg_id", int64(e.Comm)},
			{"process_group", pyTuple{pgOf[e.Comm], firstOf(pgInfo(pgOf[e.Comm]))}},
			{"thread_name", ""},
			{"thread_id", ""},
			{"collective_seq_id", int64(n.coll)},
			{"p2p_seq_id", int64(n.p2p)},
			{"op_id", int64(e.ID)},
			{"profiling_name", "nccl:" + name},
			{"time_created_ns", e.EnqueuedNs},
		}
		if e.State == Completed && e.DurationNs > 0 {
			entry = append(entry, pyItem{"duration_ms", float64(e.DurationNs) / 1e6})
		}
		entry = append(entry,
			pyItem{"input_sizes", in},
			pyItem{"input_dtypes", inT},
			pyItem{"output_sizes", out},
			pyItem{"output_dtypes", outT},
			pyItem{"state", torchStates[min(int(e.State), len(torchStates)-1)]},
			pyItem{"time_discovered_started_ns", started},
			pyItem{"time_discovered_completed_ns", completed},
			pyItem{"retired", e.State == Completed},
			pyItem{"timeout_ms", int64(0)},
			pyItem{"is_p2p", e.Class == PointToPoint},
		)
		entries = append(entries, entry)
	}
	return pickle(pyDict{
		{"version", TorchVersion},
		{"pg_config", pgConfig},
		{"comm_lib_version", ""},
		{"pg_status", pgStatus},
		{"entries", entries},
	})
}

// torchSizes are an entry's input and output sizes as PyTorch records them:
// one tensor each, of the elements the NCCL call reads and writes.
func torchSizes(e DumpEntry, nranks int64) (in, out pyList) {
	if !e.Op.HasData() {
		return pyList{}, pyList{}
	}
	n := int64(e.Count)
	all := n * nranks
	one := func(v int64) pyList { return pyList{pyList{v}} }
	switch e.Op {
	case AllGather, Gather:
		return one(n), one(all)
	case ReduceScatter, Scatter:
		return one(all), one(n)
	case AllToAll:
		return one(all), one(all)
	}
	return one(n), one(n)
}

func derefOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func firstOf(a, _ string) string { return a }

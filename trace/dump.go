package trace

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// [Schema] is the value of a dump's "schema" field, and [SchemaVersion] of its
// "version" field. The version grows when a field changes meaning or a new
// operation, type or state name appears; readers reject versions they do not
// know.
const (
	Schema        = "nccl4go-trace"
	SchemaVersion = 1
)

// Dump is one process's recorder contents, as the JSON dump holds them. The
// package documentation describes every field.
type Dump struct {
	Schema      string      `json:"schema"`
	Version     int         `json:"version"`
	Reason      string      `json:"reason,omitempty"`
	Host        string      `json:"host"`
	PID         int         `json:"pid"`
	Rank        int         `json:"rank"`
	TimeNs      int64       `json:"time_ns"`
	Clock       string      `json:"clock"`
	BufferSize  int         `json:"buffer_entries"`
	Recorded    uint64      `json:"recorded"`
	Note        string      `json:"note,omitempty"`
	Comms       []DumpComm  `json:"comms"`
	Entries     []DumpEntry `json:"entries"`
	source      string      // where ReadDumpFile read it; for messages
	unknownComm int         // entries naming no comm of Comms (set by Validate)
}

// DumpComm is a registered communicator in a dump.
type DumpComm struct {
	ID               uint32 `json:"id"`
	Name             string `json:"name"`
	Hash             Hash   `json:"hash"`
	Rank             int    `json:"rank"`
	Size             int    `json:"size"`
	Device           int    `json:"device"`
	Closed           bool   `json:"closed,omitempty"`
	LastSeq          uint64 `json:"last_seq"`
	LastP2PSeq       uint64 `json:"last_p2p_seq"`
	LastStartedSeq   uint64 `json:"last_started_seq"`
	LastCompletedSeq uint64 `json:"last_completed_seq"`
}

// DumpEntry is one recorded operation in a dump. [DataType] and Count are
// meaningful when [Op.HasData], [RedOp] when [Op.HasRedOp], [State] when Watched;
// the JSON form leaves out what is not meaningful.
type DumpEntry struct {
	ID          uint64
	Comm        uint32
	Seq         uint64
	Class       Class
	Op          Op
	DataType    DataType
	RedOp       RedOp
	Count       uint64
	Bytes       uint64
	Root        *int // rooted collectives
	Peer        *int // point-to-point operations with one peer
	Stream      Handle
	Group       uint64
	EnqueuedNs  int64
	Watched     bool
	State       State
	StartedNs   int64
	CompletedNs int64
	DurationNs  int64
}

// jsonEntry is [DumpEntry]'s JSON form.
type jsonEntry struct {
	ID          uint64    `json:"id"`
	Comm        uint32    `json:"comm"`
	Seq         uint64    `json:"seq"`
	Class       Class     `json:"class"`
	Op          Op        `json:"op"`
	DataType    *DataType `json:"dtype,omitempty"`
	RedOp       *RedOp    `json:"redop,omitempty"`
	Count       *uint64   `json:"count,omitempty"`
	Bytes       *uint64   `json:"bytes,omitempty"`
	Root        *int      `json:"root,omitempty"`
	Peer        *int      `json:"peer,omitempty"`
	Stream      Handle    `json:"stream"`
	Group       uint64    `json:"group,omitempty"`
	EnqueuedNs  int64     `json:"enqueued_ns"`
	Watched     bool      `json:"watched"`
	State       *State    `json:"state,omitempty"`
	StartedNs   int64     `json:"started_ns,omitempty"`
	CompletedNs int64     `json:"completed_ns,omitempty"`
	DurationNs  *int64    `json:"duration_ns,omitempty"`
}

// MarshalJSON writes the entry, leaving out fields its operation and state
// do not have.
func (e DumpEntry) MarshalJSON() ([]byte, error) {
	j := jsonEntry{
		ID: e.ID, Comm: e.Comm, Seq: e.Seq, Class: e.Class, Op: e.Op, Root: e.Root, Peer: e.Peer,
		Stream: e.Stream, Group: e.Group, EnqueuedNs: e.EnqueuedNs, Watched: e.Watched,
		StartedNs: e.StartedNs, CompletedNs: e.CompletedNs,
	}
	if e.Op.HasData() {
		j.DataType, j.Count, j.Bytes = &e.DataType, &e.Count, &e.Bytes
	}
	if e.Op.HasRedOp() {
		j.RedOp = &e.RedOp
	}
	if e.Watched {
		j.State = &e.State
		if e.State == Completed {
			j.DurationNs = &e.DurationNs
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an entry as MarshalJSON writes it.
func (e *DumpEntry) UnmarshalJSON(b []byte) error {
	var j jsonEntry
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = DumpEntry{
		ID: j.ID, Comm: j.Comm, Seq: j.Seq, Class: j.Class, Op: j.Op, Root: j.Root, Peer: j.Peer,
		Stream: j.Stream, Group: j.Group, EnqueuedNs: j.EnqueuedNs, Watched: j.Watched,
		StartedNs: j.StartedNs, CompletedNs: j.CompletedNs,
	}
	if j.DataType != nil {
		e.DataType = *j.DataType
	}
	if j.RedOp != nil {
		e.RedOp = *j.RedOp
	}
	if j.Count != nil {
		e.Count = *j.Count
	}
	if j.Bytes != nil {
		e.Bytes = *j.Bytes
	}
	if j.State != nil {
		e.State = *j.State
	}
	if j.DurationNs != nil {
		e.DurationNs = *j.DurationNs
	}
	return nil
}

// Hash is a communicator hash; JSON writes it as a hexadecimal string
// ("0x0123456789abcdef"), since 64-bit numbers do not survive every JSON
// reader.
type Hash uint64

// String is the hash as 16 hexadecimal digits with a 0x prefix.
func (h Hash) String() string { return fmt.Sprintf("0x%016x", uint64(h)) }

// MarshalText writes h as String does.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads a hexadecimal hash, with or without 0x.
func (h *Hash) UnmarshalText(b []byte) error { return unmarshalHex(h, b, "hash") }

// Handle is a stream handle; JSON writes it as a hexadecimal string.
type Handle uintptr

// String is the handle in hexadecimal with a 0x prefix.
func (h Handle) String() string { return "0x" + strconv.FormatUint(uint64(h), 16) }

// MarshalText writes h as String does.
func (h Handle) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads a hexadecimal handle, with or without 0x.
func (h *Handle) UnmarshalText(b []byte) error { return unmarshalHex(h, b, "stream") }

// unmarshalHex sets *dst to the hexadecimal number b (with or without 0x),
// or fails naming what (the JSON field) and b.
func unmarshalHex[T ~uint64 | ~uintptr](dst *T, b []byte, what string) error {
	s := strings.TrimPrefix(strings.TrimPrefix(string(b), "0x"), "0X")
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return fmt.Errorf("trace: %s %q: %w", what, b, err)
	}
	*dst = T(n)
	return nil
}

// unmarshalName sets *dst to the value parse reads from the name b, or
// fails naming what (the JSON field) and b.
func unmarshalName[T any](dst *T, b []byte, what string, parse func(string) (T, bool)) error {
	v, ok := parse(string(b))
	if !ok {
		return fmt.Errorf("trace: unknown %s %q", what, b)
	}
	*dst = v
	return nil
}

// MarshalText writes the operation's name.
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads an operation's name.
func (o *Op) UnmarshalText(b []byte) error { return unmarshalName(o, b, "op", ParseOp) }

// MarshalText writes the type's name.
func (t DataType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a type's name.
func (t *DataType) UnmarshalText(b []byte) error { return unmarshalName(t, b, "dtype", ParseDataType) }

// MarshalText writes the operator's name.
func (o RedOp) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads an operator's name.
func (o *RedOp) UnmarshalText(b []byte) error { return unmarshalName(o, b, "redop", ParseRedOp) }

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error { return unmarshalName(s, b, "state", ParseState) }

// MarshalText writes the class's name.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a class's name.
func (c *Class) UnmarshalText(b []byte) error {
	for i, n := range classNames {
		if n == string(b) {
			*c = Class(i)
			return nil
		}
	}
	return fmt.Errorf("trace: unknown class %q", b)
}

// Snapshot copies the recorder's contents: every registered communicator
// and every whole entry of the ring, oldest first. reason says why (it goes
// into the dump's "reason"). Recording goes on meanwhile; an entry written
// during the copy is either in it whole or not at all.
func (r *Recorder) Snapshot(reason string) *Dump {
	cv := clk.converter()
	host, _ := os.Hostname()
	d := &Dump{
		Schema:  Schema,
		Version: SchemaVersion,
		Reason:  reason,
		Host:    host,
		PID:     os.Getpid(),
		Clock:   clk.name(),
	}
	r.mu.Lock()
	d.Rank = r.processRankLocked()
	d.Note = r.envNote
	comms := make([]*Comm, 0, len(r.comms))
	for _, c := range r.comms {
		comms = append(comms, c)
	}
	r.mu.Unlock()
	slices.SortFunc(comms, func(a, b *Comm) int { return cmp.Compare(a.id, b.id) })
	// The entries first, then the counters: writers store a counter before
	// the entry it counts, and raise the started and completed marks before
	// the entry's state, so counters read after the copy are at or beyond
	// every entry copied (see put for why the order holds).
	type commRaw struct {
		id  uint32
		raw rawEntry
	}
	var raw []commRaw
	for _, c := range comms {
		rg := c.ring.Load()
		if rg == nil {
			continue
		}
		d.BufferSize = max(d.BufferSize, len(rg.slots))
		var e rawEntry
		for i := range rg.slots {
			if rg.slots[i].read(&e) {
				raw = append(raw, commRaw{c.id, e})
			}
		}
	}
	d.Comms = make([]DumpComm, 0, len(comms))
	for _, c := range comms {
		// Completed before started before enqueued: the reverse of the
		// order writers raise them in.
		done := c.lastCompleted.Load()
		started := c.lastStarted.Load()
		d.Comms = append(d.Comms, DumpComm{
			ID: c.id, Name: c.info.Name, Hash: Hash(c.info.Hash),
			Rank: c.info.Rank, Size: c.info.Size, Device: c.info.Device,
			Closed:           c.closedAt.Load() != 0,
			LastCompletedSeq: done,
			LastStartedSeq:   started,
			LastSeq:          c.coll.Load(),
			LastP2PSeq:       c.p2p.Load(),
		})
		d.Recorded += c.head.Load()
	}
	// Oldest first: by enqueue time, then by each communicator's order.
	slices.SortFunc(raw, func(a, b commRaw) int {
		if c := cmp.Compare(int64(a.raw.w[wEnq]), int64(b.raw.w[wEnq])); c != 0 {
			return c
		}
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.raw.ticket, b.raw.ticket)
	})
	d.Entries = make([]DumpEntry, 0, len(raw))
	for i := range raw {
		d.Entries = append(d.Entries, raw[i].raw.dumpEntry(raw[i].id, cv))
	}
	d.TimeNs = cv.unix(clk.precise())
	return d
}

// dumpEntry converts a raw entry of communicator comm.
func (e *rawEntry) dumpEntry(comm uint32, cv converter) DumpEntry {
	op := e.op()
	info := op.info()
	de := DumpEntry{
		ID:         e.ticket,
		Comm:       comm,
		Seq:        e.w[wSeq],
		Class:      info.class,
		Op:         op,
		Stream:     Handle(e.w[wStream]),
		Group:      e.w[wGroup],
		EnqueuedNs: cv.unix(int64(e.w[wEnq])),
		Watched:    e.watched(),
		State:      e.state(),
	}
	if info.data {
		de.DataType = e.dataType()
		de.Count = e.w[wCount]
		de.Bytes = de.Count * uint64(de.DataType.Size())
	}
	if info.reduce {
		de.RedOp = e.redOp()
	}
	peer := e.peer()
	switch info.peer {
	case rootPeer:
		de.Root = &peer
	case p2pPeer:
		de.Peer = &peer
	}
	start := int64(e.u[uStart])
	if start != 0 {
		de.StartedNs = cv.unix(start)
	}
	if de.State == Completed {
		end := int64(e.u[uEnd])
		de.CompletedNs = cv.unix(end)
		switch {
		case e.gpu():
			de.DurationNs = int64(e.u[uGPU])
		case start != 0:
			de.DurationNs = cv.nanos(end - start)
		default:
			de.DurationNs = cv.nanos(max(end-int64(e.w[wEnq]), 0))
		}
	}
	return de
}

// Dump writes a snapshot of the recorder (see Snapshot) to w as JSON.
func (r *Recorder) Dump(w io.Writer, reason string) error {
	return r.Snapshot(reason).Write(w)
}

// DumpFile writes a snapshot of the recorder into a new file in dir
// (created if missing) and returns the file's path. The file is named
// nccl4go-trace-rank<R>-pid<P>-<T>.json, with the process rank R ("x" when
// unknown), the process id P and the dump time T in Unix milliseconds, so
// the dumps of all ranks of a job can share a directory. The file appears
// whole or not at all.
func (r *Recorder) DumpFile(dir, reason string) (string, error) {
	return r.Snapshot(reason).WriteFile(dir)
}

// FileName is the name DumpFile gives d's file.
func (d *Dump) FileName() string {
	rank := "x"
	if d.Rank >= 0 {
		rank = strconv.Itoa(d.Rank)
	}
	return fmt.Sprintf("nccl4go-trace-rank%s-pid%d-%d.json", rank, d.PID, d.TimeNs/int64(time.Millisecond))
}

// WriteFile writes d into a new file in dir (created if missing), named by
// FileName, and returns its path.
func (d *Dump) WriteFile(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("trace: dump: %w", err)
	}
	path := filepath.Join(dir, d.FileName())
	f, err := os.CreateTemp(dir, ".nccl4go-trace-*.tmp")
	if err != nil {
		return "", fmt.Errorf("trace: dump: %w", err)
	}
	werr := d.Write(f)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("trace: dump to %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("trace: dump: %w", err)
	}
	return path, nil
}

// Write writes d as indented JSON.
func (d *Dump) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("trace: writing dump: %w", err)
	}
	return nil
}

// MaxRanks is the largest communicator size a dump may state.
const MaxRanks = 1 << 20

// DumpError is a dump that cannot be read: not JSON, another schema, a
// version this package does not know, or contents that contradict
// themselves.
type DumpError struct {
	Source string // file name, or "" for a reader
	Err    error
}

// Error says which dump and what is wrong with it.
func (e *DumpError) Error() string {
	if e.Source != "" {
		return "trace: dump " + e.Source + ": " + e.Err.Error()
	}
	return "trace: dump: " + e.Err.Error()
}

// Unwrap is the underlying problem.
func (e *DumpError) Unwrap() error { return e.Err }

// maxDumpBytes bounds what [ReadDump] reads.
const maxDumpBytes = 1 << 30

// ReadDump reads one JSON dump and checks it (see Validate). At most 1
// GiB is read; a reader that knows its size (a file, [bytes.Reader],
// [strings.Reader]) and is over that is refused before anything is read.
func ReadDump(rd io.Reader) (*Dump, error) {
	if n, ok := readerSize(rd); ok && n > maxDumpBytes {
		return nil, &DumpError{Err: fmt.Errorf("larger than %d bytes (%d)", maxDumpBytes, n)}
	}
	b, err := io.ReadAll(io.LimitReader(rd, maxDumpBytes+1))
	if err != nil {
		return nil, &DumpError{Err: err}
	}
	if len(b) > maxDumpBytes {
		return nil, &DumpError{Err: fmt.Errorf("larger than %d bytes", maxDumpBytes)}
	}
	return decodeDump(b)
}

// readerSize is what remains to be read of rd, where rd can tell.
func readerSize(rd io.Reader) (int64, bool) {
	switch r := rd.(type) {
	case interface{ Len() int }: // bytes.Reader, strings.Reader, bytes.Buffer
		return int64(r.Len()), true
	case *os.File:
		st, err := r.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return 0, false
		}
		off, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false
		}
		return st.Size() - off, true
	}
	return 0, false
}

// decodeDump parses and validates a dump's bytes.
func decodeDump(b []byte) (*Dump, error) {
	var head struct {
		Schema  string `json:"schema"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, &DumpError{Err: fmt.Errorf("not a JSON dump: %w", err)}
	}
	if head.Schema != Schema {
		return nil, &DumpError{Err: fmt.Errorf("schema is %q, want %q", head.Schema, Schema)}
	}
	if head.Version != SchemaVersion {
		return nil, &DumpError{Err: fmt.Errorf("schema version %d, this reader knows version %d", head.Version, SchemaVersion)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var d Dump
	if err := dec.Decode(&d); err != nil {
		return nil, &DumpError{Err: err}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// ReadDumpFile reads the dump in the file at path. A file larger than 1
// GiB is refused before it is read.
func ReadDumpFile(path string) (*Dump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &DumpError{Source: path, Err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxDumpBytes {
		return nil, &DumpError{Source: path, Err: fmt.Errorf("larger than %d bytes (%d)", maxDumpBytes, st.Size())}
	}
	d, err := ReadDump(f)
	if err != nil {
		var de *DumpError
		if errors.As(err, &de) {
			de.Source = path
		}
		return nil, err
	}
	d.source = path
	return d, nil
}

// Source is the file [ReadDumpFile] read d from ("" otherwise).
func (d *Dump) Source() string { return d.source }

// Validate checks what the analyzer relies on: the schema and version,
// communicators with distinct ids, sizes above 0 and ranks within them,
// entries whose class matches their operation, and entries that agree with
// their communicator: no collective (point-to-point) sequence number above
// its last_seq (last_p2p_seq), and none twice. Entries naming a
// communicator the dump does not list are allowed (the recorder forgets
// closed communicators) and ignored by the analyzer.
func (d *Dump) Validate() error {
	fail := func(format string, args ...any) error {
		return &DumpError{Source: d.source, Err: fmt.Errorf(format, args...)}
	}
	if d.Schema != Schema || d.Version != SchemaVersion {
		return fail("schema %q version %d, want %q version %d", d.Schema, d.Version, Schema, SchemaVersion)
	}
	ids := map[uint32]*DumpComm{}
	for i := range d.Comms {
		c := &d.Comms[i]
		if ids[c.ID] != nil {
			return fail("comms[%d]: id %d appears twice", i, c.ID)
		}
		ids[c.ID] = c
		if c.Size <= 0 || c.Size > MaxRanks || c.Rank < 0 || c.Rank >= c.Size {
			return fail("comms[%d] (%q): rank %d of size %d", i, c.Name, c.Rank, c.Size)
		}
	}
	type seqKey struct {
		comm  uint32
		class Class
		seq   uint64
	}
	seen := map[seqKey]int{} // entry index by communicator, class and seq
	d.unknownComm = 0
	for i, e := range d.Entries {
		if e.Op == OpUnknown {
			return fail("entries[%d]: no op", i)
		}
		if e.Op >= numOps {
			return fail("entries[%d]: unknown op %v", i, e.Op)
		}
		if e.Class != e.Op.Class() {
			return fail("entries[%d]: %v is %v, not %v", i, e.Op, e.Op.Class(), e.Class)
		}
		c := ids[e.Comm]
		if c == nil {
			d.unknownComm++
			continue
		}
		switch {
		case e.Class == Collective && e.Seq > c.LastSeq:
			return fail("entries[%d]: %v seq %d on communicator %d (%q), whose last_seq %d is below it", i, e.Op, e.Seq, c.ID, c.Name, c.LastSeq)
		case e.Class == PointToPoint && e.Seq > c.LastP2PSeq:
			return fail("entries[%d]: %v seq %d on communicator %d (%q), whose last_p2p_seq %d is below it", i, e.Op, e.Seq, c.ID, c.Name, c.LastP2PSeq)
		}
		if e.Class == Local || e.Seq == 0 {
			continue
		}
		k := seqKey{e.Comm, e.Class, e.Seq}
		if j, ok := seen[k]; ok {
			return fail("entries[%d] and [%d]: %v seq %d twice on communicator %d (%q)", j, i, e.Class, e.Seq, c.ID, c.Name)
		}
		seen[k] = i
	}
	return nil
}

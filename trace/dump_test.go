package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSchemaRoundTrip: a dump written and read back is the same dump, and
// the JSON has the documented field names.
func TestSchemaRoundTrip(t *testing.T) {
	r := New(32)
	r.SetRank(3)
	c := r.RegisterComm(CommInfo{Name: "world", Hash: 0xfeedface12345678, Rank: 3, Size: 8, Device: 2})
	ref := c.Record(Event{Op: AllReduce, DataType: BFloat16, RedOp: Avg, Count: 1 << 20, Stream: 0x7f0012345678, Group: 9, Watched: true})
	c.Start(ref)
	c.CompleteIn(ref, time.Millisecond)
	c.Record(Event{Op: Broadcast, DataType: Int8, Count: 3, Peer: 0})
	c.Record(Event{Op: Send, DataType: Uint64, Count: 1, Peer: 5, Watched: true})
	c.Record(Event{Op: Abort})
	d := r.Snapshot("unit test")
	var b bytes.Buffer
	if err := d.Write(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, field := range []string{`"schema": "nccl4go-trace"`, `"version": 1`, `"reason": "unit test"`, `"rank": 3`,
		`"hash": "0xfeedface12345678"`, `"op": "AllReduce"`, `"dtype": "bfloat16"`, `"redop": "avg"`, `"count": 1048576`,
		`"bytes": 2097152`, `"stream": "0x7f0012345678"`, `"group": 9`, `"state": "completed"`, `"duration_ns": 1000000`,
		`"root": 0`, `"peer": 5`, `"class": "p2p"`, `"op": "Abort"`, `"buffer_entries": 32`, `"last_seq": 2`, `"last_p2p_seq": 1`} {
		if !strings.Contains(text, field) {
			t.Errorf("dump lacks %s:\n%s", field, text)
		}
	}
	// Fields that do not apply are left out.
	var raw struct {
		Entries []map[string]any `json:"entries"`
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Entries[1]["redop"]; ok {
		t.Error("Broadcast entry has a redop")
	}
	if _, ok := raw.Entries[1]["state"]; ok {
		t.Error("unwatched entry has a state")
	}
	if _, ok := raw.Entries[3]["count"]; ok {
		t.Error("Abort entry has a count")
	}
	back, err := ReadDump(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, d)
	}
}

func TestReadDumpRejects(t *testing.T) {
	for name, text := range map[string]string{
		"not json":        "hello",
		"other schema":    `{"schema":"torch","version":1}`,
		"future version":  `{"schema":"nccl4go-trace","version":99}`,
		"bad rank":        `{"schema":"nccl4go-trace","version":1,"comms":[{"id":1,"rank":4,"size":4}]}`,
		"duplicate id":    `{"schema":"nccl4go-trace","version":1,"comms":[{"id":1,"rank":0,"size":1},{"id":1,"rank":0,"size":1}]}`,
		"unknown op":      `{"schema":"nccl4go-trace","version":1,"entries":[{"op":"Dance","class":"collective"}]}`,
		"class mismatch":  `{"schema":"nccl4go-trace","version":1,"entries":[{"op":"Send","class":"collective"}]}`,
		"bad hash":        `{"schema":"nccl4go-trace","version":1,"comms":[{"id":1,"rank":0,"size":1,"hash":"zz"}]}`,
		"bad dtype":       `{"schema":"nccl4go-trace","version":1,"entries":[{"op":"AllReduce","class":"collective","dtype":"float33"}]}`,
		"missing op name": `{"schema":"nccl4go-trace","version":1,"entries":[{"class":"collective"}]}`,
	} {
		_, err := ReadDump(strings.NewReader(text))
		var de *DumpError
		if !errors.As(err, &de) {
			t.Errorf("%s: err = %v, want a *DumpError", name, err)
		}
	}
}

func TestDumpFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dumps")
	r := New(16)
	r.SetRank(5)
	c := r.RegisterComm(CommInfo{Name: "x", Rank: 0, Size: 1})
	c.Record(Event{Op: AllReduce})
	path, err := r.DumpFile(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	if base := filepath.Base(path); !strings.HasPrefix(base, "nccl4go-trace-rank5-pid") || !strings.HasSuffix(base, ".json") {
		t.Errorf("file name %s", base)
	}
	d, err := ReadDumpFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source() != path || len(d.Entries) != 1 || d.Rank != 5 {
		t.Errorf("read back %+v", d)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, err := ReadDumpFile(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: %v", err)
	}
}

// memStore is a Store for tests.
type memStore struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error
}

func (s *memStore) Set(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte(nil), value...)
	return nil
}

func (s *memStore) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		s.mu.Lock()
		v, ok := s.m[key]
		s.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (s *memStore) Check(ctx context.Context, keys ...string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	for _, k := range keys {
		if _, ok := s.m[k]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// TestCoordinatedDump: a request from one rank makes every other watching
// rank dump once; the requester's own watcher does not; a request already
// there when watching starts is ignored.
func TestCoordinatedDump(t *testing.T) {
	store := &memStore{}
	old := New(16)
	if _, err := old.RequestDump(context.Background(), store, "stale"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var recs []*Recorder
	var mu sync.Mutex
	dumped := map[int][]string{}
	var wg sync.WaitGroup
	for rank := range 3 {
		r := New(16)
		r.SetRank(rank)
		r.RegisterComm(CommInfo{Name: "w", Rank: rank, Size: 3}).Record(Event{Op: AllReduce})
		recs = append(recs, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.WatchDumpRequests(ctx, store, dir, &WatchOptions{
				Interval: 5 * time.Millisecond,
				OnDump: func(req DumpRequest, path string, err error) {
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					dumped[rank] = append(dumped[rank], req.Reason)
					mu.Unlock()
				},
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("watch returned %v", err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the watchers saw the stale request
	req, err := recs[1].RequestDump(ctx, store, "watchdog: AllReduce #1 timed out")
	if err != nil {
		t.Fatal(err)
	}
	if req.Rank != 1 || req.ID == "" {
		t.Errorf("request %+v", req)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(dumped[0]) + len(dumped[2])
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
	if len(dumped[0]) != 1 || len(dumped[2]) != 1 || len(dumped[1]) != 0 {
		t.Fatalf("dumps per rank: %v", dumped)
	}
	if dumped[0][0] != "watchdog: AllReduce #1 timed out" {
		t.Errorf("reason %q", dumped[0][0])
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 2 {
		t.Errorf("files %v", files)
	}
	for _, f := range files {
		d, err := ReadDumpFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(d.Reason, "from rank 1: watchdog") {
			t.Errorf("dump reason %q", d.Reason)
		}
	}
}

func TestWatchReportsStoreErrors(t *testing.T) {
	store := &memStore{fail: errors.New("connection refused")}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var n int
	err := New(16).WatchDumpRequests(ctx, store, t.TempDir(), &WatchOptions{Interval: 5 * time.Millisecond, OnError: func(error) { n++ }})
	if !errors.Is(err, context.DeadlineExceeded) || n == 0 {
		t.Errorf("err %v after %d errors", err, n)
	}
	if _, err := New(16).RequestDump(context.Background(), store, "x"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("RequestDump: %v", err)
	}
}

// FuzzReadDump: the reader never panics, and what it accepts survives a
// write and a second read unchanged.
func FuzzReadDump(f *testing.F) {
	r := New(16)
	c := r.RegisterComm(CommInfo{Name: "f", Hash: 1, Rank: 0, Size: 2})
	c.Record(Event{Op: AllReduce, DataType: Float32, Count: 4, Watched: true})
	c.Record(Event{Op: Send, Peer: 1, Count: 4})
	var b bytes.Buffer
	r.Snapshot("seed").Write(&b)
	f.Add(b.Bytes())
	f.Add([]byte(`{"schema":"nccl4go-trace","version":1}`))
	f.Add([]byte(`{"schema":"nccl4go-trace","version":1,"entries":[{"op":"Recv","class":"p2p","peer":-1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadDump(bytes.NewReader(data))
		if err != nil {
			return
		}
		_ = Analyze([]*Dump{d, d}).String()
		var out bytes.Buffer
		if err := d.Write(&out); err != nil {
			t.Fatal(err)
		}
		d2, err := ReadDump(&out)
		if err != nil {
			t.Fatalf("rereading a written dump: %v", err)
		}
		var o1, o2 bytes.Buffer
		d.Write(&o1)
		d2.Write(&o2)
		if o1.String() != o2.String() {
			t.Fatalf("dump changed on rewrite:\n%s\n%s", o1.String(), o2.String())
		}
	})
}

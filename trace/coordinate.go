package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Store is the part of a job's key-value store that coordinated dumps use.
// The rendezvous package's stores (rendezvous.Store: TCP, file and memory)
// satisfy it.
type Store interface {
	// Set stores value under key, replacing any value.
	Set(ctx context.Context, key string, value []byte) error
	// Get waits until key exists (or ctx ends) and returns its value.
	Get(ctx context.Context, key string) ([]byte, error)
	// Check reports whether every key exists, without waiting.
	Check(ctx context.Context, keys ...string) (bool, error)
}

// DumpRequestKey is the store key under which a rank asks every rank to
// dump; its value is a [DumpRequest] in JSON.
const DumpRequestKey = "nccl4go/trace/dump-request"

// DumpRequest is a request that every rank dump its recorder.
type DumpRequest struct {
	// ID is unique per request: "<rank>-<pid>-<unix ns>".
	ID string `json:"id"`
	// Rank is the process rank that asked (-1 unknown).
	Rank int `json:"rank"`
	// Reason says why, e.g. the watchdog's timeout message.
	Reason string `json:"reason"`
	// TimeNs is when it asked, in Unix nanoseconds.
	TimeNs int64 `json:"time_ns"`
}

// seenRequests is the set of request ids a recorder has acted on or made.
type seenRequests struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *seenRequests) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	if s.ids[id] {
		return false
	}
	s.ids[id] = true
	return true
}

// RequestDump asks every rank watching s (WatchDumpRequests) to dump, and
// returns the request. It does not dump r itself: the caller, which knows
// why, does that with DumpFile; r's own watcher skips this request.
func (r *Recorder) RequestDump(ctx context.Context, s Store, reason string) (DumpRequest, error) {
	if err := ctx.Err(); err != nil {
		return DumpRequest{}, err
	}
	r.mu.Lock()
	rank := r.processRankLocked()
	r.mu.Unlock()
	now := time.Now().UnixNano()
	req := DumpRequest{
		ID:     strconv.Itoa(rank) + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(now, 10),
		Rank:   rank,
		Reason: reason,
		TimeNs: now,
	}
	b, err := json.Marshal(req)
	if err != nil {
		return DumpRequest{}, fmt.Errorf("trace: dump request: %w", err)
	}
	r.requests.add(req.ID)
	if err := s.Set(ctx, DumpRequestKey, b); err != nil {
		return DumpRequest{}, fmt.Errorf("trace: asking every rank to dump: %w", err)
	}
	return req, nil
}

// WatchOptions tunes WatchDumpRequests. The zero value is usable.
type WatchOptions struct {
	// Interval between looks at the store; 0 means one second.
	Interval time.Duration
	// OnDump, when set, is called after each dump the watcher writes (or
	// fails to write), with the request that caused it.
	OnDump func(req DumpRequest, path string, err error)
	// OnError, when set, is told of each failed look at the store; the
	// watcher keeps looking.
	OnError func(err error)
}

// WatchDumpRequests watches s for dump requests (RequestDump, from any
// rank) until ctx ends, and for each new one writes a dump into dir
// (DumpFile) with the request's reason. A request already in the store
// when watching starts is not acted on: it predates this process's
// operations of interest. It returns ctx's error.
func (r *Recorder) WatchDumpRequests(ctx context.Context, s Store, dir string, opts *WatchOptions) error {
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	seen := &r.requests
	first := true
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		req, ok, err := readRequest(ctx, s, o.Interval)
		switch {
		case err != nil && ctx.Err() == nil:
			if o.OnError != nil {
				o.OnError(err)
			}
		case ok && seen.add(req.ID) && !first:
			reason := fmt.Sprintf("request %s from rank %d: %s", req.ID, req.Rank, req.Reason)
			path, err := r.DumpFile(dir, reason)
			if o.OnDump != nil {
				o.OnDump(req, path, err)
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// readRequest reads the current request, if any.
func readRequest(ctx context.Context, s Store, interval time.Duration) (DumpRequest, bool, error) {
	ok, err := s.Check(ctx, DumpRequestKey)
	if err != nil || !ok {
		return DumpRequest{}, false, err
	}
	gctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
	defer cancel()
	b, err := s.Get(gctx, DumpRequestKey)
	if err != nil {
		return DumpRequest{}, false, err
	}
	var req DumpRequest
	if err := json.Unmarshal(b, &req); err != nil || req.ID == "" {
		return DumpRequest{}, false, fmt.Errorf("trace: %s holds %q, not a dump request", DumpRequestKey, b)
	}
	return req, true, nil
}

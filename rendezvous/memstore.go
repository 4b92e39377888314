package rendezvous

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// NewMemStore returns an in-process [Store], for tests and for jobs whose ranks are
// goroutines of one process. It follows the semantics of torch's [TCPStore] server
// exactly (it is the same table the TCP server serves).
//
// The store is one object shared by every goroutine that holds it: Close ends it
// for all of them (later calls return [ErrClosed], and waiting calls return
// ErrClosed at once). Limits on key and value sizes do not apply.
func NewMemStore() Store {
	return &memStore{t: newTable(0)}
}

type memStore struct {
	t      *table
	prefix string      // added to every key (Server.Local: "/", as torch's client does)
	view   bool        // a view of a server's table: Close ends the view only
	closed atomic.Bool // views only
}

func (s *memStore) k(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + key
}

func (s *memStore) ks(keys []string) []string {
	if s.prefix == "" {
		return keys
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = s.prefix + k
	}
	return out
}

func (s *memStore) ok(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

func (s *memStore) Set(ctx context.Context, key string, value []byte) error {
	if err := s.ok(ctx); err != nil {
		return err
	}
	return s.t.set(s.k(key), bytes.Clone(value))
}

func (s *memStore) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		if err := s.Wait(ctx, key); err != nil {
			return nil, err
		}
		v, ok, err := s.t.get(s.k(key))
		if err != nil {
			return nil, err
		}
		if ok {
			return bytes.Clone(v), nil
		}
		// deleted between Wait and get: wait again
	}
}

func (s *memStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := s.ok(ctx); err != nil {
		return 0, err
	}
	n, err := s.t.add(s.k(key), delta)
	if err != nil {
		return 0, &KeyError{Op: "Add", Key: key, Err: err}
	}
	return n, nil
}

func (s *memStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	if err := s.ok(ctx); err != nil {
		return nil, err
	}
	v, err := s.t.compareSet(s.k(key), expected, bytes.Clone(desired))
	return bytes.Clone(v), err
}

func (s *memStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := s.ok(ctx); err != nil {
		return false, err
	}
	return s.t.check(s.ks(keys))
}

func (s *memStore) Wait(ctx context.Context, keys ...string) error {
	if err := s.ok(ctx); err != nil {
		return err
	}
	w, err := s.t.watch(s.ks(keys))
	if err != nil || w == nil {
		return err
	}
	select {
	case <-w.done:
		if s.t.isClosed() {
			return ErrClosed
		}
		return nil
	case <-ctx.Done():
		s.t.unwatch(w)
		return ctx.Err()
	}
}

func (s *memStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := s.ok(ctx); err != nil {
		return false, err
	}
	return s.t.del(s.k(key))
}

func (s *memStore) Close() error {
	if s.view {
		s.closed.Store(true)
		return nil
	}
	s.t.close()
	return nil
}

// table is the key-value table behind the in-memory store and the TCP server:
// values keyed by string, with waiters that learn when keys appear.
// Safe for concurrent use.
type table struct {
	mu       sync.Mutex
	m        map[string][]byte
	watchers map[string][]*watcher
	queues   map[string][][]byte
	bytes    int64 // sum of len(key)+len(value) stored
	maxBytes int64 // 0: unbounded
	closed   bool
}

// watcher waits for a set of keys; done is closed when all exist (or the table
// closes).
type watcher struct {
	keys      []string
	remaining int
	done      chan struct{} // closed when fired, unless notify is set
	notify    func()        // called (under the table's lock) when fired
	fired     bool
}

// fireLocked marks w done and tells its owner.
func (w *watcher) fireLocked() {
	if w.fired {
		return
	}
	w.fired = true
	if w.notify != nil {
		w.notify()
	} else {
		close(w.done)
	}
}

func newTable(maxBytes int64) *table {
	return &table{m: make(map[string][]byte), watchers: make(map[string][]*watcher),
		queues: make(map[string][][]byte), maxBytes: maxBytes}
}

func (t *table) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *table) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	for _, ws := range t.watchers {
		for _, w := range ws {
			if w.notify == nil {
				w.fireLocked()
			}
		}
	}
	t.watchers = nil
	t.m = nil
	t.queues = nil
}

// storeLocked puts key=value, accounting bytes and waking watchers.
func (t *table) storeLocked(key string, value []byte) error {
	old, had := t.m[key]
	grow := int64(len(value))
	if had {
		grow -= int64(len(old))
	} else {
		grow += int64(len(key))
	}
	if t.maxBytes > 0 && grow > 0 && t.bytes+grow > t.maxBytes {
		return fmt.Errorf("%w: store holds %d bytes, limit %d", ErrTooLarge, t.bytes, t.maxBytes)
	}
	t.bytes += grow
	t.m[key] = value
	if !had {
		if ws := t.watchers[key]; ws != nil {
			delete(t.watchers, key)
			for _, w := range ws {
				w.remaining--
				if w.remaining == 0 {
					w.fireLocked()
				}
			}
		}
	}
	return nil
}

func (t *table) set(key string, value []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	return t.storeLocked(key, value)
}

func (t *table) get(key string) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false, ErrClosed
	}
	v, ok := t.m[key]
	return v, ok, nil
}

func (t *table) add(key string, delta int64) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrClosed
	}
	old, had := t.m[key]
	n, text, err := addDecimal(old, had, delta)
	if err != nil {
		return 0, err
	}
	return n, t.storeLocked(key, text)
}

// compareSet follows torch: a missing key with an empty expected value is set to
// desired; a missing key with a non-empty expected value is left missing and
// expected is returned; an existing key is replaced when equal to expected, and
// the value now stored is returned.
func (t *table) compareSet(key string, expected, desired []byte) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	cur, had := t.m[key]
	if !had {
		if len(expected) == 0 {
			if err := t.storeLocked(key, desired); err != nil {
				return nil, err
			}
			return desired, nil
		}
		return expected, nil
	}
	if bytes.Equal(cur, expected) {
		if err := t.storeLocked(key, desired); err != nil {
			return nil, err
		}
		return desired, nil
	}
	return cur, nil
}

func (t *table) check(keys []string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false, ErrClosed
	}
	for _, k := range keys {
		if !t.existsLocked(k) {
			return false, nil
		}
	}
	return true, nil
}

func (t *table) del(key string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false, ErrClosed
	}
	v, ok := t.m[key]
	if ok {
		t.bytes -= int64(len(key) + len(v))
		delete(t.m, key)
	}
	return ok, nil
}

func (t *table) numKeys() (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrClosed
	}
	return int64(len(t.m)), nil
}

func (t *table) appendValue(key string, value []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	old := t.m[key]
	nv := make([]byte, 0, len(old)+len(value))
	nv = append(append(nv, old...), value...)
	return t.storeLocked(key, nv)
}

// watch registers a watcher for keys; it returns nil when all exist already.
func (t *table) watch(keys []string) (*watcher, error) {
	return t.watchNotify(keys, nil)
}

// existsLocked: torch counts a non-empty queue as an existing key for CHECK
// and WAIT.
func (t *table) existsLocked(k string) bool {
	if _, ok := t.m[k]; ok {
		return true
	}
	return len(t.queues[k]) > 0
}

// watchNotify is watch with a callback instead of a channel: notify runs
// under the table's lock when the keys exist, and must not block.
func (t *table) watchNotify(keys []string, notify func()) (*watcher, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	w := &watcher{notify: notify}
	for _, k := range keys {
		if t.existsLocked(k) {
			continue
		}
		w.keys = append(w.keys, k)
	}
	if len(w.keys) == 0 {
		return nil, nil
	}
	// count each missing key once
	seen := make(map[string]bool, len(w.keys))
	uniq := w.keys[:0]
	for _, k := range w.keys {
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	w.keys = uniq
	w.remaining = len(uniq)
	if notify == nil {
		w.done = make(chan struct{})
	}
	for _, k := range uniq {
		t.watchers[k] = append(t.watchers[k], w)
	}
	return w, nil
}

// pending reports whether w still waits.
func (t *table) pending(w *watcher) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.closed && !w.fired
}

// unwatch removes w from the keys it still waits for, without notifying.
func (t *table) unwatch(w *watcher) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || w.fired {
		return
	}
	w.fired = true
	if w.done != nil {
		close(w.done)
	}
	t.dropLocked(w)
}

func (t *table) dropLocked(w *watcher) {
	for _, k := range w.keys {
		ws := t.watchers[k]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(t.watchers, k)
		} else {
			t.watchers[k] = ws
		}
	}
}

func (t *table) list() ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	return keys, nil
}

// queuePush appends value to the queue named key and wakes one waiter of key
// (torch's QUEUE_PUSH).
func (t *table) queuePush(key string, value []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	grow := int64(len(value))
	if len(t.queues[key]) == 0 {
		grow += int64(len(key))
	}
	if t.maxBytes > 0 && t.bytes+grow > t.maxBytes {
		return fmt.Errorf("%w: store holds %d bytes, limit %d", ErrTooLarge, t.bytes, t.maxBytes)
	}
	t.bytes += grow
	t.queues[key] = append(t.queues[key], value)
	if ws := t.watchers[key]; len(ws) > 0 {
		w := ws[0]
		if len(ws) == 1 {
			delete(t.watchers, key)
		} else {
			t.watchers[key] = ws[1:]
		}
		w.remaining--
		if w.remaining == 0 {
			w.fireLocked()
		}
	}
	return nil
}

// queuePop removes the first value of the queue named key; n is the queue's
// length before the pop (0: nothing popped).
func (t *table) queuePop(key string) (n int64, value []byte, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, nil, ErrClosed
	}
	q := t.queues[key]
	if len(q) == 0 {
		return 0, nil, nil
	}
	n, value = int64(len(q)), q[0]
	q[0] = nil
	t.bytes -= int64(len(value))
	if len(q) == 1 {
		delete(t.queues, key)
		t.bytes -= int64(len(key))
	} else {
		t.queues[key] = q[1:]
	}
	return n, value, nil
}

func (t *table) queueLen(key string) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrClosed
	}
	return int64(len(t.queues[key])), nil
}

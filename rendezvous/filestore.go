package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
)

// FileStoreOptions configure [OpenFileStore]. The zero value (or nil) gives the
// defaults.
type FileStoreOptions struct {
	// RemoveAfter, when > 0, is the number of users of the file (torch's
	// world_size): when that many have closed it and none still has it open,
	// the last to close removes the file. 0 never removes it.
	RemoveAfter int
	// PollInterval is the longest pause between looks at the file while Get or
	// Wait waits (default 10 ms, torch's); the first looks come sooner.
	PollInterval time.Duration
	// MaxValueBytes bounds one value read from the file (default 1 GiB); a
	// longer record is reported as a corrupt file.
	MaxValueBytes int
}

// FileStore is a [Store] kept in one file on a file system shared by the ranks
// (NFS, Lustre, a local disk for one machine), for jobs with no network
// master. It reads and writes the file format of torch's FileStore (records
// of a uint32-length key and value, keys prefixed "/", deletions as "-/key"),
// locked with flock(2), so torch's FileStore and this one can share a file.
// Waiting polls the file (no inotify: it does not work on many shared file
// systems). Safe for concurrent use; several FileStores, in one process or
// many, may use the same file.
//
// A write that fails part way (a full disk, a quota, a file-size limit) is
// rolled back, and a torn record left by a writer killed mid-write is
// skipped by readers and cut off by the next writer: the store stays usable.
// A FileStore follows its path: when the file is replaced (another file
// renamed over it, or removed and made again, whatever its length), it
// reads the new file from its start, as a store opened now would; Close
// then counts this user out of the new file.
type FileStore struct {
	path string
	opts FileStoreOptions

	mu     sync.Mutex // guards cache, pos, info, closed, and serializes file access
	cache  map[string][]byte
	pos    int64
	info   os.FileInfo // the file the cache was read from (its identity)
	closed bool
}

const (
	fileKeyPrefix    = "/"
	fileDeletePrefix = "-"
	fileRefCountKey  = "refcount/"
	fileCleanupKey   = "cleanup/"
)

// ErrCorrupt: a file store's file holds something that is not a record.
var ErrCorrupt = errors.New("rendezvous: corrupt store file")

// OpenFileStore opens (creating if needed) the store kept in the file at path
// and counts itself as one of its users. opts may be nil.
func OpenFileStore(path string, opts *FileStoreOptions) (*FileStore, error) {
	var o FileStoreOptions
	if opts != nil {
		o = *opts
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 10 * time.Millisecond
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 30
	}
	s := &FileStore{path: path, opts: o, cache: make(map[string][]byte)}
	if _, err := s.addRaw(fileRefCountKey, 1); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the file's path.
func (s *FileStore) Path() string { return s.path }

// Close counts this user out; with RemoveAfter set, the last user removes the
// file. Later calls return [ErrClosed]. Idempotent.
func (s *FileStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if _, err := os.Stat(s.path); errors.Is(err, fs.ErrNotExist) {
		s.markClosed()
		return nil // removed already (torch's does the same)
	}
	finished, err1 := s.addRaw(fileCleanupKey, 1)
	refs, err2 := s.addRaw(fileRefCountKey, -1)
	s.markClosed()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if refs == 0 && s.opts.RemoveAfter > 0 && finished >= int64(s.opts.RemoveAfter) {
		os.Remove(s.path)
	}
	return nil
}

func (s *FileStore) markClosed() {
	s.mu.Lock()
	s.closed = true
	s.cache = nil
	s.mu.Unlock()
}

// withFile opens the file, takes its lock, brings the cache up to date and
// runs f, all under s.mu. write opens it for writing (creating it) and takes
// the exclusive lock. A missing file, when reading, is an empty store.
func (s *FileStore) withFile(write bool, f func(file *os.File) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR | os.O_CREATE
	}
	file, err := os.OpenFile(s.path, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) && !write {
		s.forget() // removed: an empty store, until a file comes back
		return f(nil)
	}
	if err != nil {
		return fmt.Errorf("rendezvous: file store: %w", err)
	}
	defer file.Close()
	if err := lockFile(file, write); err != nil {
		return fmt.Errorf("rendezvous: file store: lock %s: %w", s.path, err)
	}
	defer unlockFile(file)
	if err := s.refresh(file, write); err != nil {
		return err
	}
	return f(file)
}

// forget drops what was read, to read a new file from its start.
func (s *FileStore) forget() {
	s.pos = 0
	s.info = nil
	clear(s.cache)
}

// refresh reads the records added since the last look. A file replaced
// since then (another file at the path, whatever its length) is read from
// its start. A torn record at the end (a write that failed part way: a full
// disk, a quota, a file-size limit, a killed writer) is not the store's: a
// reader stops before it, a writer (holding the exclusive lock, so no write
// is in progress) cuts it off.
func (s *FileStore) refresh(file *os.File, write bool) error {
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("rendezvous: file store: %w", err)
	}
	size := st.Size()
	if s.info != nil && !os.SameFile(s.info, st) || size < s.pos { // replaced, or cut short: start over
		s.forget()
	}
	s.info = st
	if size == s.pos {
		return nil
	}
	data := make([]byte, size-s.pos)
	if _, err := file.ReadAt(data, s.pos); err != nil && err != io.EOF {
		return fmt.Errorf("rendezvous: file store: %w", err)
	}
	off := 0
	torn := false
	for off < len(data) {
		key, n1, st1 := fileField(data[off:], 1<<20)
		if st1 != fieldOK {
			torn = st1 == fieldShort
			break
		}
		val, n2, st2 := fileField(data[off+n1:], s.opts.MaxValueBytes)
		if st2 != fieldOK {
			torn = st2 == fieldShort
			break
		}
		off += n1 + n2
		k := string(key)
		if len(k) >= len(fileDeletePrefix) && k[:len(fileDeletePrefix)] == fileDeletePrefix {
			delete(s.cache, k[len(fileDeletePrefix):])
		} else {
			s.cache[k] = val
		}
	}
	s.pos += int64(off)
	if off < len(data) {
		if !torn {
			return fmt.Errorf("%w: %s: bad record at offset %d", ErrCorrupt, s.path, s.pos)
		}
		if write {
			if err := file.Truncate(s.pos); err != nil {
				return fmt.Errorf("rendezvous: file store: cutting off a torn record at offset %d of %s: %w", s.pos, s.path, err)
			}
			s.info, _ = file.Stat()
		}
	}
	return nil
}

const (
	fieldOK    = iota
	fieldShort // the data ends inside the field: a torn write
	fieldBad   // a length over the limit: not a record
)

// fileField parses a uint32 length and that many bytes.
func fileField(b []byte, max int) ([]byte, int, int) {
	if len(b) < 4 {
		return nil, 0, fieldShort
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(max) {
		return nil, 0, fieldBad
	}
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, fieldShort
	}
	return bytes.Clone(b[4 : 4+n]), 4 + int(n), fieldOK
}

// appendRecord writes one record at the end of the file (the caller holds the
// exclusive lock) and advances the cache over it.
func (s *FileStore) appendRecord(file *os.File, key string, value []byte) error {
	if uint64(len(key)) > 1<<32-1 || uint64(len(value)) > 1<<32-1 {
		return fmt.Errorf("%w: file store records hold at most 4 GiB", ErrTooLarge)
	}
	rec := make([]byte, 0, 8+len(key)+len(value))
	rec = binary.LittleEndian.AppendUint32(rec, uint32(len(key)))
	rec = append(rec, key...)
	rec = binary.LittleEndian.AppendUint32(rec, uint32(len(value)))
	rec = append(rec, value...)
	if _, err := file.WriteAt(rec, s.pos); err != nil {
		// Roll back what part of the record was written, so that the file
		// stays a list of whole records for every user (if this fails too,
		// the next writer cuts the torn record off).
		file.Truncate(s.pos)
		return fmt.Errorf("rendezvous: file store: write %s: %w", s.path, err)
	}
	s.pos += int64(len(rec))
	if len(key) >= len(fileDeletePrefix) && key[:len(fileDeletePrefix)] == fileDeletePrefix {
		delete(s.cache, key[len(fileDeletePrefix):])
	} else {
		s.cache[key] = bytes.Clone(value)
	}
	return nil
}

func (s *FileStore) addRaw(key string, delta int64) (int64, error) {
	var n int64
	err := s.withFile(true, func(file *os.File) error {
		old, had := s.cache[key]
		v, text, err := addDecimal(old, had && len(old) > 0, delta)
		if err != nil {
			return err
		}
		n = v
		return s.appendRecord(file, key, text)
	})
	return n, err
}

// Set stores value under key.
func (s *FileStore) Set(ctx context.Context, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.withFile(true, func(file *os.File) error {
		return s.appendRecord(file, fileKeyPrefix+key, value)
	})
}

// lookup returns key's value if the file has it now.
func (s *FileStore) lookup(keys []string) (v []byte, all bool, err error) {
	err = s.withFile(false, func(*os.File) error {
		all = true
		for _, k := range keys {
			val, ok := s.cache[fileKeyPrefix+k]
			if !ok {
				all = false
				return nil
			}
			v = val
		}
		return nil
	})
	return bytes.Clone(v), all, err
}

// poll calls look until it reports done, ctx ends or it fails.
func (s *FileStore) poll(ctx context.Context, look func() (bool, error)) error {
	pause := time.Millisecond
	for {
		done, err := look()
		if err != nil || done {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if pause *= 2; pause > s.opts.PollInterval {
			pause = s.opts.PollInterval
		}
	}
}

// Get waits until key exists (or ctx ends) and returns its value.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.poll(ctx, func() (bool, error) {
		val, ok, err := s.lookup([]string{key})
		v = val
		return ok, err
	})
	if err != nil {
		return nil, &KeyError{Op: "Get", Key: key, Err: err}
	}
	return v, nil
}

// Add adds delta to the integer under key and returns the new value.
func (s *FileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.addRaw(fileKeyPrefix+key, delta)
	if err != nil {
		return 0, &KeyError{Op: "Add", Key: key, Err: err}
	}
	return n, nil
}

// CompareSet sets key to desired if its value equals expected (a missing key
// matches an empty expected) and returns the value now stored (torch's
// semantics; see [Store]).
func (s *FileStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []byte
	err := s.withFile(true, func(file *os.File) error {
		k := fileKeyPrefix + key
		cur, had := s.cache[k]
		switch {
		case (!had && len(expected) == 0) || (had && bytes.Equal(cur, expected)):
			out = bytes.Clone(desired)
			return s.appendRecord(file, k, desired)
		case !had:
			out = bytes.Clone(expected)
		default:
			out = bytes.Clone(cur)
		}
		return nil
	})
	return out, err
}

// Check reports whether every key exists, without waiting.
func (s *FileStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	_, ok, err := s.lookup(keys)
	return ok, err
}

// Wait waits until every key exists or ctx ends.
func (s *FileStore) Wait(ctx context.Context, keys ...string) error {
	err := s.poll(ctx, func() (bool, error) {
		_, ok, err := s.lookup(keys)
		return ok, err
	})
	if err != nil {
		return &KeyError{Op: "Wait", Key: keyName(keys), Err: err}
	}
	return nil
}

// Delete removes key and reports whether it existed.
func (s *FileStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var existed bool
	err := s.withFile(true, func(file *os.File) error {
		k := fileKeyPrefix + key
		if _, existed = s.cache[k]; !existed {
			return nil
		}
		return s.appendRecord(file, fileDeletePrefix+k, nil)
	})
	return existed, err
}

// NumKeys returns the number of keys in the file (torch's bookkeeping keys
// included, as torch's getNumKeys counts them).
func (s *FileStore) NumKeys(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := s.withFile(false, func(*os.File) error {
		n = int64(len(s.cache))
		return nil
	})
	return n, err
}

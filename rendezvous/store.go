package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Store is a key-value store shared by the ranks of a job. Safe for concurrent use.
type Store interface {
	// Set stores value under key, replacing any value.
	Set(ctx context.Context, key string, value []byte) error
	// Get waits until key exists (or ctx ends) and returns its value.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add adds delta to the integer stored under key (missing key counts as 0; the value is the decimal text,
	// as torch stores it) and returns the new value.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// CompareSet sets key to desired if its current value equals expected (a missing key matches an empty
	// expected), and returns the value now stored (torch's compare_set semantics).
	CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error)
	// Check reports whether every key exists, without waiting.
	Check(ctx context.Context, keys ...string) (bool, error)
	// Wait waits until every key exists or ctx ends.
	Wait(ctx context.Context, keys ...string) error
	// Delete removes key and reports whether it existed.
	Delete(ctx context.Context, key string) (bool, error)
	// Close releases the client's resources. Idempotent.
	Close() error
}

// Errors returned by the stores. Test for them with errors.Is; the returned errors
// usually wrap them with the operation, key or address involved.
var (
	// ErrClosed: the store (or the client's connection, or the server) was closed.
	ErrClosed = errors.New("rendezvous: store closed")
	// ErrUnauthorized: the server requires a shared secret and the client did not
	// present the right one (or the client expected a secret the server does not use).
	ErrUnauthorized = errors.New("rendezvous: unauthorized")
	// ErrTooLarge: a key, value or key count exceeds the store's limits.
	ErrTooLarge = errors.New("rendezvous: too large")
	// ErrProtocol: the peer sent something that is not the [TCPStore] wire protocol,
	// or a reply the client did not expect.
	ErrProtocol = errors.New("rendezvous: protocol error")
	// ErrNotInteger: Add on a key whose value is not a decimal integer.
	ErrNotInteger = errors.New("rendezvous: value is not an integer")
	// ErrInvalidArgument: an empty key list or a malformed argument.
	ErrInvalidArgument = errors.New("rendezvous: invalid argument")
	// ErrServerFull: the server had no room for another connection (its
	// MaxConns); [Dial] retries within its budget and reports it as the last
	// failure.
	ErrServerFull = errors.New("rendezvous: store server full")
	// ErrOldTorch: the peer is a torch [TCPStore] older than 2.1, which has no
	// VALIDATE handshake (and numbers its commands differently). The store
	// serves, and joins, torch 2.1 and later; [Dial] fails at once with it.
	ErrOldTorch = errors.New("rendezvous: a pre-2.1 torch peer")
	// ErrUnreachable: the store's address could not be reached within the dial
	// budget; the wrapping *[DialError] names the address and how long it tried.
	ErrUnreachable = errors.New("rendezvous: store unreachable")
)

// Default limits: those of PyTorch's libuv [TCPStore] server (torch's default
// server since 2.4), so a request that torch's server would refuse is refused
// here too, by the client before it is sent. [ServerOptions] and [DialOptions] can
// change them.
const (
	// DefaultMaxKeyBytes is the largest key (torch: MAX_STRING_LEN, 8 KiB).
	DefaultMaxKeyBytes = 8 << 10
	// DefaultMaxValueBytes is the largest value (torch: MAX_PAYLOAD_LEN, 8 MiB).
	DefaultMaxValueBytes = 8 << 20
	// DefaultMaxKeys is the most keys in one CHECK, WAIT, MULTI_GET or
	// MULTI_SET (torch: MAX_KEY_COUNT, 128 Ki).
	DefaultMaxKeys = 128 << 10
)

// KeyError wraps an error with the operation and key it concerns.
type KeyError struct {
	Op  string // "Set", "Get", ...
	Key string
	Err error
}

// Error implements error.
func (e *KeyError) Error() string {
	return fmt.Sprintf("rendezvous: %s %q: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e *KeyError) Unwrap() error { return e.Err }

// WithPrefix returns a view of s in which every key is prefix + "/" + key, the
// convention of torch's PrefixStore, so a job's keys cannot collide with another
// user's of the same store. Closing the view closes s.
func WithPrefix(s Store, prefix string) Store {
	return &prefixStore{s: s, prefix: prefix + "/"}
}

type prefixStore struct {
	s      Store
	prefix string
}

func (p *prefixStore) k(key string) string { return p.prefix + key }

func (p *prefixStore) ks(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.prefix + k
	}
	return out
}

func (p *prefixStore) Set(ctx context.Context, key string, value []byte) error {
	return p.s.Set(ctx, p.k(key), value)
}

func (p *prefixStore) Get(ctx context.Context, key string) ([]byte, error) {
	return p.s.Get(ctx, p.k(key))
}

func (p *prefixStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return p.s.Add(ctx, p.k(key), delta)
}

func (p *prefixStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	return p.s.CompareSet(ctx, p.k(key), expected, desired)
}

func (p *prefixStore) Check(ctx context.Context, keys ...string) (bool, error) {
	return p.s.Check(ctx, p.ks(keys)...)
}

func (p *prefixStore) Wait(ctx context.Context, keys ...string) error {
	return p.s.Wait(ctx, p.ks(keys)...)
}

func (p *prefixStore) Delete(ctx context.Context, key string) (bool, error) {
	return p.s.Delete(ctx, p.k(key))
}

func (p *prefixStore) Close() error { return p.s.Close() }

// addDecimal applies torch's ADD to an existing value: the value is the decimal
// text of a signed 64-bit integer (a missing value counts as 0), read as C++'s
// std::stoll reads it (leading white space, a sign, digits, anything after them
// ignored; no digits or overflow is an error). The sum wraps like torch's.
func addDecimal(old []byte, exists bool, delta int64) (int64, []byte, error) {
	var cur int64
	if exists {
		v, ok := parseStoll(old)
		if !ok {
			return 0, nil, ErrNotInteger
		}
		cur = v
	}
	n := cur + delta
	return n, strconv.AppendInt(nil, n, 10), nil
}

func parseStoll(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || (b[i] >= '\t' && b[i] <= '\r')) {
		i++
	}
	start := i
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b[start:i]), 10, 64)
	return v, err == nil
}

// orDefault sets an option left unset (zero or negative) to its default.
func orDefault[T int | int64 | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

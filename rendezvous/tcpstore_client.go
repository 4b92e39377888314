package rendezvous

import (
	"bufio"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DialOptions configure [Dial]. The zero value (or nil) gives the defaults.
type DialOptions struct {
	// Secret, when not empty, is the job's shared secret: the client proves
	// it knows it to a server of this package started with the same Secret
	// (and the server proves it back). Leave it empty to join a torch store:
	// torch's servers have no secret.
	Secret string
	// Timeout is how long [Dial] (and a later reconnect) keeps trying to reach
	// the server: connection refused, reset or unanswered are retried with
	// backoff until then (default 5 minutes, torch's default). The context
	// can end it sooner.
	Timeout time.Duration
	// MaxKeyBytes, MaxValueBytes and MaxKeys are checked before a request is
	// sent (defaults: torch's server limits). Raise them only for a server of
	// this package started with larger limits.
	MaxKeyBytes, MaxValueBytes, MaxKeys int
	// MaxIdleConns is how many connections the client keeps open for reuse
	// (default 2). Concurrent calls each use a connection of their own, so one
	// goroutine's Wait never holds up another's Set.
	MaxIdleConns int
}

const (
	defaultDialTimeout  = 5 * time.Minute
	handshakeStepLimit  = 10 * time.Second
	cancelWaitTimeout   = 10 * time.Second
	clientReadBuffer    = 4 << 10
	defaultMaxIdleConns = 2
)

// DialError reports that a store could not be reached: it names the address,
// how long the client tried and how many times, and the last failure. It
// matches [ErrUnreachable] with errors.Is (and ctx's error, if the context ended
// the attempt).
type DialError struct {
	Addr     string
	Elapsed  time.Duration
	Attempts int
	Err      error // the last attempt's error
}

// Error implements error.
func (e *DialError) Error() string {
	what := "unreachable"
	switch {
	case errors.Is(e.Err, ErrOldTorch):
		what = "is a torch store older than 2.1 (found"
	case errors.Is(e.Err, ErrInvalidArgument):
		what = "cannot be dialed (found"
	case errors.Is(e.Err, ErrServerFull):
		what = "had no room for another connection"
	case errors.Is(e.Err, ErrProtocol):
		what = "answered, but not as a store,"
	}
	if strings.HasSuffix(what, "(found") {
		return fmt.Sprintf("rendezvous: store at %s %s at once, %d attempt(s)): %v", e.Addr, what, e.Attempts, e.Err)
	}
	return fmt.Sprintf("rendezvous: store at %s %s after %v (%d attempts): %v",
		e.Addr, what, e.Elapsed.Round(time.Millisecond), e.Attempts, e.Err)
}

// Unwrap returns [ErrUnreachable] and the last attempt's error.
func (e *DialError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// TCPStore is a client of a TCPStore server: torch's (the store torchrun's
// agent hosts at MASTER_ADDR:MASTER_PORT, or any torch.distributed.TCPStore
// master) or this package's [Server]. It implements [Store] and the rest of
// torch's client operations. Safe for concurrent use: each concurrent call
// uses a connection of its own.
//
// Keys are sent as torch's client sends them, with a "/" in front, so that
// Set(ctx, "k", v) here and store.set("k", v) in Python name the same key. Use
// [WithPrefix] to keep a job's keys apart from torch's own.
//
// Every call takes a context; when it ends, the call returns its error. A Wait
// or Get that is cancelled tells the server (CANCEL_WAIT) and keeps the
// connection; another call cut short drops its connection. A broken
// connection is replaced on the next call, within Timeout.
type TCPStore struct {
	addr   string
	opts   DialOptions
	secret []byte

	mu     sync.Mutex
	idle   []*clientConn
	live   map[*clientConn]struct{} // every open connection, idle or in use
	closed bool
	nonce  atomic.Uint32
}

// Dial connects to the store at addr ("host:port"), retrying what can go
// away (connection refused while the server starts, resets, no answer, a
// name not resolved yet, a full server: [ErrServerFull]) until opts.Timeout or
// ctx ends; then it fails with a *[DialError] naming the address and how long
// it tried. It fails at once, after at most one attempt, on what retrying
// cannot fix: an address that is not host:port with a port 1-65535 or whose
// host is a malformed IP literal ([ErrInvalidArgument]), a torch server older
// than 2.1 ([ErrOldTorch]), a server that refuses the client's secret or lack
// of one ([ErrUnauthorized]); and after three protocol errors in a row (not a
// store). opts may be nil.
func Dial(ctx context.Context, addr string, opts *DialOptions) (*TCPStore, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	orDefault(&o.Timeout, defaultDialTimeout)
	orDefault(&o.MaxKeyBytes, DefaultMaxKeyBytes)
	orDefault(&o.MaxValueBytes, DefaultMaxValueBytes)
	orDefault(&o.MaxKeys, DefaultMaxKeys)
	orDefault(&o.MaxIdleConns, defaultMaxIdleConns)
	s := &TCPStore{addr: addr, opts: o, live: make(map[*clientConn]struct{})}
	if o.Secret != "" {
		s.secret = []byte(o.Secret)
	}
	s.nonce.Store(rand.Uint32())
	if err := checkAddr(addr); err != nil {
		return nil, &DialError{Addr: addr, Err: err}
	}
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.put(c)
	return s, nil
}

// Addr returns the address the client was dialed to.
func (s *TCPStore) Addr() string { return s.addr }

// Close closes the client's connections. Calls in flight fail; later calls
// return [ErrClosed]. Idempotent.
func (s *TCPStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for c := range s.live {
		c.nc.Close()
	}
	s.idle = nil
	s.live = nil
	return nil
}

// discard closes a connection that is out of step or not wanted.
func (s *TCPStore) discard(c *clientConn) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
	c.nc.Close()
}

// clientConn is one connection to the server, used by one call at a time.
type clientConn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte

	dmu   sync.Mutex // guards armed, for the context's AfterFunc
	armed bool

	ext bool // the server is of this package: WAIT_GET is available
}

// nextNonce returns a PING nonce; it never has helloBit or extBit set.
func (s *TCPStore) nextNonce() uint32 { return s.nonce.Add(1) & nonceMask }

// get takes an idle connection or makes a new one.
func (s *TCPStore) get(ctx context.Context) (*clientConn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.nc.Close()
		return nil, ErrClosed
	}
	s.live[c] = struct{}{}
	return c, nil
}

// put returns a healthy connection for reuse.
func (s *TCPStore) put(c *clientConn) {
	s.mu.Lock()
	if !s.closed && len(s.idle) < s.opts.MaxIdleConns {
		s.idle = append(s.idle, c)
		s.live[c] = struct{}{}
		c = nil
	} else if !s.closed {
		delete(s.live, c)
	}
	s.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
}

var errNoAnswer = errors.New("no answer")

// dial connects and validates, retrying until the budget ends.
func (s *TCPStore) dial(ctx context.Context) (*clientConn, error) {
	start := time.Now()
	deadline := start.Add(s.opts.Timeout)
	ctxDeadline, hasCtxDeadline := ctx.Deadline()
	if hasCtxDeadline && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
	}
	backoff := 10 * time.Millisecond
	attempts, protocolErrs := 0, 0
	fail := func(last error) error {
		// The context's deadline may have passed a moment before ctx.Err()
		// says so; report it as the context's either way.
		if cerr := ctx.Err(); cerr != nil {
			last = errors.Join(cerr, last)
		} else if hasCtxDeadline && !time.Now().Before(ctxDeadline) {
			last = errors.Join(context.DeadlineExceeded, last)
		}
		return &DialError{Addr: s.addr, Elapsed: time.Since(start), Attempts: attempts, Err: last}
	}
	for {
		attempts++
		c, err := s.dialOnce(ctx, deadline)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrUnauthorized) {
			return nil, err
		}
		if permanent(err) {
			return nil, fail(err)
		}
		// Something answers on the port, and not as a store: three times
		// in a row is no store starting up, it is the wrong address.
		if errors.Is(err, ErrProtocol) {
			if protocolErrs++; protocolErrs >= 3 {
				return nil, fail(err)
			}
		} else {
			protocolErrs = 0
		}
		if ctx.Err() != nil {
			return nil, fail(err)
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		if backoff < time.Second {
			backoff *= 2
		}
		if time.Now().Add(sleep).After(deadline) {
			return nil, fail(err)
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fail(err)
		}
	}
}

// permanent reports whether a dial failure cannot go away by retrying: a
// pre-2.1 torch server, an address the resolver rejects as malformed.
// Connection refused, reset, unanswered, a name not found (yet) and a full
// server are retried.
func permanent(err error) bool {
	var ae *net.AddrError
	var pe *net.ParseError
	return errors.Is(err, ErrOldTorch) || errors.Is(err, ErrInvalidArgument) || errors.As(err, &ae) || errors.As(err, &pe)
}

// checkAddr rejects, before any attempt, an address no retry can reach: not
// host:port, a port that is not 1-65535 (or a known service name), or a host
// written as an IP literal that is not one. The error wraps
// [ErrInvalidArgument].
func checkAddr(addr string) error {
	if err := addrProblem(addr); err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrInvalidArgument, addr, err)
	}
	return nil
}

func addrProblem(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not host:port")
	}
	if err := checkPort(port); err != nil {
		return err
	}
	if strings.IndexFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("host %q has a space or a control character", host)
	}
	h, _, _ := strings.Cut(host, "%")
	literal := strings.Contains(h, ":") || (h != "" && strings.Trim(h, "0123456789.") == "")
	if literal && net.ParseIP(h) == nil {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	return nil
}

// checkPort accepts a TCP port number 1-65535 or a service name the system
// knows.
func checkPort(port string) error {
	if port == "" {
		return errors.New("no port")
	}
	if n, err := strconv.ParseUint(port, 10, 64); err == nil || strings.Trim(port, "0123456789") == "" {
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not 1-65535", port)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is not a number or a known service", port)
	}
	return nil
}

func (s *TCPStore) dialOnce(ctx context.Context, deadline time.Time) (*clientConn, error) {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &clientConn{nc: nc, br: bufio.NewReaderSize(nc, clientReadBuffer)}
	now := time.Now()
	step := now.Add(handshakeStepLimit)
	if deadline.Before(step) {
		step = deadline
	}
	nc.SetDeadline(step)
	if err := s.handshake(c); err != nil {
		nc.Close()
		if os.IsTimeout(err) {
			err = fmt.Errorf("%w from the server within %v", errNoAnswer, max(0, step.Sub(now)).Round(time.Millisecond))
		}
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// handshake sends VALIDATE (torch's, or the secret handshake) and a PING.
func (s *TCPStore) handshake(c *clientConn) error {
	b := c.buf[:0]
	if s.secret == nil {
		b = appendRequest(b, &request{op: qValidate, u32: validationMagic})
	} else {
		var cn [authNonceLen]byte
		crand.Read(cn[:])
		b = appendRequest(b, &request{op: qValidate, u32: authMagic, nonce: cn[:]})
		if _, err := c.nc.Write(b); err != nil {
			return err
		}
		sn, err := readVector(c.br, authNonceLen)
		if errors.Is(err, errFull) {
			return fmt.Errorf("%w (MaxConns connections are open)", ErrServerFull)
		}
		if err != nil {
			if os.IsTimeout(err) {
				return fmt.Errorf("%w: no answer to the secret handshake; a torch store has no secret: dial it without one", ErrUnauthorized)
			}
			return fmt.Errorf("secret handshake: %w", err)
		}
		if len(sn) == 0 {
			return fmt.Errorf("%w: the server has no secret but this client was given one", ErrUnauthorized)
		}
		if len(sn) != authNonceLen {
			return fmt.Errorf("%w: secret handshake: challenge of %d bytes", ErrProtocol, len(sn))
		}
		b = appendBytes(b[:0], authMAC(s.secret, "client", cn[:], sn))
		if _, err := c.nc.Write(b); err != nil {
			return err
		}
		mac, err := readVector(c.br, authMACLen)
		if err != nil && !os.IsTimeout(err) {
			return fmt.Errorf("%w: the server refused the secret (%v)", ErrUnauthorized, err)
		}
		if err != nil {
			return err
		}
		if len(mac) == 0 {
			return fmt.Errorf("%w: the server refused the secret", ErrUnauthorized)
		}
		if !hmac.Equal(mac, authMAC(s.secret, "server", cn[:], sn)) {
			return fmt.Errorf("%w: the server does not know the secret", ErrUnauthorized)
		}
		b = b[:0]
	}
	nonce := s.nextNonce() | helloBit | oldTorchBit
	b = appendRequest(b, &request{op: qPing, u32: nonce})
	if _, err := c.nc.Write(b); err != nil {
		if s.secret == nil && closedByPeer(err) {
			return oldTorchErr(err)
		}
		return err
	}
	got, err := readU32(c.br)
	c.buf = b[:0]
	if err != nil {
		if s.secret == nil && closedByPeer(err) {
			// torch before 2.1 reads VALIDATE as a SET of an impossible
			// key length and drops the connection at once; a store of
			// this package (or torch's since 2.1) answers the PING.
			return oldTorchErr(err)
		}
		return err
	}
	if got == fullNonce {
		return fmt.Errorf("%w (MaxConns connections are open)", ErrServerFull)
	}
	if got == refusedNonce && s.secret == nil {
		return fmt.Errorf("%w: the server requires a secret", ErrUnauthorized)
	}
	switch got {
	case nonce: // torch's server
	case nonce ^ extBit:
		c.ext = true
	default:
		return fmt.Errorf("%w: PING answered %#x, want %#x", ErrProtocol, got, nonce)
	}
	return nil
}

// closedByPeer reports whether err is the peer closing or resetting the
// connection.
func closedByPeer(err error) bool {
	return err == io.EOF || err == io.ErrUnexpectedEOF || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

func oldTorchErr(err error) error {
	return fmt.Errorf("%w: the server closed the connection at the VALIDATE handshake without an answer, as "+
		"torch's TCPStore before 2.1 does (it has no VALIDATE); nccl4go's store joins torch 2.1 and later (%v)",
		ErrOldTorch, err)
}

// errFull is readVector's "server full" answer (fullLen).
var errFull = errors.New("server full")

func readU32(r *bufio.Reader) (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func readU64(r *bufio.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readVector reads a length-prefixed byte vector of at most max bytes.
func readVector(r *bufio.Reader, max int) ([]byte, error) {
	n, err := readU64(r)
	if err != nil {
		return nil, err
	}
	if n == fullLen {
		return nil, errFull
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: reply of %d bytes (limit %d)", ErrProtocol, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, noEOF(err)
	}
	return b, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// arm makes the connection's reads and writes fail when ctx ends; disarm
// undoes it. Contexts that never end cost nothing.
func (c *clientConn) arm(ctx context.Context) (disarm func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	c.dmu.Lock()
	c.armed = true
	c.dmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.dmu.Lock()
		if c.armed {
			c.nc.SetDeadline(time.Unix(1, 0))
		}
		c.dmu.Unlock()
	})
	return func() {
		stop()
		c.dmu.Lock()
		c.armed = false
		c.dmu.Unlock()
		c.nc.SetDeadline(time.Time{})
	}
}

// op runs f on a connection, with ctx armed. f returns whether the connection
// is still in step with the server. Errors are wrapped with the operation and
// key.
func (s *TCPStore) op(ctx context.Context, name, key string, f func(c *clientConn) (healthy bool, err error)) error {
	if err := ctx.Err(); err != nil {
		return &KeyError{Op: name, Key: key, Err: err}
	}
	c, err := s.get(ctx)
	if err != nil {
		return &KeyError{Op: name, Key: key, Err: err}
	}
	disarm := c.arm(ctx)
	healthy, err := f(c)
	disarm()
	if healthy {
		s.put(c)
	} else {
		s.discard(c)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = cerr
		} else if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: the server at %s closed the connection", ErrProtocol, s.addr)
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = ErrClosed
		}
		return &KeyError{Op: name, Key: key, Err: err}
	}
	return nil
}

func (s *TCPStore) checkKey(key string) error {
	if len(key)+1 > s.opts.MaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes (limit %d)", ErrTooLarge, len(key)+1, s.opts.MaxKeyBytes)
	}
	return nil
}

func (s *TCPStore) checkValue(v []byte) error {
	if len(v) > s.opts.MaxValueBytes {
		return fmt.Errorf("%w: value of %d bytes (limit %d)", ErrTooLarge, len(v), s.opts.MaxValueBytes)
	}
	return nil
}

func (s *TCPStore) checkKeys(keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys", ErrInvalidArgument)
	}
	if len(keys) > s.opts.MaxKeys {
		return fmt.Errorf("%w: %d keys (limit %d)", ErrTooLarge, len(keys), s.opts.MaxKeys)
	}
	for _, k := range keys {
		if err := s.checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

func wireKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = "/" + k
	}
	return out
}

func keyName(keys []string) string { return strings.Join(keys, ",") }

// send writes a request built by appendRequest.
func (c *clientConn) send(req *request) error {
	c.buf = appendRequest(c.buf[:0], req)
	_, err := c.nc.Write(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
	return err
}

// confirm sends req followed by a PING, and waits for the PING's answer: the
// server has applied req when it answers (requests without a reply are
// confirmed this way; a server that refuses req closes the connection).
func (s *TCPStore) confirm(c *clientConn, req *request) (bool, error) {
	nonce := s.nextNonce()
	c.buf = appendRequest(c.buf[:0], req)
	c.buf = appendRequest(c.buf, &request{op: qPing, u32: nonce})
	if _, err := c.nc.Write(c.buf); err != nil {
		return false, err
	}
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
	got, err := readU32(c.br)
	if err != nil {
		return false, noEOF(err)
	}
	if got == tooLargeNonce && c.ext {
		return false, fmt.Errorf("%w: the server's store is full (its MaxStoreBytes)", ErrTooLarge)
	}
	if got != nonce {
		return false, fmt.Errorf("%w: PING answered %#x, want %#x", ErrProtocol, got, nonce)
	}
	return true, nil
}

// Set stores value under key. It returns once the server has stored it.
func (s *TCPStore) Set(ctx context.Context, key string, value []byte) error {
	return s.write(ctx, "Set", qSet, key, value)
}

// write sends a query that writes value under key (SET, APPEND) and waits
// for the server's confirmation.
func (s *TCPStore) write(ctx context.Context, op string, q queryType, key string, value []byte) error {
	if err := errors.Join(s.checkKey(key), s.checkValue(value)); err != nil {
		return &KeyError{Op: op, Key: key, Err: err}
	}
	return s.op(ctx, op, key, func(c *clientConn) (bool, error) {
		return s.confirm(c, &request{op: q, key: "/" + key, value: value})
	})
}

// Get waits until key exists (or ctx ends) and returns its value. Like torch's
// client it sends WAIT, then GET.
func (s *TCPStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.checkKey(key); err != nil {
		return nil, &KeyError{Op: "Get", Key: key, Err: err}
	}
	var v []byte
	wk := []string{"/" + key}
	err := s.op(ctx, "Get", key, func(c *clientConn) (bool, error) {
		if c.ext {
			var err error
			var ok bool
			v, ok, err = s.waitGet(ctx, c, wk[0])
			return ok, err
		}
		if ok, err := s.wait(ctx, c, wk); err != nil {
			return ok, err
		}
		if err := c.send(&request{op: qGet, key: wk[0]}); err != nil {
			return false, err
		}
		var err error
		v, err = readVector(c.br, s.opts.MaxValueBytes)
		return err == nil, noEOF(err)
	})
	return v, err
}

// wait sends WAIT and waits for STOP_WAITING; when ctx ends first it cancels
// the wait on the server and returns ctx's error with the connection healthy.
func (s *TCPStore) wait(ctx context.Context, c *clientConn, wireKeys []string) (bool, error) {
	if err := c.send(&request{op: qWait, keys: wireKeys}); err != nil {
		return false, err
	}
	r, err := c.br.ReadByte()
	if err == nil {
		if r != waitStop {
			return false, fmt.Errorf("%w: WAIT answered %d", ErrProtocol, r)
		}
		return true, nil
	}
	if ctx.Err() == nil || !os.IsTimeout(err) {
		return false, noEOF(err)
	}
	// Cancelled: tell the server, within a bound of our own.
	c.dmu.Lock()
	c.armed = false
	c.dmu.Unlock()
	c.nc.SetDeadline(time.Now().Add(cancelWaitTimeout))
	if err := c.send(&request{op: qCancelWait}); err != nil {
		return false, ctx.Err()
	}
	r, err = c.br.ReadByte()
	if err == nil && r == waitStop { // the keys came just before the cancel
		r, err = c.br.ReadByte()
	}
	if err != nil || r != waitCanceled {
		return false, ctx.Err()
	}
	return true, ctx.Err()
}

// waitGet is Get in one round trip on a server of this package (WAIT_GET):
// the answer is STOP_WAITING and the value; when ctx ends first it cancels on
// the server, which answers WAIT_CANCELED (after the value, if that won).
func (s *TCPStore) waitGet(ctx context.Context, c *clientConn, wireKey string) ([]byte, bool, error) {
	if err := c.send(&request{op: qWaitGet, key: wireKey}); err != nil {
		return nil, false, err
	}
	r, err := c.br.ReadByte()
	if err == nil {
		if r != waitStop {
			return nil, false, fmt.Errorf("%w: WAIT_GET answered %d", ErrProtocol, r)
		}
		v, err := readVector(c.br, s.opts.MaxValueBytes)
		return v, err == nil, noEOF(err)
	}
	if ctx.Err() == nil || !os.IsTimeout(err) {
		return nil, false, noEOF(err)
	}
	c.dmu.Lock()
	c.armed = false
	c.dmu.Unlock()
	c.nc.SetDeadline(time.Now().Add(cancelWaitTimeout))
	if err := c.send(&request{op: qCancelWait}); err != nil {
		return nil, false, ctx.Err()
	}
	r, err = c.br.ReadByte()
	if err == nil && r == waitStop { // the value came just before the cancel
		if _, err = readVector(c.br, s.opts.MaxValueBytes); err == nil {
			r, err = c.br.ReadByte()
		}
	}
	if err != nil || r != waitCanceled {
		return nil, false, ctx.Err()
	}
	return nil, true, ctx.Err()
}

// Add adds delta to the integer under key and returns the new value. A server
// closes the connection when the value is not an integer (torch's does so
// too); the error then says so.
func (s *TCPStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, &KeyError{Op: "Add", Key: key, Err: err}
	}
	var n int64
	err := s.op(ctx, "Add", key, func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qAdd, key: "/" + key, delta: delta}); err != nil {
			return false, err
		}
		u, err := readU64(c.br)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, fmt.Errorf("%w: the server closed the connection (the value is not an integer, or the server is gone)", ErrProtocol)
		}
		n = int64(u)
		return err == nil, err
	})
	return n, err
}

// CompareSet sets key to desired if its value equals expected (a missing key
// matches an empty expected) and returns the value now stored; for a missing
// key and a non-empty expected it returns expected (torch's semantics).
func (s *TCPStore) CompareSet(ctx context.Context, key string, expected, desired []byte) ([]byte, error) {
	if err := errors.Join(s.checkKey(key), s.checkValue(expected), s.checkValue(desired)); err != nil {
		return nil, &KeyError{Op: "CompareSet", Key: key, Err: err}
	}
	var v []byte
	err := s.op(ctx, "CompareSet", key, func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qCompareSet, key: "/" + key, expected: expected, value: desired}); err != nil {
			return false, err
		}
		var err error
		v, err = readVector(c.br, s.opts.MaxValueBytes)
		return err == nil, noEOF(err)
	})
	return v, err
}

// Check reports whether every key exists, without waiting.
func (s *TCPStore) Check(ctx context.Context, keys ...string) (bool, error) {
	if err := s.checkKeys(keys); err != nil {
		return false, &KeyError{Op: "Check", Key: keyName(keys), Err: err}
	}
	var ok bool
	err := s.op(ctx, "Check", keyName(keys), func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qCheck, keys: wireKeys(keys)}); err != nil {
			return false, err
		}
		r, err := c.br.ReadByte()
		if err != nil {
			return false, noEOF(err)
		}
		switch r {
		case checkReady:
			ok = true
		case checkNotReady:
		default:
			return false, fmt.Errorf("%w: CHECK answered %d", ErrProtocol, r)
		}
		return true, nil
	})
	return ok, err
}

// Wait waits until every key exists or ctx ends.
func (s *TCPStore) Wait(ctx context.Context, keys ...string) error {
	if err := s.checkKeys(keys); err != nil {
		return &KeyError{Op: "Wait", Key: keyName(keys), Err: err}
	}
	return s.op(ctx, "Wait", keyName(keys), func(c *clientConn) (bool, error) {
		return s.wait(ctx, c, wireKeys(keys))
	})
}

// Delete removes key and reports whether it existed.
func (s *TCPStore) Delete(ctx context.Context, key string) (bool, error) {
	if err := s.checkKey(key); err != nil {
		return false, &KeyError{Op: "Delete", Key: key, Err: err}
	}
	var existed bool
	err := s.op(ctx, "Delete", key, func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qDeleteKey, key: "/" + key}); err != nil {
			return false, err
		}
		n, err := readU64(c.br)
		existed = n == 1
		return err == nil, noEOF(err)
	})
	return existed, err
}

// NumKeys returns the number of keys the server holds (all of them, torch's
// and other prefixes' included).
func (s *TCPStore) NumKeys(ctx context.Context) (int64, error) {
	var n int64
	err := s.op(ctx, "NumKeys", "", func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qGetNumKeys}); err != nil {
			return false, err
		}
		u, err := readU64(c.br)
		n = int64(u)
		return err == nil, noEOF(err)
	})
	return n, err
}

// Append appends value to the value under key (creating it).
func (s *TCPStore) Append(ctx context.Context, key string, value []byte) error {
	return s.write(ctx, "Append", qAppend, key, value)
}

// MultiGet waits until every key exists and returns their values in order.
func (s *TCPStore) MultiGet(ctx context.Context, keys ...string) ([][]byte, error) {
	if err := s.checkKeys(keys); err != nil {
		return nil, &KeyError{Op: "MultiGet", Key: keyName(keys), Err: err}
	}
	var vals [][]byte
	wk := wireKeys(keys)
	err := s.op(ctx, "MultiGet", keyName(keys), func(c *clientConn) (bool, error) {
		if ok, err := s.wait(ctx, c, wk); err != nil {
			return ok, err
		}
		if err := c.send(&request{op: qMultiGet, keys: wk}); err != nil {
			return false, err
		}
		vals = make([][]byte, len(keys))
		for i := range vals {
			v, err := readVector(c.br, s.opts.MaxValueBytes)
			if err != nil {
				return false, noEOF(err)
			}
			vals[i] = v
		}
		return true, nil
	})
	return vals, err
}

// MultiSet stores values[i] under keys[i] for every i.
func (s *TCPStore) MultiSet(ctx context.Context, keys []string, values [][]byte) error {
	err := s.checkKeys(keys)
	if err == nil && len(values) != len(keys) {
		err = fmt.Errorf("%w: %d keys, %d values", ErrInvalidArgument, len(keys), len(values))
	}
	for i := 0; err == nil && i < len(values); i++ {
		err = s.checkValue(values[i])
	}
	if err != nil {
		return &KeyError{Op: "MultiSet", Key: keyName(keys), Err: err}
	}
	return s.op(ctx, "MultiSet", keyName(keys), func(c *clientConn) (bool, error) {
		return s.confirm(c, &request{op: qMultiSet, keys: wireKeys(keys), values: values})
	})
}

// QueuePush appends value to the queue named key (torch ≥ 2.6, libuv server).
func (s *TCPStore) QueuePush(ctx context.Context, key string, value []byte) error {
	if err := errors.Join(s.checkKey(key), s.checkValue(value)); err != nil {
		return &KeyError{Op: "QueuePush", Key: key, Err: err}
	}
	return s.op(ctx, "QueuePush", key, func(c *clientConn) (bool, error) {
		return s.confirm(c, &request{op: qQueuePush, key: "/" + key, value: value})
	})
}

// QueuePop removes and returns the first value of the queue named key. With
// block it waits (within ctx) for one; otherwise an empty queue returns ok
// false.
func (s *TCPStore) QueuePop(ctx context.Context, key string, block bool) (value []byte, ok bool, err error) {
	if err := s.checkKey(key); err != nil {
		return nil, false, &KeyError{Op: "QueuePop", Key: key, Err: err}
	}
	wk := "/" + key
	err = s.op(ctx, "QueuePop", key, func(c *clientConn) (bool, error) {
		if block {
			if ok, err := s.wait(ctx, c, []string{wk}); err != nil {
				return ok, err
			}
		}
		if err := c.send(&request{op: qQueuePop, key: wk}); err != nil {
			return false, err
		}
		n, err := readU64(c.br)
		if err != nil {
			return false, noEOF(err)
		}
		if int64(n) <= 0 {
			return true, nil
		}
		value, err = readVector(c.br, s.opts.MaxValueBytes)
		ok = err == nil
		return ok, noEOF(err)
	})
	return value, ok, err
}

// QueueLen returns the length of the queue named key.
func (s *TCPStore) QueueLen(ctx context.Context, key string) (int64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, &KeyError{Op: "QueueLen", Key: key, Err: err}
	}
	var n int64
	err := s.op(ctx, "QueueLen", key, func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qQueueLen, key: "/" + key}); err != nil {
			return false, err
		}
		u, err := readU64(c.br)
		n = int64(u)
		return err == nil, noEOF(err)
	})
	return n, err
}

// List returns the keys set through torch-style clients (those stored with
// the "/" prefix), without the prefix, in no particular order.
func (s *TCPStore) List(ctx context.Context) ([]string, error) {
	var keys []string
	err := s.op(ctx, "List", "", func(c *clientConn) (bool, error) {
		if err := c.send(&request{op: qList}); err != nil {
			return false, err
		}
		n, err := readU64(c.br)
		if err != nil {
			return false, noEOF(err)
		}
		if n > uint64(s.opts.MaxKeys)*16 {
			return false, fmt.Errorf("%w: LIST of %d keys", ErrProtocol, n)
		}
		for range n {
			k, err := readVector(c.br, s.opts.MaxKeyBytes)
			if err != nil {
				return false, noEOF(err)
			}
			if len(k) > 0 && k[0] == '/' {
				keys = append(keys, string(k[1:]))
			}
		}
		return true, nil
	})
	return keys, err
}

// Ping makes one round trip to the server.
func (s *TCPStore) Ping(ctx context.Context) error {
	return s.op(ctx, "Ping", "", func(c *clientConn) (bool, error) {
		nonce := s.nextNonce()
		if err := c.send(&request{op: qPing, u32: nonce}); err != nil {
			return false, err
		}
		got, err := readU32(c.br)
		if err != nil {
			return false, noEOF(err)
		}
		if got != nonce {
			return false, fmt.Errorf("%w: PING answered %#x, want %#x", ErrProtocol, got, nonce)
		}
		return true, nil
	})
}

package rendezvous

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions configure a [Server]. The zero value (or nil) gives the defaults.
//
// What one connection can make the server hold, with the defaults:
//   - before its handshake completes: at most [MaxHandshakeBytes] bytes read
//     (torch's VALIDATE, or nccl4go's challenge and response), no request
//     memory, and its MaxConns slot for at most HandshakeTimeout;
//   - after it: one request of at most MaxRequestBytes, of which everything
//     past the first 64 KiB comes from MaxPendingBytes, shared by all;
//   - replies it has not read: at most MaxReplyBytes, and all connections
//     together at most MaxTotalReplyBytes (the connection whose reply does
//     not fit is closed, after the server has closed connections that stopped
//     reading their replies to make room);
//   - and the store itself at most MaxStoreBytes.
type ServerOptions struct {
	// Secret, when not empty, is a shared secret every client must prove it
	// knows (nccl4go's extension of the protocol, see the package's [TCPStore]
	// documentation). torch's clients cannot connect to such a server; leave it
	// empty to serve them.
	Secret string
	// MaxConns bounds the connections open at once, those still in their
	// handshake included (default 16384). A connection beyond it is answered
	// "server full" and closed: this package's clients report [ErrServerFull]
	// and retry until their dial budget ends.
	MaxConns int
	// HandshakeTimeout bounds a new connection's handshake: its VALIDATE
	// (and, with a Secret, the challenge and response) must be complete
	// within it, or the connection is closed (default 10 s).
	HandshakeTimeout time.Duration
	// MaxKeyBytes, MaxValueBytes and MaxKeys bound one key, one value and the
	// keys of one request (defaults: torch's limits, [DefaultMaxKeyBytes],
	// [DefaultMaxValueBytes], [DefaultMaxKeys]). A request over a limit closes
	// its connection.
	MaxKeyBytes, MaxValueBytes, MaxKeys int
	// MaxRequestBytes bounds one request (default [DefaultMaxRequestBytes]).
	MaxRequestBytes int64
	// MaxStoreBytes bounds the keys and values the server holds (default
	// 1 GiB). A write past it closes the writer's connection; this package's
	// clients report [ErrTooLarge].
	MaxStoreBytes int64
	// MaxPendingBytes bounds the bytes of requests being read by all
	// connections together, past the first 64 KiB of each (default 256 MiB):
	// a large request waits (within MessageTimeout) for others to finish.
	MaxPendingBytes int64
	// MaxReplyBytes bounds the replies queued for one connection and not yet
	// taken by its client (default 32 MiB, room for four of the largest
	// values); a reply past it closes the connection.
	MaxReplyBytes int64
	// MaxTotalReplyBytes bounds the replies queued for all connections
	// together (default 256 MiB). When a reply does not fit, the server first
	// closes connections that have stopped reading (largest backlog first),
	// then, if there is still no room, the connection of that reply.
	MaxTotalReplyBytes int64
	// MessageTimeout is how long a client may take to send the rest of a
	// message it has started (default 30 s). An idle connection between
	// messages is never timed out.
	MessageTimeout time.Duration
	// WriteTimeout is how long a reply may wait for a client that does not
	// read (default 30 s); then the connection is closed.
	WriteTimeout time.Duration
	// Logf, when set, receives one line per connection closed for bad input.
	Logf func(format string, args ...any)
}

// MaxHandshakeBytes is the most a server reads from a connection before its
// handshake completes: nccl4go's secret handshake (a 29-byte VALIDATE with
// its challenge, then a 40-byte answer); torch's VALIDATE is 5 bytes.
const MaxHandshakeBytes = 5 + 8 + authNonceLen + 8 + authMACLen

const (
	defaultMaxConns       = 16384
	defaultMaxStoreBytes  = 1 << 30
	defaultMaxPending     = 256 << 20
	defaultMessageTimeout = 30 * time.Second
	defaultHandshake      = 10 * time.Second
	defaultMaxReply       = 32 << 20
	defaultMaxTotalReply  = 256 << 20
	maxRefusing           = 64 // "server full" answers being sent at once
	refuseLinger          = 250 * time.Millisecond
	pendingUnit           = 64 << 10
	serverReadBuffer      = 4 << 10
	replyFlushSize        = 256 << 10
)

func (o *ServerOptions) normalized() ServerOptions {
	var n ServerOptions
	if o != nil {
		n = *o
	}
	orDefault(&n.MaxConns, defaultMaxConns)
	orDefault(&n.MaxKeyBytes, DefaultMaxKeyBytes)
	orDefault(&n.MaxValueBytes, DefaultMaxValueBytes)
	orDefault(&n.MaxKeys, DefaultMaxKeys)
	orDefault(&n.MaxRequestBytes, DefaultMaxRequestBytes)
	orDefault(&n.MaxStoreBytes, defaultMaxStoreBytes)
	orDefault(&n.MaxPendingBytes, defaultMaxPending)
	orDefault(&n.MessageTimeout, defaultMessageTimeout)
	orDefault(&n.WriteTimeout, defaultMessageTimeout)
	orDefault(&n.HandshakeTimeout, defaultHandshake)
	orDefault(&n.MaxReplyBytes, defaultMaxReply)
	orDefault(&n.MaxTotalReplyBytes, defaultMaxTotalReply)
	return n
}

// Server serves a key-value store over TCP in the wire protocol of PyTorch's
// c10d [TCPStore]: torch's clients (torch.distributed.TCPStore with
// is_master=False) and this package's [Dial] can use it. Safe for concurrent use.
//
// A connection that sends something that is not the protocol, breaks a limit,
// or stops in the middle of a message is closed; the others are not affected
// and nothing stored is lost. What a connection can make the server hold is
// bounded, before its handshake and after it: see [ServerOptions].
//
// # Compatible mode and secret mode
//
// Without a Secret the server is torch-compatible: any client that speaks the
// protocol may read and write every key, as with torch's own TCPStore (which
// has no authentication at all). Use it where torch's ranks must join, or to
// join torch's store from Go (Dial without a Secret, under a [WithPrefix] of the
// job's own).
//
// With a Secret (a Go-only job; the launcher makes one per job and passes it
// in the environment) a client must first prove it knows the secret: its
// first message is VALIDATE with nccl4go's magic 0x4E344701 instead of
// torch's 0x3C85F7CE, carrying a 16-byte random challenge; the server answers
// with a challenge of its own; the client sends HMAC-SHA256(secret, "nccl4go
// store client" | its challenge | the server's), and the server answers
// HMAC-SHA256(secret, "nccl4go store server" | ...) so the client knows the
// server holds the secret too. The secret never crosses the wire; the traffic
// after it is not encrypted. A torch client never sends that first message: it
// sends torch's VALIDATE, which such a server refuses (its PING is answered
// with 0xFFFFFFFF and the connection closed, which torch reports as a failed
// ping). A client without the secret, or with another, gets nothing.
//
// # Extensions
//
// A client of this package says hello with a PING whose nonce has the top
// bit set (torch's client sends its process id, which never has it). This
// server answers with bit 30 flipped, torch's echoes the nonce; on a
// connection that said hello the server also serves WAIT_GET (command 0x80),
// a Get in one round trip instead of torch's WAIT then GET. Nothing changes for
// torch's clients, and this package's client falls back to WAIT then GET on
// torch's servers.
//
// # torch versions
//
// torch's clients from 2.1 on are served. torch before 2.1 sends no
// VALIDATE and numbers its commands one lower; such a client is closed at
// once, with a log line naming a pre-2.1 torch peer ([ErrOldTorch]): its
// protocol has no way to carry an error to it, so it sees the connection
// closed.
type Server struct {
	ln      net.Listener
	opts    ServerOptions
	lim     limits
	t       *table
	pending chan struct{} // tokens of pendingUnit bytes
	secret  []byte

	mu     sync.Mutex
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup

	active   atomic.Int64
	refused  atomic.Int64
	refusing atomic.Int64 // "server full" answers in progress
	dropped  atomic.Int64
	evicted  atomic.Int64 // connections closed to make room for replies
	replies  atomic.Int64 // bytes of replies queued, all connections

	// stuckAfter is how long a connection's reply must have been waiting
	// for its client before the connection can be closed to make room for
	// others' replies (tests shorten it).
	stuckAfter time.Duration

	torchOnly atomic.Bool // tests: answer hello PINGs as torch's server does
}

// Listen starts a server on addr ("host:port"; port 0 picks a free port, see
// Addr). opts may be nil.
func Listen(addr string, opts *ServerOptions) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: listen on %s: %w", addr, err)
	}
	return Serve(ln, opts), nil
}

// Serve starts a server on a listener the caller made; the server owns ln
// from now on and closes it on Close. opts may be nil.
func Serve(ln net.Listener, opts *ServerOptions) *Server {
	o := opts.normalized()
	s := &Server{
		ln:   ln,
		opts: o,
		lim: limits{maxKey: o.MaxKeyBytes, maxValue: o.MaxValueBytes, maxKeys: o.MaxKeys,
			maxRequest: o.MaxRequestBytes},
		t:       newTable(o.MaxStoreBytes),
		pending: make(chan struct{}, max(1, int(o.MaxPendingBytes/pendingUnit))),
		conns:   make(map[*serverConn]struct{}),

		stuckAfter: time.Second,
	}
	if o.Secret != "" {
		s.secret = []byte(o.Secret)
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Conns returns the number of connections being served.
func (s *Server) Conns() int { return int(s.active.Load()) }

// Local returns a [Store] that reads and writes the server's table directly, in
// the same key space as its TCP clients (keys as a torch client names them).
// Closing it does not stop the server; closing the server ends it.
func (s *Server) Local() Store {
	return &memStore{t: s.t, prefix: "/", view: true}
}

// Close stops accepting, closes every connection, waits for their handlers
// to return and drops the table. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.t.close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: back off, as net/http does.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.logf("rendezvous: accept: %v; retrying in %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if s.active.Load() >= int64(s.opts.MaxConns) {
			s.refused.Add(1)
			if s.refusing.Add(1) > maxRefusing {
				s.refusing.Add(-1)
				nc.Close()
				continue
			}
			s.wg.Add(1)
			go s.refuse(nc)
			continue
		}
		c := &serverConn{s: s, nc: nc}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.active.Add(1)
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// fullReply answers a client the server has no room for, in place of its
// first reply: read as a PING's u32 answer it is fullNonce, read as the
// secret handshake's u64 length it is fullLen; neither is a normal answer.
var fullReply = []byte{0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

const (
	fullNonce uint32 = 0xFFFFFFFE
	fullLen   uint64 = 0xFFFFFFFFFFFFFFFE
)

// refuse tells a client the server is full, then closes: it half-closes and
// reads what the client sent (a little, briefly) so that the answer is not
// lost to a reset.
func (s *Server) refuse(nc net.Conn) {
	defer s.wg.Done()
	defer s.refusing.Add(-1)
	nc.SetDeadline(time.Now().Add(refuseLinger))
	nc.Write(fullReply)
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyN(io.Discard, nc, 4<<10)
	nc.Close()
}

// serverConn is one client connection. Its own goroutine reads and answers
// requests; a WAIT's late answer is queued by whoever sets the last key.
type serverConn struct {
	s  *Server
	nc net.Conn
	br *bufio.Reader
	rd deadlineReader

	mu  sync.Mutex // guards out
	out []byte
	wmu sync.Mutex // serializes writes to nc

	waiter *watcher
	held   int  // pending tokens held for the current request
	ext    bool // the client said hello: nccl4go extensions on

	qmu        sync.Mutex   // guards changes to queued and evicted
	queued     atomic.Int64 // bytes of replies queued or being written
	evicted    bool         // closed to make room: its bytes were given back
	writeSince atomic.Int64 // when the write in progress began (UnixNano), 0: none
}

// deadlineReader sets the connection's read deadline lazily: only when a read
// has to reach the network, and only when it changed.
type deadlineReader struct {
	nc      net.Conn
	want    time.Time
	applied time.Time
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	if !r.want.Equal(r.applied) {
		if err := r.nc.SetReadDeadline(r.want); err != nil {
			return 0, err
		}
		r.applied = r.want
	}
	return r.nc.Read(p)
}

func (c *serverConn) serve() {
	s := c.s
	defer func() {
		if c.waiter != nil {
			s.t.unwatch(c.waiter)
		}
		c.release()
		c.nc.Close()
		c.giveBackReplies()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.active.Add(-1)
		s.wg.Done()
	}()
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	// The handshake reads fixed-size messages straight from the socket:
	// until it completes, a connection costs no more than that.
	c.nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	if !c.handshake() {
		return
	}
	c.nc.SetDeadline(time.Time{})
	c.rd.nc = c.nc
	c.br = bufio.NewReaderSize(&c.rd, serverReadBuffer)
	d := &decoder{r: c.br, lim: s.lim}
	d.grow = c.grow
	var req request
	started := func() { c.rd.want = time.Now().Add(s.opts.MessageTimeout) }
	for {
		c.rd.want = time.Time{}
		err := d.next(&req, started)
		if err != nil {
			c.drop("read", err)
			return
		}
		if err := c.handle(&req); err != nil {
			if c.ext && errors.Is(err, ErrTooLarge) && isWrite(req.op) {
				// A write the store has no room for: tell this package's
				// client so, in place of the PING answer it waits for.
				c.nc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
				c.nc.Write(appendU32(nil, tooLargeNonce))
			}
			c.drop(req.op.String(), err)
			return
		}
		c.release()
		if c.br.Buffered() == 0 {
			if err := c.flush(); err != nil {
				return
			}
		}
	}
}

// drop logs why a connection ends, unless it simply closed.
func (c *serverConn) drop(what string, err error) {
	if err == io.EOF || errors.Is(err, net.ErrClosed) {
		return
	}
	c.s.dropped.Add(1)
	c.s.logf("rendezvous: store server: closing connection from %s: %s: %v", c.nc.RemoteAddr(), what, err)
}

// grow is called as a request's size passes each pendingUnit past the first:
// it takes a token from the server's budget, waiting at most until the
// message's deadline.
func (c *serverConn) grow() error {
	select {
	case c.s.pending <- struct{}{}:
		c.held++
		return nil
	default:
	}
	wait := time.Until(c.rd.want)
	if c.rd.want.IsZero() || wait <= 0 {
		wait = time.Millisecond
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c.s.pending <- struct{}{}:
		c.held++
		return nil
	case <-t.C:
		return tooLarge("server busy: more than %d bytes of requests pending", c.s.opts.MaxPendingBytes)
	}
}

func (c *serverConn) release() {
	for ; c.held > 0; c.held-- {
		<-c.s.pending
	}
}

// handshake reads and checks the first message (and, in secret mode, the
// challenge and response), straight from the socket in fixed-size reads of
// at most [MaxHandshakeBytes] in all. It returns false when the connection
// must end (it has been answered or dropped).
func (c *serverConn) handshake() bool {
	s := c.s
	var b [8 + authMACLen]byte
	if _, err := io.ReadFull(c.nc, b[:5]); err != nil {
		c.drop("handshake", handshakeErr(err, "VALIDATE", s.opts.HandshakeTimeout))
		return false
	}
	op, magic := queryType(b[0]), binary.LittleEndian.Uint32(b[1:5])
	if op != qValidate || (magic != validationMagic && magic != authMagic) {
		c.drop("handshake", firstMessageErr(op, magic))
		return false
	}
	if magic == validationMagic {
		if s.secret == nil {
			return true
		}
		// A client without the secret: answer its PING, if it sends one
		// soon, with the refusal nonce so that our clients can tell, then
		// close. torch's client reports a failed ping.
		if _, err := io.ReadFull(c.nc, b[:5]); err == nil && queryType(b[0]) == qPing {
			c.nc.Write(appendU32(nil, refusedNonce))
		}
		c.drop("handshake", fmt.Errorf("%w: client has no secret", ErrUnauthorized))
		return false
	}
	// nccl4go's secret handshake: the client's challenge.
	if _, err := io.ReadFull(c.nc, b[:8+authNonceLen]); err != nil {
		c.drop("handshake", handshakeErr(err, "challenge", s.opts.HandshakeTimeout))
		return false
	}
	if n := binary.LittleEndian.Uint64(b[:8]); n != authNonceLen {
		c.drop("handshake", protoErr("auth challenge of %d bytes, want %d", n, authNonceLen))
		return false
	}
	var cn, sn [authNonceLen]byte
	copy(cn[:], b[8:8+authNonceLen])
	if s.secret == nil {
		c.nc.Write(appendU64(nil, 0)) // "no secret here"
		c.drop("handshake", fmt.Errorf("%w: client sent a secret; this server has none", ErrUnauthorized))
		return false
	}
	rand.Read(sn[:])
	if _, err := c.nc.Write(appendBytes(nil, sn[:])); err != nil {
		c.drop("handshake", err)
		return false
	}
	if _, err := io.ReadFull(c.nc, b[:8+authMACLen]); err != nil {
		c.drop("handshake", handshakeErr(err, "answer", s.opts.HandshakeTimeout))
		return false
	}
	if n := binary.LittleEndian.Uint64(b[:8]); n != authMACLen ||
		!hmac.Equal(b[8:8+authMACLen], authMAC(s.secret, "client", cn[:], sn[:])) {
		c.nc.Write(appendU64(nil, 0))
		c.drop("handshake", fmt.Errorf("%w: wrong secret", ErrUnauthorized))
		return false
	}
	_, err := c.nc.Write(appendBytes(nil, authMAC(s.secret, "server", cn[:], sn[:])))
	return err == nil
}

// handshakeErr names a handshake read that failed.
func handshakeErr(err error, what string, limit time.Duration) error {
	if os.IsTimeout(err) {
		return fmt.Errorf("no %s within %v (HandshakeTimeout)", what, limit)
	}
	if err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%s cut short: %w", what, err)
	}
	return err
}

// firstMessageErr explains a first message that is not VALIDATE. torch
// before 2.1 sent no VALIDATE, and its command bytes were one lower (SET was
// 0, ADD 3): a first byte from 0 to 12 (with, for 0, a "magic" that reads as
// the low half of a key's length) is most likely such a client.
func firstMessageErr(op queryType, magic uint32) error {
	if int(op) < len(oldQueryNames) && (op != qValidate || magic < 1<<16) {
		return fmt.Errorf("%w: its first message is %s in torch's numbering before 2.1 (byte %d), not VALIDATE: "+
			"torch before 2.1 sends none; this store serves torch 2.1 and later", ErrOldTorch, oldQueryNames[op], uint8(op))
	}
	if op != qValidate {
		return protoErr("first message is %v, want VALIDATE", op)
	}
	return protoErr("bad validation magic %#x", magic)
}

// oldQueryNames are the command bytes of torch before 2.1 (1.13's numbering).
var oldQueryNames = [...]string{"SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS", "WATCH_KEY",
	"DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT"}

// isWrite reports whether op stores something (answered by the client's
// confirming PING).
func isWrite(op queryType) bool {
	switch op {
	case qSet, qAppend, qMultiSet, qQueuePush:
		return true
	}
	return false
}

// authMAC is one side's answer in the secret handshake.
func authMAC(secret []byte, side string, clientNonce, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nccl4go store " + side))
	m.Write(clientNonce)
	m.Write(serverNonce)
	return m.Sum(nil)
}

// reserve accounts n more bytes of replies to c, within MaxReplyBytes and
// MaxTotalReplyBytes (making room by closing connections that stopped
// reading, when the total is reached). An error means c must be closed.
func (c *serverConn) reserve(n int) error {
	s := c.s
	for {
		c.qmu.Lock()
		switch {
		case c.evicted:
			c.qmu.Unlock()
			return net.ErrClosed
		case c.queued.Load()+int64(n) > s.opts.MaxReplyBytes:
			c.qmu.Unlock()
			return tooLarge("more than %d bytes of replies queued for a client that does not read them (MaxReplyBytes)",
				s.opts.MaxReplyBytes)
		}
		if s.replies.Add(int64(n)) <= s.opts.MaxTotalReplyBytes {
			c.queued.Add(int64(n))
			c.qmu.Unlock()
			return nil
		}
		s.replies.Add(-int64(n))
		c.qmu.Unlock()
		if !s.makeRoom(c) {
			return tooLarge("more than %d bytes of replies queued for all clients (MaxTotalReplyBytes)",
				s.opts.MaxTotalReplyBytes)
		}
	}
}

// unreserve gives back n bytes of c's replies once written (or dropped).
func (c *serverConn) unreserve(n int) {
	c.qmu.Lock()
	if !c.evicted {
		c.queued.Add(-int64(n))
		c.s.replies.Add(-int64(n))
	}
	c.qmu.Unlock()
}

// giveBackReplies returns to the server's total what c still has queued
// (its connection is closed; a write still in progress fails).
func (c *serverConn) giveBackReplies() {
	c.qmu.Lock()
	if !c.evicted {
		c.evicted = true
		c.s.replies.Add(-c.queued.Swap(0))
	}
	c.qmu.Unlock()
}

// makeRoom closes the connection, other than c, with the largest backlog of
// replies among those whose client has not taken a reply for stuckAfter. It
// reports whether it closed one.
func (s *Server) makeRoom(c *serverConn) bool {
	now := time.Now().UnixNano()
	s.mu.Lock()
	var victim *serverConn
	for o := range s.conns {
		since := o.writeSince.Load()
		if o == c || since == 0 || now-since < int64(s.stuckAfter) || o.queued.Load() == 0 {
			continue
		}
		if victim == nil || o.queued.Load() > victim.queued.Load() {
			victim = o
		}
	}
	s.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.qmu.Lock()
	if !victim.evicted {
		victim.evicted = true
		s.replies.Add(-victim.queued.Swap(0))
		s.evicted.Add(1)
	}
	victim.qmu.Unlock()
	victim.nc.Close()
	s.logf("rendezvous: store server: closing connection from %s: it stopped reading its replies and others need the room (MaxTotalReplyBytes)",
		victim.nc.RemoteAddr())
	return true
}

// queue adds b to the replies (b is copied); a large backlog is written now.
func (c *serverConn) queue(b []byte) error {
	if err := c.reserve(len(b)); err != nil {
		return err
	}
	c.mu.Lock()
	c.out = append(c.out, b...)
	big := len(c.out) >= replyFlushSize
	c.mu.Unlock()
	if big {
		return c.flush()
	}
	return nil
}

// flush writes the queued replies. Writers take wmu, so replies go out in
// the order they were queued.
func (c *serverConn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	defer c.unreserve(len(out))
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	c.writeSince.Store(time.Now().UnixNano())
	_, err := c.nc.Write(out)
	c.writeSince.Store(0)
	if err != nil {
		c.nc.Close() // the reader notices and cleans up
		return err
	}
	// Give the buffer back for reuse unless it grew large or others queued.
	c.mu.Lock()
	if c.out == nil && cap(out) <= replyFlushSize {
		c.out = out[:0]
	}
	c.mu.Unlock()
	return nil
}

// handle applies one request and queues its reply.
func (c *serverConn) handle(req *request) error {
	t := c.s.t
	var b [16]byte
	switch req.op {
	case qSet:
		return t.set(req.key, req.value)
	case qCompareSet:
		v, err := t.compareSet(req.key, req.expected, req.value)
		if err != nil {
			return err
		}
		if err := c.queueBytes(v); err != nil {
			return err
		}
	case qGet:
		v, _, err := t.get(req.key)
		if err != nil {
			return err
		}
		if err := c.queueBytes(v); err != nil {
			return err
		}
	case qAdd:
		n, err := t.add(req.key, req.delta)
		if err != nil {
			return &KeyError{Op: "ADD", Key: req.key, Err: err}
		}
		if err := c.queue(appendU64(b[:0], uint64(n))); err != nil {
			return err
		}
	case qCheck:
		ok, err := t.check(req.keys)
		if err != nil {
			return err
		}
		r := checkNotReady
		if ok {
			r = checkReady
		}
		if err := c.queue(append(b[:0], r)); err != nil {
			return err
		}
	case qWait:
		if c.waiter != nil && t.pending(c.waiter) {
			return protoErr("WAIT while another WAIT is pending")
		}
		c.waiter = nil
		w, err := t.watchNotify(req.keys, c.wakeWaiter)
		if err != nil {
			return err
		}
		if w == nil {
			if err := c.queue(append(b[:0], waitStop)); err != nil {
				return err
			}
		} else {
			c.waiter = w
		}
	case qCancelWait:
		if c.waiter != nil {
			t.unwatch(c.waiter)
			c.waiter = nil
		}
		if err := c.queue(append(b[:0], waitCanceled)); err != nil {
			return err
		}
	case qGetNumKeys:
		n, err := t.numKeys()
		if err != nil {
			return err
		}
		if err := c.queue(appendU64(b[:0], uint64(n))); err != nil {
			return err
		}
	case qDeleteKey:
		ok, err := t.del(req.key)
		if err != nil {
			return err
		}
		var n uint64
		if ok {
			n = 1
		}
		if err := c.queue(appendU64(b[:0], n)); err != nil {
			return err
		}
	case qAppend:
		return t.appendValue(req.key, req.value)
	case qMultiGet:
		for _, k := range req.keys {
			v, _, err := t.get(k)
			if err != nil {
				return err
			}
			if err := c.queueBytes(v); err != nil {
				return err
			}
		}
	case qMultiSet:
		for i, k := range req.keys {
			if err := t.set(k, req.values[i]); err != nil {
				return err
			}
		}
	case qPing:
		nonce := req.u32
		if nonce&helloBit != 0 && !c.s.torchOnly.Load() {
			c.ext = true
			nonce ^= extBit
		}
		if err := c.queue(appendU32(b[:0], nonce)); err != nil {
			return err
		}
	case qWaitGet:
		if !c.ext {
			return protoErr("WAIT_GET without hello")
		}
		if c.waiter != nil && t.pending(c.waiter) {
			return protoErr("WAIT_GET while a WAIT is pending")
		}
		c.waiter = nil
		key := req.key
		w, err := t.watchNotify([]string{key}, func() { c.wakeGetter(t, key) })
		if err != nil {
			return err
		}
		if w != nil {
			c.waiter = w
			return nil
		}
		// The key exists (it could go before we read it: then the reply is
		// empty, as torch's WAIT then GET would give).
		v, _, err := t.get(key)
		if err != nil {
			return err
		}
		if err := c.queue(append(b[:0], waitStop)); err != nil {
			return err
		}
		if err := c.queueBytes(v); err != nil {
			return err
		}
	case qQueuePush:
		return t.queuePush(req.key, req.value)
	case qQueuePop:
		n, v, err := t.queuePop(req.key)
		if err != nil {
			return err
		}
		if err := c.queue(appendU64(b[:0], uint64(n))); err != nil {
			return err
		}
		if n > 0 {
			if err := c.queueBytes(v); err != nil {
				return err
			}
		}
	case qQueueLen:
		n, err := t.queueLen(req.key)
		if err != nil {
			return err
		}
		if err := c.queue(appendU64(b[:0], uint64(n))); err != nil {
			return err
		}
	case qList:
		keys, err := t.list()
		if err != nil {
			return err
		}
		size := 8
		for _, k := range keys {
			size += 8 + len(k)
		}
		if err := c.reserve(size); err != nil {
			return err
		}
		c.mu.Lock()
		c.out = appendU64(c.out, uint64(len(keys)))
		c.mu.Unlock()
		for _, k := range keys {
			c.mu.Lock()
			c.out = appendString(c.out, k)
			c.mu.Unlock()
		}
	default: // VALIDATE again, or anything the decoder let through
		return protoErr("unexpected %v", req.op)
	}
	return nil
}

// queueBytes queues a length-prefixed value without an intermediate copy.
func (c *serverConn) queueBytes(v []byte) error {
	if err := c.reserve(8 + len(v)); err != nil {
		return err
	}
	c.mu.Lock()
	c.out = appendBytes(c.out, v)
	big := len(c.out) >= replyFlushSize
	c.mu.Unlock()
	if big {
		return c.flush()
	}
	return nil
}

// wakeGetter runs under the table's lock when this connection's WAIT_GET key
// appears: it queues STOP_WAITING and the value.
func (c *serverConn) wakeGetter(t *table, key string) {
	v := t.m[key]
	if err := c.reserve(1 + 8 + len(v)); err != nil {
		c.drop("WAIT_GET", err)
		c.nc.Close()
		return
	}
	c.mu.Lock()
	c.out = append(c.out, waitStop)
	c.out = appendBytes(c.out, v)
	c.mu.Unlock()
	go c.flush()
}

// wakeWaiter runs under the table's lock when this connection's WAIT is
// satisfied: it queues STOP_WAITING and has it written.
func (c *serverConn) wakeWaiter() {
	if err := c.reserve(1); err != nil {
		c.drop("WAIT", err)
		c.nc.Close()
		return
	}
	c.mu.Lock()
	c.out = append(c.out, waitStop)
	c.mu.Unlock()
	go c.flush()
}

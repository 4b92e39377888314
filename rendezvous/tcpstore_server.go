package rendezvous

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions configure a Server. The zero value (or nil) gives the defaults.
type ServerOptions struct {
	// Secret, when not empty, is a shared secret every client must prove it
	// knows (nccl4go's extension of the protocol, see the package's TCPStore
	// documentation). torch's clients cannot connect to such a server; leave it
	// empty to serve them.
	Secret string
	// MaxConns bounds the connections served at once (default 16384). A
	// connection beyond it is closed as soon as it is accepted; clients of this
	// package retry until their dial budget ends.
	MaxConns int
	// MaxKeyBytes, MaxValueBytes and MaxKeys bound one key, one value and the
	// keys of one request (defaults: torch's limits, DefaultMaxKeyBytes,
	// DefaultMaxValueBytes, DefaultMaxKeys). A request over a limit closes
	// its connection.
	MaxKeyBytes, MaxValueBytes, MaxKeys int
	// MaxRequestBytes bounds one request (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// MaxStoreBytes bounds the keys and values the server holds (default
	// 1 GiB). A write past it closes the writer's connection.
	MaxStoreBytes int64
	// MaxPendingBytes bounds the bytes of requests being read by all
	// connections together, past the first 64 KiB of each (default 256 MiB):
	// a large request waits (within MessageTimeout) for others to finish.
	MaxPendingBytes int64
	// MessageTimeout is how long a client may take to send the rest of a
	// message it has started, and its first message after connecting
	// (default 30 s). An idle connection between messages is never timed out.
	MessageTimeout time.Duration
	// WriteTimeout is how long a reply may wait for a client that does not
	// read (default 30 s); then the connection is closed.
	WriteTimeout time.Duration
	// Logf, when set, receives one line per connection closed for bad input.
	Logf func(format string, args ...any)
}

const (
	defaultMaxConns       = 16384
	defaultMaxStoreBytes  = 1 << 30
	defaultMaxPending     = 256 << 20
	defaultMessageTimeout = 30 * time.Second
	pendingUnit           = 64 << 10
	serverReadBuffer      = 16 << 10
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
	return n
}

// Server serves a key-value store over TCP in the wire protocol of PyTorch's
// c10d TCPStore: torch's clients (torch.distributed.TCPStore with
// is_master=False) and this package's Dial can use it. Safe for concurrent use.
//
// A connection that sends something that is not the protocol, breaks a limit,
// or stops in the middle of a message is closed; the others are not affected
// and nothing stored is lost. Connections (MaxConns), request sizes, the bytes
// of requests being read (MaxPendingBytes) and the bytes stored
// (MaxStoreBytes) are bounded.
//
// # Compatible mode and secret mode
//
// Without a Secret the server is torch-compatible: any client that speaks the
// protocol may read and write every key, as with torch's own TCPStore (which
// has no authentication at all). Use it where torch's ranks must join, or to
// join torch's store from Go (Dial without a Secret, under a WithPrefix of the
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

	active  atomic.Int64
	refused atomic.Int64
	dropped atomic.Int64

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

// Local returns a Store that reads and writes the server's table directly, in
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
			nc.Close()
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
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.active.Add(-1)
		s.wg.Done()
	}()
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.rd.nc = c.nc
	c.br = bufio.NewReaderSize(&c.rd, serverReadBuffer)
	d := &decoder{r: c.br, lim: s.lim}
	d.grow = c.grow

	// The first message must come within MessageTimeout.
	c.rd.want = time.Now().Add(s.opts.MessageTimeout)
	var req request
	if err := d.next(&req, nil); err != nil {
		c.drop("first message", err)
		return
	}
	if !c.handshake(d, &req) {
		return
	}
	started := func() { c.rd.want = time.Now().Add(s.opts.MessageTimeout) }
	for {
		c.rd.want = time.Time{}
		err := d.next(&req, started)
		if err != nil {
			c.drop("read", err)
			return
		}
		if err := c.handle(&req); err != nil {
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

// handshake checks the first message. It returns false when the connection
// must end (it has been answered or dropped).
func (c *serverConn) handshake(d *decoder, req *request) bool {
	s := c.s
	if req.op != qValidate {
		c.drop("handshake", protoErr("first message is %v, want VALIDATE", req.op))
		return false
	}
	switch req.u32 {
	case validationMagic:
		if s.secret == nil {
			return true
		}
		// A client without the secret: answer its PING, if it sends one
		// soon, with the refusal nonce so that our clients can tell, then
		// close. torch's client reports a failed ping.
		c.rd.want = time.Now().Add(s.opts.MessageTimeout)
		var ping request
		if err := d.next(&ping, nil); err == nil && ping.op == qPing {
			c.queue(appendU32(nil, refusedNonce))
			c.flush()
		}
		c.drop("handshake", fmt.Errorf("%w: client has no secret", ErrUnauthorized))
		return false
	case authMagic:
		if s.secret == nil {
			c.queue(appendU64(nil, 0)) // "no secret here"
			c.flush()
			c.drop("handshake", fmt.Errorf("%w: client sent a secret; this server has none", ErrUnauthorized))
			return false
		}
		var sn [authNonceLen]byte
		rand.Read(sn[:])
		c.queue(appendBytes(nil, sn[:]))
		if c.flush() != nil {
			return false
		}
		c.rd.want = time.Now().Add(s.opts.MessageTimeout)
		d.reset()
		mac, err := d.bytesN(authMACLen, "auth answer")
		if err != nil {
			c.drop("handshake", err)
			return false
		}
		if !hmac.Equal(mac, authMAC(s.secret, "client", req.nonce, sn[:])) {
			c.queue(appendU64(nil, 0))
			c.flush()
			c.drop("handshake", fmt.Errorf("%w: wrong secret", ErrUnauthorized))
			return false
		}
		c.queue(appendBytes(nil, authMAC(s.secret, "server", req.nonce, sn[:])))
		return c.flush() == nil
	default:
		c.drop("handshake", protoErr("bad validation magic %#x", req.u32))
		return false
	}
}

// authMAC is one side's answer in the secret handshake.
func authMAC(secret []byte, side string, clientNonce, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nccl4go store " + side))
	m.Write(clientNonce)
	m.Write(serverNonce)
	return m.Sum(nil)
}

// queue adds b to the replies (b is copied); a large backlog is written now.
func (c *serverConn) queue(b []byte) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	big := len(c.out) >= replyFlushSize
	c.mu.Unlock()
	if big {
		c.flush()
	}
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
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	if _, err := c.nc.Write(out); err != nil {
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
		c.queueBytes(v)
	case qGet:
		v, _, err := t.get(req.key)
		if err != nil {
			return err
		}
		c.queueBytes(v)
	case qAdd:
		n, err := t.add(req.key, req.delta)
		if err != nil {
			return &KeyError{Op: "ADD", Key: req.key, Err: err}
		}
		c.queue(appendU64(b[:0], uint64(n)))
	case qCheck:
		ok, err := t.check(req.keys)
		if err != nil {
			return err
		}
		r := checkNotReady
		if ok {
			r = checkReady
		}
		c.queue(append(b[:0], r))
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
			c.queue(append(b[:0], waitStop))
		} else {
			c.waiter = w
		}
	case qCancelWait:
		if c.waiter != nil {
			t.unwatch(c.waiter)
			c.waiter = nil
		}
		c.queue(append(b[:0], waitCanceled))
	case qGetNumKeys:
		n, err := t.numKeys()
		if err != nil {
			return err
		}
		c.queue(appendU64(b[:0], uint64(n)))
	case qDeleteKey:
		ok, err := t.del(req.key)
		if err != nil {
			return err
		}
		var n uint64
		if ok {
			n = 1
		}
		c.queue(appendU64(b[:0], n))
	case qAppend:
		return t.appendValue(req.key, req.value)
	case qMultiGet:
		for _, k := range req.keys {
			v, _, err := t.get(k)
			if err != nil {
				return err
			}
			c.queueBytes(v)
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
		c.queue(appendU32(b[:0], nonce))
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
		c.queue(append(b[:0], waitStop))
		c.queueBytes(v)
	case qQueuePush:
		return t.queuePush(req.key, req.value)
	case qQueuePop:
		n, v, err := t.queuePop(req.key)
		if err != nil {
			return err
		}
		c.queue(appendU64(b[:0], uint64(n)))
		if n > 0 {
			c.queueBytes(v)
		}
	case qQueueLen:
		n, err := t.queueLen(req.key)
		if err != nil {
			return err
		}
		c.queue(appendU64(b[:0], uint64(n)))
	case qList:
		keys, err := t.list()
		if err != nil {
			return err
		}
		c.queue(appendU64(b[:0], uint64(len(keys))))
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
func (c *serverConn) queueBytes(v []byte) {
	c.mu.Lock()
	c.out = appendBytes(c.out, v)
	big := len(c.out) >= replyFlushSize
	c.mu.Unlock()
	if big {
		c.flush()
	}
}

// wakeGetter runs under the table's lock when this connection's WAIT_GET key
// appears: it queues STOP_WAITING and the value.
func (c *serverConn) wakeGetter(t *table, key string) {
	v := t.m[key]
	c.mu.Lock()
	c.out = append(c.out, waitStop)
	c.out = appendBytes(c.out, v)
	c.mu.Unlock()
	go c.flush()
}

// wakeWaiter runs under the table's lock when this connection's WAIT is
// satisfied: it queues STOP_WAITING and has it written.
func (c *serverConn) wakeWaiter() {
	c.mu.Lock()
	c.out = append(c.out, waitStop)
	c.mu.Unlock()
	go c.flush()
}

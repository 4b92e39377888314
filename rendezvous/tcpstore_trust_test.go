package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the bytes the server reads from each connection.
type countingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*countingConn
}

type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &countingConn{Conn: nc}
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	return c, nil
}

func (l *countingListener) maxRead() (max int64, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns[min(1, len(l.conns)):] { // the first is the test's own client
		n := c.n.Load()
		total += n
		if n > max {
			max = n
		}
	}
	return max, total
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// waitFor polls cond (a count, not a time, is what the tests assert; the
// bound only keeps a broken server from hanging the test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Item 1: before authentication a connection costs the server only the
// fixed-size handshake: 40 connections each declaring an 8 MiB SET, and one
// sending a 64 MiB first message, make it read at most MaxHandshakeBytes
// from each, take nothing from the pending-bytes budget, allocate nothing
// of what they declare, and an authenticated 1 MiB Set goes through.
func TestSecretUnauthenticatedCostsOnlyTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := Serve(cl, &ServerOptions{Secret: "s3cret", Logf: func(string, ...any) {}})
	defer srv.Close()
	good, err := Dial(context.Background(), srv.Addr().String(), &DialOptions{Secret: "s3cret", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bigMsg := append(append(append([]byte{byte(qSet)}, u64(1)...), 'k'), u64(64<<20)...)
	bigMsg = append(bigMsg, make([]byte, 64<<20)...)
	before := heapAlloc()

	header := append(append(append([]byte{byte(qSet)}, u64(1)...), 'k'), u64(8<<20)...) // 18 bytes
	var raws []net.Conn
	for range 40 {
		nc, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write(header); err != nil {
			t.Fatal(err)
		}
		raws = append(raws, nc)
	}
	big, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	go big.Write(bigMsg) // fails once the server closes
	// Every unauthenticated connection is closed by the server.
	for _, nc := range raws {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil && !isReset(err) {
			t.Fatalf("unauthenticated connection not closed: %v", err)
		}
	}
	waitFor(t, "the unauthenticated connections to go", func() bool { return srv.Conns() == 1 })
	if n := len(srv.pending); n != 0 {
		t.Fatalf("unauthenticated connections hold %d pending-byte units", n)
	}
	if grew := int64(heapAlloc()) - int64(before); grew > 16<<20 {
		t.Fatalf("heap grew by %d bytes for 41 unauthenticated connections", grew)
	}
	if max, _ := cl.maxRead(); max > MaxHandshakeBytes {
		t.Fatalf("the server read %d bytes from one connection before it authenticated (limit %d)", max, MaxHandshakeBytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := good.Set(ctx, "one-mib", make([]byte, 1<<20)); err != nil {
		t.Fatalf("authenticated Set: %v", err)
	}
}

func isReset(err error) bool { return closedByPeer(err) }

// Item 1: a connection that never finishes its handshake gives its slot
// back after HandshakeTimeout, and a client refused because the server is
// full is told so (ErrServerFull), not reset.
func TestServerFullIsToldAndHandshakeSlotsExpire(t *testing.T) {
	for _, secret := range []string{"", "s3cret"} {
		t.Run("secret="+secret, func(t *testing.T) {
			srv := startServer(t, &ServerOptions{Secret: secret, MaxConns: 1, HandshakeTimeout: 3 * time.Second})
			slow, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			slow.Write([]byte{0}) // one byte of VALIDATE, then nothing
			waitFor(t, "the slow connection to be accepted", func() bool { return srv.Conns() == 1 })
			_, err = Dial(context.Background(), srv.Addr().String(), &DialOptions{Secret: secret, Timeout: time.Second})
			if !errors.Is(err, ErrServerFull) || !strings.Contains(err.Error(), "server full") {
				t.Fatalf("Dial to a full server = %v, want ErrServerFull naming \"server full\"", err)
			}
			// The slow handshake's slot comes back.
			waitFor(t, "the slow handshake to be closed", func() bool { return srv.Conns() == 0 })
			c, err := Dial(context.Background(), srv.Addr().String(), &DialOptions{Secret: secret, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatalf("Dial once the slot is free: %v", err)
			}
			c.Close()
		})
	}
}

// Item 2: replies queued for clients that do not read are bounded per
// connection and in total; those clients are disconnected and a client
// that reads is served.
func TestRepliesToNonReadersBounded(t *testing.T) {
	const value = 8 << 20
	srv := startServer(t, &ServerOptions{MaxReplyBytes: 12 << 20, MaxTotalReplyBytes: 40 << 20})
	srv.stuckAfter = 200 * time.Millisecond
	good := dialTest(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte{7}, value)
	if err := good.Set(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	before := heapAlloc()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := srv.replies.Load(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	get := appendRequest(nil, &request{op: qGet, key: "/big"})
	for range 32 {
		r := rawDial(t, srv, true)
		r.write(append(append([]byte{}, get...), get...)) // 16 MiB of replies, never read
	}
	// The server is done with all 32 (served into the socket, queued, or
	// closed) when each request has been answered or its connection dropped.
	waitFor(t, "the 32 non-readers to be handled", func() bool {
		return srv.dropped.Load()+srv.evicted.Load() >= 32 || srv.replies.Load() >= 40<<20-value
	})
	grew := int64(heapAlloc()) - int64(before)
	// Let the non-readers' replies count as stuck (stuckAfter), so that the
	// server closes them to make room for a client that reads.
	time.Sleep(2 * srv.stuckAfter)
	if v, err := good.Get(ctx, "big"); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("a client that reads: Get = %d bytes, %v", len(v), err)
	}
	close(stop)
	<-sampled
	if p := peak.Load(); p > 40<<20 {
		t.Fatalf("replies queued peaked at %d bytes, over MaxTotalReplyBytes", p)
	}
	if grew > 100<<20 {
		t.Fatalf("heap grew by %d MiB for 32 clients that never read (bound 40 MiB)", grew>>20)
	}
	if srv.dropped.Load() == 0 && srv.evicted.Load() == 0 {
		t.Fatal("no client over the bounds was disconnected")
	}
	healthy2(t, good)
}

func healthy2(t *testing.T, c *TCPStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Set(ctx, "after", []byte("x")); err != nil {
		t.Fatalf("Set after: %v", err)
	}
}

// Item 3: a write the store has no room for reaches this package's client
// as ErrTooLarge.
func TestStoreFullIsErrTooLarge(t *testing.T) {
	srv := startServer(t, &ServerOptions{MaxStoreBytes: 1 << 10, Logf: func(string, ...any) {}})
	c := dialTest(t, srv, nil)
	err := c.Set(context.Background(), "k", make([]byte, 2<<10))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set past MaxStoreBytes = %v, want ErrTooLarge", err)
	}
	if err := c.Set(context.Background(), "small", []byte("x")); err != nil {
		t.Fatalf("Set after: %v", err)
	}
}

// torch113Server is a byte-exact model of what torch 1.13's TCPStore server
// does with a connection: it reads a command byte in 1.13's numbering (SET
// 0, ... ADD 3), and for SET a uint64 key length into a std::vector, which
// throws for a length over PTRDIFF_MAX (std::length_error) or one it cannot
// allocate; the daemon catches the exception and closes the socket. It
// never answers anything our client sends.
func torch113Server(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				var b [9]byte
				if _, err := io.ReadFull(nc, b[:1]); err != nil || b[0] != 0 { // SET
					return
				}
				if _, err := io.ReadFull(nc, b[1:9]); err != nil {
					return
				}
				if n := binary.LittleEndian.Uint64(b[1:9]); n > 1<<63-1 || n > 1<<40 {
					return // length_error / bad_alloc: the daemon closes the socket
				}
				// A length it could allocate: it would wait for the key;
				// the model waits as long as a test lasts.
				io.Copy(io.Discard, nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// Item 3b: the Go client against torch before 2.1 stops at once with
// ErrOldTorch instead of retrying for its whole budget.
func TestDialPreTorch21Server(t *testing.T) {
	addr := torch113Server(t)
	start := time.Now()
	_, err := Dial(context.Background(), addr, &DialOptions{Timeout: 5 * time.Second})
	var de *DialError
	if !errors.Is(err, ErrOldTorch) || !errors.As(err, &de) || de.Attempts != 1 {
		t.Fatalf("Dial to torch 1.13's server = %v, want ErrOldTorch after one attempt", err)
	}
	if !strings.Contains(err.Error(), "2.1") {
		t.Fatalf("error %q does not name torch 2.1", err)
	}
	t.Logf("%v (in %v)", err, time.Since(start))
}

// Item 3b: torch 1.13's client against the Go server: its first message is
// ADD of "/init/" in 1.13's numbering (command byte 3); the server closes at
// once and its log names a pre-2.1 torch client.
func TestServerPreTorch21Client(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	srv := startServer(t, &ServerOptions{Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, sprintf(f, a...))
		mu.Unlock()
	}})
	for _, first := range [][]byte{
		append(append(append([]byte{3}, u64(6)...), "/init/"...), u64(1)...), // 1.13 ADD
		append(append(append([]byte{0}, u64(2)...), "/k"...), u64(1)...),     // 1.13 SET
		append(append([]byte{2}, u64(6)...), "/init/"...),                    // 1.13 GET
	} {
		r := rawDial(t, srv, false)
		r.write(first)
		r.expectClosed(5 * time.Second)
	}
	waitFor(t, "three log lines", func() bool { mu.Lock(); defer mu.Unlock(); return len(logs) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if !strings.Contains(l, "pre-2.1 torch") {
			t.Errorf("log %q does not name a pre-2.1 torch client", l)
		}
	}
}

// Item 9: addresses no retry can reach fail at once; connection refused
// while the server starts is retried.
func TestDialFailsFastOnlyOnPermanentErrors(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:abc", "127.0.0.1:99999", "127.0.0.1:", ":", "127.0.0.1", "999.1.2.3:80", "[::1:80"} {
		_, err := Dial(context.Background(), addr, &DialOptions{Timeout: 3 * time.Second})
		var de *DialError
		if !errors.As(err, &de) || de.Attempts > 1 || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Dial(%q) = %v, want an ErrInvalidArgument *DialError after at most one attempt", addr, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := Dial(context.Background(), addr, &DialOptions{Timeout: 20 * time.Second})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	srv, err := Listen(addr, nil)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer srv.Close()
	if err := <-done; err != nil {
		t.Fatalf("Dial while the server starts: %v", err)
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }

// MaxPendingBytes: requests being read hold at most the budget together;
// a request that needs more waits within MessageTimeout, then its
// connection is closed; the budget is whole again afterwards and a small
// request is served meanwhile.
func TestPendingBytesBudget(t *testing.T) {
	srv := startServer(t, &ServerOptions{MaxPendingBytes: 128 << 10, MessageTimeout: 300 * time.Millisecond,
		Logf: func(string, ...any) {}})
	if cap(srv.pending) != 2 {
		t.Fatalf("pending budget of %d units, want 2 (128 KiB)", cap(srv.pending))
	}
	good := dialTest(t, srv, nil)
	r := rawDial(t, srv, true)
	hdr := append(append(append([]byte{byte(qSet)}, u64(1)...), 'k'), u64(1<<20)...)
	r.write(append(hdr, make([]byte, 256<<10)...)) // needs 3 units past the first 64 KiB
	waitFor(t, "the large request to take the budget", func() bool { return len(srv.pending) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := good.Set(ctx, "small", []byte("x")); err != nil {
		t.Fatalf("small Set while the budget is taken: %v", err)
	}
	r.expectClosed(10 * time.Second)
	waitFor(t, "the budget to come back", func() bool { return len(srv.pending) == 0 })
}

// WriteTimeout: a client that does not read its reply is closed once the
// reply has waited WriteTimeout.
func TestWriteTimeoutClosesNonReader(t *testing.T) {
	srv := startServer(t, &ServerOptions{WriteTimeout: 200 * time.Millisecond, Logf: func(string, ...any) {}})
	good := dialTest(t, srv, nil)
	ctx := context.Background()
	if err := good.Set(ctx, "big", make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, srv, true)
	r.write(appendRequest(nil, &request{op: qGet, key: "/big"}))
	waitFor(t, "the non-reader to be closed", func() bool { return srv.dropped.Load() == 1 })
	r.expectClosed(10 * time.Second)
	healthy2(t, good)
}

// MaxRequestBytes: a request larger than the bound (here a WAIT on many
// keys, each within the key limit) closes its connection.
func TestRequestBytesLimit(t *testing.T) {
	if DefaultMaxRequestBytes != 64<<20 {
		t.Fatalf("DefaultMaxRequestBytes = %d, the README says 64 MiB", DefaultMaxRequestBytes)
	}
	srv := startServer(t, &ServerOptions{MaxRequestBytes: 4 << 10, Logf: func(string, ...any) {}})
	good := dialTest(t, srv, nil)
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "/" + strings.Repeat("k", 60) + fmt.Sprint(i)
	}
	r := rawDial(t, srv, true)
	r.write(appendRequest(nil, &request{op: qWait, keys: keys})) // about 7 KiB
	r.expectClosed(10 * time.Second)
	if srv.dropped.Load() == 0 {
		t.Fatal("the oversized request was not refused")
	}
	healthy2(t, good)
}

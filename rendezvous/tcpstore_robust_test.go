package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawConn is a hand-driven client connection for feeding a server bad input.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func rawDial(t *testing.T, srv *Server, validate bool) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawConn{t: t, nc: nc}
	if validate {
		r.write(appendRequest(nil, &request{op: qValidate, u32: validationMagic}))
	}
	return r
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// expectClosed reads until the server closes the connection (or fails the
// test after d).
func (r *rawConn) expectClosed(d time.Duration) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r.nc)
	// A server that stops reading in the middle of what was sent closes with
	// a reset: that is closed too.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("connection not closed by the server within %v: %v", d, err)
	}
}

// healthy checks that a normal client still works and sees key "keep".
func healthy(t *testing.T, c *TCPStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := c.Get(ctx, "keep"); err != nil || string(v) != "safe" {
		t.Fatalf("other client: Get keep = %q, %v", v, err)
	}
	if err := c.Set(ctx, "after", []byte("x")); err != nil {
		t.Fatalf("other client: Set: %v", err)
	}
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestServerBadInput(t *testing.T) {
	cases := []struct {
		name     string
		validate bool
		send     []byte
	}{
		{"garbage first message", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"wrong magic", false, append([]byte{0}, 1, 2, 3, 4)},
		{"first message not VALIDATE", false, appendRequest(nil, &request{op: qSet, key: "/k", value: []byte("v")})},
		{"unknown command", true, []byte{200, 1, 2, 3}},
		{"VALIDATE twice", true, appendRequest(nil, &request{op: qValidate, u32: validationMagic})},
		{"oversized key", true, append([]byte{byte(qGet)}, u64(1<<40)...)},
		{"key just over the limit", true, append(append([]byte{byte(qGet)}, u64(DefaultMaxKeyBytes+1)...), make([]byte, DefaultMaxKeyBytes+1)...)},
		{"oversized value", true, append(append(append([]byte{byte(qSet)}, u64(1)...), 'k'), u64(DefaultMaxValueBytes+1)...)},
		{"too many keys", true, append([]byte{byte(qWait)}, u64(DefaultMaxKeys+1)...)},
		{"second WAIT while one is pending", true, append(
			appendRequest(nil, &request{op: qWait, keys: []string{"/never"}}),
			appendRequest(nil, &request{op: qWait, keys: []string{"/never2"}})...)},
	}
	srv := startServer(t, nil)
	good := dialTest(t, srv, nil)
	ctx := context.Background()
	if err := good.Set(ctx, "keep", []byte("safe")); err != nil {
		t.Fatal(err)
	}
	// A Wait pending on the good client's other connection must survive too.
	waitErr := make(chan error, 1)
	go func() { waitErr <- good.Wait(ctx, "late") }()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rawDial(t, srv, tc.validate)
			r.write(tc.send)
			r.expectClosed(5 * time.Second)
			healthy(t, good)
		})
	}
	if err := good.Set(ctx, "late", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		if err != nil {
			t.Fatalf("pending Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending Wait never ended")
	}
	if srv.dropped.Load() < int64(len(cases)) {
		t.Fatalf("server dropped %d connections, want >= %d", srv.dropped.Load(), len(cases))
	}
}

func TestServerTruncatedMessage(t *testing.T) {
	srv := startServer(t, &ServerOptions{MessageTimeout: 200 * time.Millisecond, HandshakeTimeout: 200 * time.Millisecond})
	good := dialTest(t, srv, nil)
	ctx := context.Background()
	good.Set(ctx, "keep", []byte("safe"))
	full := appendRequest(nil, &request{op: qSet, key: "/half", value: []byte("0123456789")})
	for _, cut := range []int{1, 5, 9, 12, len(full) - 1} {
		r := rawDial(t, srv, true)
		r.write(full[:cut])
		start := time.Now()
		r.expectClosed(5 * time.Second)
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("cut at %d: closed after %v, before the message timeout", cut, el)
		}
		healthy(t, good)
	}
	if ok, _ := good.Check(ctx, "half"); ok {
		t.Fatal("a truncated SET stored its key")
	}
	// An idle connection between messages is not timed out.
	r := rawDial(t, srv, true)
	time.Sleep(400 * time.Millisecond)
	r.write(appendRequest(nil, &request{op: qPing, u32: 7}))
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [4]byte
	if _, err := io.ReadFull(r.nc, b[:]); err != nil || binary.LittleEndian.Uint32(b[:]) != 7 {
		t.Fatalf("idle connection: PING = %v, %v", b, err)
	}
	// The first message must come within the timeout.
	silent := rawDial(t, srv, false)
	silent.expectClosed(5 * time.Second)
}

func TestClientLimits(t *testing.T) {
	srv := startServer(t, nil)
	c := dialTest(t, srv, nil)
	ctx := context.Background()
	big := strings.Repeat("k", DefaultMaxKeyBytes)
	if err := c.Set(ctx, big, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set with a %d-byte key (plus torch's '/') = %v, want ErrTooLarge", len(big), err)
	}
	if err := c.Set(ctx, "k", make([]byte, DefaultMaxValueBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set with an oversized value = %v, want ErrTooLarge", err)
	}
	if err := c.Wait(ctx); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Wait() = %v, want ErrInvalidArgument", err)
	}
	// The largest key and value torch accepts go through.
	maxKey := big[1:]
	val := bytes.Repeat([]byte{7}, DefaultMaxValueBytes)
	if err := c.Set(ctx, maxKey, val); err != nil {
		t.Fatalf("Set at the limits: %v", err)
	}
	if v, err := c.Get(ctx, maxKey); err != nil || !bytes.Equal(v, val) {
		t.Fatalf("Get at the limits: %d bytes, %v", len(v), err)
	}
}

func TestServerStoreLimit(t *testing.T) {
	srv := startServer(t, &ServerOptions{MaxStoreBytes: 1000})
	c := dialTest(t, srv, nil)
	ctx := context.Background()
	if err := c.Set(ctx, "keep", []byte("safe")); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "big", make([]byte, 2000)); err == nil {
		t.Fatal("Set past MaxStoreBytes succeeded")
	}
	healthy(t, c)
}

func TestSecret(t *testing.T) {
	srv := startServer(t, &ServerOptions{Secret: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := dialTest(t, srv, &DialOptions{Secret: "s3cret"})
	storeSemantics(t, good)

	for _, tc := range []struct{ name, secret string }{{"no secret", ""}, {"wrong secret", "guess"}} {
		start := time.Now()
		_, err := Dial(ctx, srv.Addr().String(), &DialOptions{Secret: tc.secret, Timeout: 5 * time.Second})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%s: Dial = %v, want ErrUnauthorized", tc.name, err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("%s: refusal took %v; it must not be retried", tc.name, el)
		}
	}
	// A torch client (VALIDATE with torch's magic, then PING) gets nothing:
	// its ping is answered with the refusal nonce and the connection closed.
	r := rawDial(t, srv, true)
	r.write(appendRequest(nil, &request{op: qPing, u32: 1234}))
	r.write(appendRequest(nil, &request{op: qGet, key: "/nothing"}))
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(r.nc)
	if !bytes.Equal(got, appendU32(nil, refusedNonce)) {
		t.Fatalf("torch-like client got %x, want only the refusal nonce", got)
	}
	// A secret-holding client against a server without a secret.
	open := startServer(t, nil)
	if _, err := Dial(ctx, open.Addr().String(), &DialOptions{Secret: "s3cret", Timeout: 5 * time.Second}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("secret client vs open server: %v, want ErrUnauthorized", err)
	}
}

func TestDialDeadAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Dial(context.Background(), addr, &DialOptions{Timeout: 300 * time.Millisecond})
	el := time.Since(start)
	var de *DialError
	if !errors.As(err, &de) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Dial dead address = %v, want *DialError matching ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), addr) || de.Elapsed < 100*time.Millisecond || de.Attempts < 2 {
		t.Fatalf("error %q should name %s and the time tried (elapsed %v, attempts %d)", err, addr, de.Elapsed, de.Attempts)
	}
	if el > 2*time.Second {
		t.Fatalf("Dial took %v with a 300ms budget", el)
	}

	// A master that accepts but never answers.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = Dial(context.Background(), mute.Addr().String(), &DialOptions{Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), mute.Addr().String()) || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("mute master: %v", err)
	}
	// The context ends a dial sooner.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = Dial(ctx, addr, &DialOptions{Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("cancelled dial: %v", err)
	}
}

func TestMaxConns(t *testing.T) {
	srv := startServer(t, &ServerOptions{MaxConns: 3})
	var cs []*TCPStore
	for range 3 {
		cs = append(cs, dialTest(t, srv, nil))
	}
	if n := srv.Conns(); n != 3 {
		t.Fatalf("Conns = %d, want 3", n)
	}
	_, err := Dial(context.Background(), srv.Addr().String(), &DialOptions{Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("4th Dial = %v, want ErrUnreachable", err)
	}
	if srv.refused.Load() == 0 {
		t.Fatal("server refused nothing")
	}
	cs[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Conns() > 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	c, err := Dial(context.Background(), srv.Addr().String(), &DialOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Dial after a slot freed: %v", err)
	}
	c.Close()
}

func TestTCPStoreExtendedOps(t *testing.T) {
	srv := startServer(t, nil)
	c := dialTest(t, srv, nil)
	ctx := context.Background()
	if err := c.MultiSet(ctx, []string{"m1", "m2"}, [][]byte{[]byte("a"), []byte("bb")}); err != nil {
		t.Fatal(err)
	}
	vs, err := c.MultiGet(ctx, "m2", "m1")
	if err != nil || len(vs) != 2 || string(vs[0]) != "bb" || string(vs[1]) != "a" {
		t.Fatalf("MultiGet = %q, %v", vs, err)
	}
	if err := c.Append(ctx, "m1", []byte("pp")); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(ctx, "new", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(ctx, "m1"); string(v) != "app" {
		t.Fatalf("after Append: %q", v)
	}
	if n, err := c.NumKeys(ctx); err != nil || n != 3 {
		t.Fatalf("NumKeys = %d, %v; want 3", n, err)
	}
	keys, err := c.List(ctx)
	if err != nil || len(keys) != 3 {
		t.Fatalf("List = %q, %v", keys, err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Queues.
	if _, ok, err := c.QueuePop(ctx, "q", false); err != nil || ok {
		t.Fatalf("QueuePop empty = %v, %v", ok, err)
	}
	popped := make(chan string, 1)
	go func() {
		v, _, err := c.QueuePop(ctx, "q", true)
		if err != nil {
			popped <- "error: " + err.Error()
			return
		}
		popped <- string(v)
	}()
	time.Sleep(20 * time.Millisecond)
	for _, v := range []string{"one", "two"} {
		if err := c.QueuePush(ctx, "q", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if v := <-popped; v != "one" {
		t.Fatalf("blocking QueuePop = %q", v)
	}
	if n, err := c.QueueLen(ctx, "q"); err != nil || n != 1 {
		t.Fatalf("QueueLen = %d, %v", n, err)
	}
	if v, ok, err := c.QueuePop(ctx, "q", false); err != nil || !ok || string(v) != "two" {
		t.Fatalf("QueuePop = %q %v %v", v, ok, err)
	}
	// Server.Local shares the key space of TCP clients.
	local := srv.Local()
	if v, err := local.Get(ctx, "m2"); err != nil || string(v) != "bb" {
		t.Fatalf("Local Get m2 = %q, %v", v, err)
	}
	local.Set(ctx, "fromlocal", []byte("L"))
	if v, err := c.Get(ctx, "fromlocal"); err != nil || string(v) != "L" {
		t.Fatalf("client Get fromlocal = %q, %v", v, err)
	}
	local.Close()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("closing Local stopped the server: %v", err)
	}
	// Prefix view over TCP: keys land under "/job/".
	p := WithPrefix(c, "job")
	p.Set(ctx, "x", []byte("1"))
	if v, _, _ := srv.t.get("/job/x"); string(v) != "1" {
		t.Fatalf("prefixed key not stored as /job/x (torch's PrefixStore layout)")
	}
}

// A Wait in one goroutine must not hold up other calls on the same client,
// and cancelled waits must leave connections in step with the server.
func TestConcurrentWaitAndCancelRace(t *testing.T) {
	srv := startServer(t, nil)
	c := dialTest(t, srv, nil)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.Wait(ctx, "go") }()
	time.Sleep(10 * time.Millisecond)
	if err := c.Set(ctx, "other", []byte("1")); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "go", nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Cancel waits just as their key arrives, many times.
	var wg sync.WaitGroup
	for i := range 200 {
		key := "race" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		wg.Add(2)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Duration(i%5)*100*time.Microsecond)
			defer cancel()
			err := c.Wait(cctx, key)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait %s: %v", key, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := c.Set(ctx, key, []byte("v")); err != nil {
				t.Errorf("Set: %v", err)
			}
		}()
	}
	wg.Wait()
	for i := range 20 {
		key := "check" + string(rune('a'+i))
		if err := c.Set(ctx, key, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Get(ctx, key); err != nil || len(v) != 1 || v[0] != byte(i) {
			t.Fatalf("after the race: Get %s = %v, %v (connections out of step?)", key, v, err)
		}
	}
}

// A port where something else answers (an HTTP server, say) fails fast,
// saying so, instead of retrying until the dial timeout.
func TestDialWrongServiceFailsFast(t *testing.T) {
	addr := httpServer(t)
	start := time.Now()
	_, err := Dial(context.Background(), addr, &DialOptions{Timeout: 30 * time.Second})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "not as a store") {
		t.Fatalf("Dial of an HTTP port: %v, want a protocol error saying it is no store", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Dial of an HTTP port took %v, want well under its 30 s timeout", took)
	}
}

// httpServer listens on a local port and answers every connection as an
// HTTP server would: something that is not a store. Closed at t's end.
func httpServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n garbage garbage garbage"))
			time.Sleep(50 * time.Millisecond)
			c.Close()
		}
	}()
	return l.Addr().String()
}

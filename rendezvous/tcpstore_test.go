package rendezvous

import (
	"context"
	"errors"
	"testing"
	"time"
)

// startServer starts a server on a free loopback port, closed with the test.
func startServer(t testing.TB, opts *ServerOptions) *Server {
	t.Helper()
	if opts == nil {
		opts = &ServerOptions{}
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	srv, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dialTest(t testing.TB, srv *Server, opts *DialOptions) *TCPStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if opts == nil {
		opts = &DialOptions{}
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	c, err := Dial(ctx, srv.Addr().String(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTCPStoreSemantics(t *testing.T) {
	srv := startServer(t, nil)
	c := dialTest(t, srv, nil)
	storeSemantics(t, c)
}

func TestTCPStoreClose(t *testing.T) {
	srv := startServer(t, nil)
	c := dialTest(t, srv, nil)
	// A Wait in flight ends when the client closes.
	errc := make(chan error, 1)
	go func() { errc <- c.Wait(context.Background(), "never") }()
	time.Sleep(20 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait in flight at Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a Wait in flight")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v, want ErrClosed", err)
	}
}

// Against a server that answers like torch's (no WAIT_GET), Get and its
// cancellation take torch's path: WAIT, then GET.
func TestTCPStoreTorchPath(t *testing.T) {
	srv := startServer(t, nil)
	srv.torchOnly.Store(true)
	c := dialTest(t, srv, nil)
	c.mu.Lock()
	ext := c.idle[0].ext
	c.mu.Unlock()
	if ext {
		t.Fatal("client thinks a torch-like server has the extensions")
	}
	storeSemantics(t, c)
}

package rendezvous

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkTCPStoreGet: one small Get on loopback (WAIT, then GET, as torch's
// client does it). Target: under 100 µs.
func BenchmarkTCPStoreGet(b *testing.B) {
	srv := startServer(b, nil)
	c := dialTest(b, srv, nil)
	ctx := context.Background()
	c.Set(ctx, "k", []byte("small value"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPStoreGetCancelable is Get with a context that can end (an
// AfterFunc per call).
func BenchmarkTCPStoreGetCancelable(b *testing.B) {
	srv := startServer(b, nil)
	c := dialTest(b, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c.Set(ctx, "k", []byte("small value"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTCPStoreSet(b *testing.B) {
	srv := startServer(b, nil)
	c := dialTest(b, srv, nil)
	ctx := context.Background()
	v := []byte("small value")
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Set(ctx, "k", v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTCPStoreAdd(b *testing.B) {
	srv := startServer(b, nil)
	c := dialTest(b, srv, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Add(ctx, "n", 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTCPStoreCheck(b *testing.B) {
	srv := startServer(b, nil)
	c := dialTest(b, srv, nil)
	ctx := context.Background()
	c.Set(ctx, "k", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Check(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemStoreGet(b *testing.B) {
	s := NewMemStore()
	ctx := context.Background()
	s.Set(ctx, "k", []byte("small value"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// rendezvous runs n clients (goroutines) against srv the way a job's ranks
// meet: each dials, checks in (ADD), rank 0 publishes a 128-byte id, and every
// rank fetches it (WAIT + GET). It returns the time from the first dial to the
// last id fetched.
func rendezvous(tb testing.TB, srv *Server, n int, round string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := bytes.Repeat([]byte{0xAB}, 128)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for rank := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(ctx, srv.Addr().String(), &DialOptions{Timeout: 30 * time.Second})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			s := WithPrefix(c, round)
			if _, err := s.Add(ctx, "checkin", 1); err != nil {
				errs <- err
				return
			}
			if rank == 0 {
				if err := s.Set(ctx, "uniqueid", id); err != nil {
					errs <- err
					return
				}
			}
			v, err := s.Get(ctx, "uniqueid")
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(v, id) {
				errs <- fmt.Errorf("rank %d got a wrong id", rank)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	v, err := srv.Local().Get(ctx, round+"/checkin")
	if err != nil || string(v) != fmt.Sprint(n) {
		tb.Fatalf("checkin = %q, %v; want %d", v, err, n)
	}
	return el
}

// BenchmarkRendezvous1024: 1024 clients check in and fetch the id. Target:
// under 2 s per op on a 2-core machine.
func BenchmarkRendezvous1024(b *testing.B) {
	srv := startServer(b, nil)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		rendezvous(b, srv, 1024, fmt.Sprint("round", i))
		i++
	}
}

// TestRendezvous1024 checks that 1024 concurrent clients all meet (timing is
// only logged: the benchmark measures it).
func TestRendezvous1024(t *testing.T) {
	if testing.Short() {
		t.Skip("1024 clients: skipped in -short mode")
	}
	srv := startServer(t, nil)
	el := rendezvous(t, srv, 1024, "test")
	t.Logf("1024 clients: check-in and id fetch in %v", el)
}

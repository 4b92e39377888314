package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// storeSemantics runs the Store contract against s (shared by all store kinds).
func storeSemantics(t *testing.T, s Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := s.Set(ctx, "a", []byte("1")); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if v, err := s.Get(ctx, "a"); err != nil || string(v) != "1" {
		t.Fatalf("Get a = %q, %v; want 1", v, err)
	}
	if err := s.Set(ctx, "empty", nil); err != nil {
		t.Fatalf("Set empty: %v", err)
	}
	if v, err := s.Get(ctx, "empty"); err != nil || len(v) != 0 {
		t.Fatalf("Get empty = %q, %v", v, err)
	}
	if n, err := s.Add(ctx, "cnt", 5); err != nil || n != 5 {
		t.Fatalf("Add = %d, %v; want 5", n, err)
	}
	if n, err := s.Add(ctx, "cnt", -7); err != nil || n != -2 {
		t.Fatalf("Add = %d, %v; want -2", n, err)
	}
	if v, err := s.Get(ctx, "cnt"); err != nil || string(v) != "-2" {
		t.Fatalf("Get cnt = %q, %v; want decimal -2", v, err)
	}
	if _, err := s.Add(ctx, "a", 1); err != nil {
		t.Fatalf("Add on \"1\": %v", err)
	}
	if err := s.Set(ctx, "txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "txt", 1); err == nil {
		t.Fatalf("Add on non-integer succeeded")
	}
	// CompareSet, torch semantics.
	if v, err := s.CompareSet(ctx, "cs", nil, []byte("new")); err != nil || string(v) != "new" {
		t.Fatalf("CompareSet missing/empty = %q, %v; want new", v, err)
	}
	if v, err := s.CompareSet(ctx, "cs", []byte("wrong"), []byte("x")); err != nil || string(v) != "new" {
		t.Fatalf("CompareSet mismatch = %q, %v; want new", v, err)
	}
	if v, err := s.CompareSet(ctx, "cs", []byte("new"), []byte("newer")); err != nil || string(v) != "newer" {
		t.Fatalf("CompareSet match = %q, %v; want newer", v, err)
	}
	if v, err := s.CompareSet(ctx, "nokey", []byte("exp"), []byte("x")); err != nil || string(v) != "exp" {
		t.Fatalf("CompareSet missing/nonempty = %q, %v; want exp (torch returns expected)", v, err)
	}
	if ok, err := s.Check(ctx, "nokey"); err != nil || ok {
		t.Fatalf("CompareSet created nokey: %v %v", ok, err)
	}
	if ok, err := s.Check(ctx, "a", "cnt", "cs"); err != nil || !ok {
		t.Fatalf("Check existing = %v, %v", ok, err)
	}
	if ok, err := s.Check(ctx, "a", "missing"); err != nil || ok {
		t.Fatalf("Check with missing = %v, %v", ok, err)
	}
	if existed, err := s.Delete(ctx, "a"); err != nil || !existed {
		t.Fatalf("Delete a = %v, %v", existed, err)
	}
	if existed, err := s.Delete(ctx, "a"); err != nil || existed {
		t.Fatalf("Delete a again = %v, %v", existed, err)
	}
	// Wait and Get block until another writer sets the keys.
	done := make(chan error, 1)
	go func() {
		if err := s.Wait(ctx, "w1", "w2"); err != nil {
			done <- err
			return
		}
		v, err := s.Get(ctx, "w2")
		if err == nil && string(v) != "two" {
			err = errors.New("w2 = " + string(v))
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned before keys were set: %v", err)
	default:
	}
	if err := s.Set(ctx, "w1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "w2", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// Values are copied: changing the caller's slice changes nothing stored.
	buf := []byte("orig")
	if err := s.Set(ctx, "copy", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	if v, _ := s.Get(ctx, "copy"); !bytes.Equal(v, []byte("orig")) {
		t.Fatalf("stored value aliased caller's slice: %q", v)
	}
	// Cancellation of a Get and a Wait on a key that never appears.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer ccancel()
	start := time.Now()
	if _, err := s.Get(cctx, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get never = %v; want DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("Get ignored its deadline")
	}
	c2, cancel2 := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	if err := s.Wait(c2, "never", "w1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait never = %v; want Canceled", err)
	}
	// The store still works after the cancelled waits.
	if err := s.Set(ctx, "never", []byte("now")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get(ctx, "never"); err != nil || string(v) != "now" {
		t.Fatalf("Get after cancel = %q, %v", v, err)
	}
}

func TestMemStore(t *testing.T) {
	s := NewMemStore()
	storeSemantics(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Set(context.Background(), "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v; want ErrClosed", err)
	}
}

func TestMemStoreCloseWakesWaiters(t *testing.T) {
	s := NewMemStore()
	errc := make(chan error, 1)
	go func() { _, err := s.Get(context.Background(), "k"); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	s.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Get = %v; want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a waiting Get")
	}
}

func TestPrefix(t *testing.T) {
	base := NewMemStore()
	p := WithPrefix(base, "job")
	storeSemantics(t, p)
	ctx := context.Background()
	if err := p.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := base.Get(ctx, "job/k"); err != nil || string(v) != "v" {
		t.Fatalf("base job/k = %q, %v", v, err)
	}
	if ok, _ := base.Check(ctx, "k"); ok {
		t.Fatal("unprefixed key exists")
	}
	p.Close()
	if err := base.Set(ctx, "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("closing the prefix view left base open: %v", err)
	}
}

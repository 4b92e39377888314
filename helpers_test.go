package nccl_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Helpers shared by the tests of the nccl package that run against the
// fake libraries (internal/faketest).

// collFake runs fn against the default fake libraries (NCCL 2.30.7, two
// devices of compute capability 9.0), with extra environment.
func collFake(t *testing.T, fn func(t *testing.T), extra ...string) {
	t.Helper()
	faketest.Run(t, faketest.Env{Extra: extra}, fn)
}

// collComm is rank of an nranks communicator on device dev (the fake never
// waits for the other ranks), destroyed at the end of the test.
func collComm(t *testing.T, nranks, rank, dev int) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	c, err := nccl.Init(nranks, rank, id, &nccl.Config{Device: nccl.Ptr(dev)})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// collSlice allocates host's values on dev, freed at the end of the test.
func collSlice[T cuda.Elem](t *testing.T, dev int, host ...T) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.AllocFrom(cuda.Device(dev), host)
	if err != nil {
		t.Fatalf("AllocFrom: %v", err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

func collBuf[T cuda.Elem](t *testing.T, dev int, host ...T) nccl.Buffer {
	t.Helper()
	return nccl.BufferOf(collSlice(t, dev, host...))
}

// wantArgErr checks that err is an *ArgError of op about arg, matching
// ErrInvalidArgument, whose reason contains each of words.
func wantArgErr(t *testing.T, err error, op, arg string, words ...string) {
	t.Helper()
	var ae *nccl.ArgError
	if !errors.As(err, &ae) || !errors.Is(err, nccl.ErrInvalidArgument) {
		t.Fatalf("error %v (%T), want an *ArgError of %s about %s", err, err, op, arg)
	}
	if ae.Op != op || ae.Arg != arg {
		t.Fatalf("ArgError{Op: %q, Arg: %q, Reason: %q}, want Op %q Arg %q", ae.Op, ae.Arg, ae.Reason, op, arg)
	}
	for _, w := range words {
		if !strings.Contains(ae.Reason, w) {
			t.Errorf("reason %q lacks %q", ae.Reason, w)
		}
	}
}

// noNCCLCall checks that the fake NCCL never saw fn.
func noNCCLCall(t *testing.T, fn string) {
	t.Helper()
	if n := faketest.Calls(t, fn); n != 0 {
		t.Errorf("%s called %d times; the binding should have refused first", fn, n)
	}
}

func f32s(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)*0.75 - 3.5
	}
	return v
}

func newFakeID(t *testing.T) nccl.UniqueID {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	return id
}

// settleGoroutines waits a little for goroutines to end and reports
// whether their number came back to at most want.
func settleGoroutines(want int) (int, bool) {
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > want; i++ {
		time.Sleep(5 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n, n <= want
}

// fakeComm creates rank `rank` of an nranks communicator (the fake never
// waits for the peers).
func fakeComm(t *testing.T, nranks, rank int, cfg *nccl.Config) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	c, err := nccl.Init(nranks, rank, id, cfg)
	if err != nil {
		t.Fatalf("Init(%d, %d): %v", nranks, rank, err)
	}
	if !nonBlocking(cfg) {
		t.Cleanup(func() { c.Abort() })
	}
	return c
}

// fakeWorld is fakeComm(t, nranks, rank, nil) and its world team.
func fakeWorld(t *testing.T, nranks, rank int) (*nccl.Communicator, nccl.Team) {
	t.Helper()
	c := fakeComm(t, nranks, rank, nil)
	world, err := c.TeamWorld()
	if err != nil {
		t.Fatalf("TeamWorld: %v", err)
	}
	return c, world
}

// wantArg fails unless err is an ArgError on arg.
func wantArg(t *testing.T, what string, err error, arg string) {
	t.Helper()
	var ae *nccl.ArgError
	if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Arg != arg {
		t.Errorf("%s: %v, want an ArgError on %s", what, err, arg)
	}
}

// wantUnsupported fails unless err is an UnsupportedError for fn since since.
func wantUnsupported(t *testing.T, what string, err error, fn string, since nccl.Release) {
	t.Helper()
	var ue *nccl.UnsupportedError
	if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ue) || ue.Feature != fn || ue.Since != since {
		t.Errorf("%s: %v, want %s unsupported before %s", what, err, fn, since)
	}
}

// wantUnsupportedLoaded is wantUnsupported that also checks the loaded
// release and that the message names fn and since.
func wantUnsupportedLoaded(t *testing.T, what string, err error, fn string, since, loaded nccl.Release) {
	t.Helper()
	var ue *nccl.UnsupportedError
	if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ue) {
		t.Errorf("%s: %v, want an UnsupportedError", what, err)
		return
	}
	if ue.Feature != fn || ue.Since != since || ue.Loaded != loaded {
		t.Errorf("%s: %+v, want %s since %s, loaded %s", what, *ue, fn, since, loaded)
	}
	if !strings.Contains(err.Error(), fn) || !strings.Contains(err.Error(), since.String()) {
		t.Errorf("%s: %q names neither %s nor %s", what, err, fn, since)
	}
}

// wantHotPath calls call once (it fills the caches), then checks that a
// call allocates nothing and makes exactly one cgo call.
func wantHotPath(t *testing.T, what string, call func()) {
	t.Helper()
	call()
	if n := testing.AllocsPerRun(1000, call); n != 0 {
		t.Errorf("%s: %v allocations per call, want 0", what, n)
	}
	before := runtime.NumCgoCall()
	for range 100 {
		call()
	}
	if d := runtime.NumCgoCall() - before; d != 100 {
		t.Errorf("%d cgo calls for 100 %s calls, want 100", d, what)
	}
}

// identity reads nranks and rank, failing the test on error.
func identity(t *testing.T, c *nccl.Communicator) (int, int) {
	t.Helper()
	n, err := c.NRanks()
	if err != nil {
		t.Fatalf("NRanks: %v", err)
	}
	r, err := c.Rank()
	if err != nil {
		t.Fatalf("Rank: %v", err)
	}
	return n, r
}

// ctxErr checks that err shows both the context's end and NCCL's state.
func ctxErr(t *testing.T, what string, err error, took, limit time.Duration) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nccl.ErrInProgress) {
		t.Errorf("%s: %v, want DeadlineExceeded and ErrInProgress", what, err)
	}
	if took > limit {
		t.Errorf("%s: returned after %v, limit %v", what, took, limit)
	}
}

// noLeftGoroutines waits a little for the goroutine count to drop to before.
func noLeftGoroutines(t *testing.T, before int) {
	t.Helper()
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after", before, n)
	}
}

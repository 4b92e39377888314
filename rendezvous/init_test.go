package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeID is group g's id as a test root creates it.
func fakeID(g int) []byte {
	return bytes.Repeat([]byte{byte(g + 1)}, idBytes)
}

// runExchange runs the exchange of n ranks in goroutines over st, except
// the ranks in skip, and returns each rank's ids and error.
func runExchange(ctx context.Context, st Store, n, ngroups int, skip map[int]bool,
	newID func(rank int) ([]byte, error)) (ids [][][]byte, errs []error, roots int64) {
	ids = make([][][]byte, n)
	errs = make([]error, n)
	var wg sync.WaitGroup
	var made atomic.Int64
	for r := 0; r < n; r++ {
		if skip[r] {
			continue
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			x := &exchange{store: st, rank: r, nranks: n, ngroups: ngroups, info: fmt.Sprintf("test:%d", r),
				newID: func() ([]byte, error) {
					made.Add(1)
					if newID != nil {
						return newID(r)
					}
					return fakeID(rootGroup(r, n, ngroups)), nil
				}}
			ids[r], errs[r] = x.run(ctx)
		}(r)
	}
	wg.Wait()
	return ids, errs, made.Load()
}

func TestGroupRoots(t *testing.T) {
	for _, tc := range []struct{ n, g int }{{1, 1}, {8, 1}, {8, 3}, {4096, 32}, {4097, 33}, {10, 10}, {130, 2}} {
		seen := 0
		for r := 0; r < tc.n; r++ {
			if g := rootGroup(r, tc.n, tc.g); g >= 0 {
				if groupRoot(g, tc.n, tc.g) != r {
					t.Fatalf("n=%d groups=%d: rank %d roots group %d, whose root is %d", tc.n, tc.g, r, g, groupRoot(g, tc.n, tc.g))
				}
				seen++
			}
		}
		if seen != tc.g {
			t.Errorf("n=%d groups=%d: %d roots", tc.n, tc.g, seen)
		}
	}
}

func TestExchange(t *testing.T) {
	for _, tc := range []struct{ n, groups int }{{1, 1}, {2, 1}, {8, 1}, {8, 3}, {512, 4}, {4096, 32}} {
		t.Run(fmt.Sprintf("%d ranks %d groups", tc.n, tc.groups), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			ids, errs, made := runExchange(ctx, NewMemStore(), tc.n, tc.groups, nil, nil)
			t.Logf("%d ranks, %d groups: %v", tc.n, tc.groups, time.Since(start))
			if made != int64(tc.groups) {
				t.Errorf("%d ids made, want %d", made, tc.groups)
			}
			want := make([][]byte, tc.groups)
			for g := range want {
				want[g] = fakeID(g)
			}
			for r := range ids {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if !reflect.DeepEqual(ids[r], want) {
					t.Fatalf("rank %d got other ids", r)
				}
			}
		})
	}
}

// A rank that never arrives: every rank that did names it, before its
// deadline.
func TestExchangeMissing(t *testing.T) {
	for _, tc := range []struct {
		n       int
		skip    []int
		groups  int
		message string
	}{
		{8, []int{3, 5}, 1, "ranks 3, 5 of 8 never checked in"},
		{4, []int{0}, 1, "rank 0 of 4 never checked in"},
		{4096, []int{17, 4000}, 32, "ranks 17, 4000 of 4096 never checked in"},
	} {
		t.Run(tc.message, func(t *testing.T) {
			timeout := 500 * time.Millisecond
			if tc.n > 1000 {
				timeout = 6 * time.Second
				if raceEnabled {
					timeout = 12 * time.Second
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			deadline, _ := ctx.Deadline()
			skip := map[int]bool{}
			for _, r := range tc.skip {
				skip[r] = true
			}
			_, errs, _ := runExchange(ctx, NewMemStore(), tc.n, tc.groups, skip, nil)
			if late := time.Since(deadline); late > 0 {
				t.Errorf("returned %v after the deadline", late)
			}
			for r, err := range errs {
				if skip[r] {
					continue
				}
				var me *MissingError
				if !errors.As(err, &me) {
					t.Fatalf("rank %d: %v (%T)", r, err, err)
				}
				if !reflect.DeepEqual(me.Missing, tc.skip) || !strings.Contains(err.Error(), tc.message) {
					t.Errorf("rank %d: %v", r, err)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("rank %d: %v is not DeadlineExceeded", r, err)
				}
			}
		})
	}
}

// A root that cannot create its id: every rank stops with its error at
// once, not at the deadline.
func TestExchangeRootFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, errs, _ := runExchange(ctx, NewMemStore(), 64, 4, nil, func(r int) ([]byte, error) {
		if r == groupRoot(2, 64, 4) {
			return nil, errors.New("no network interface")
		}
		return fakeID(rootGroup(r, 64, 4)), nil
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	for r, err := range errs {
		var re *RankError
		if r == 32 {
			if err == nil || !strings.Contains(err.Error(), "no network interface") {
				t.Errorf("rank 32: %v", err)
			}
			continue
		}
		if !errors.As(err, &re) || re.Rank != 32 || !strings.Contains(re.Msg, "no network interface") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A rank that fails before it can check in (no GPU): the others stop with
// its error.
func TestExchangeEarlyFailure(t *testing.T) {
	for _, failing := range []int{0, 2} {
		t.Run(fmt.Sprint("rank ", failing), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st := NewMemStore()
			start := time.Now()
			failed := make(chan struct{})
			go func() {
				x := &exchange{store: st, rank: failing, nranks: 4, ngroups: 2}
				x.failEarly(ctx, errors.New("no visible GPU"))
				close(failed)
			}()
			<-failed
			_, errs, _ := runExchange(ctx, st, 4, 2, map[int]bool{failing: true}, nil)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			for r, err := range errs {
				if r == failing {
					continue
				}
				var re *RankError
				if !errors.As(err, &re) || re.Rank != failing || re.Msg != "no visible GPU" {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// The context ends (Ctrl-C) while waiting: Canceled, promptly.
func TestExchangeCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, errs, _ := runExchange(ctx, NewMemStore(), 4, 1, map[int]bool{1: true}, nil)
	for r, err := range errs {
		if r != 1 && (!errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// nopClose shares one store between goroutine ranks: their sessions' Close
// must not close it for the others.
type nopClose struct{ Store }

func (nopClose) Close() error { return nil }

// sessions opens n sessions, one per goroutine rank, over one store.
func sessions(t *testing.T, st Store, n int, opts Options) []*Session {
	t.Helper()
	out := make([]*Session, n)
	for r := range out {
		o := opts
		if o.Name == "" {
			o.Name = t.Name() // generations count per name and rank in a process
		}
		o.Job = &Job{Launcher: LauncherNCCL4Go, Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n}
		o.Store = nopClose{st}
		s, err := Open(context.Background(), &o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[r] = s
	}
	return out
}

func TestSessionBarrierAllGather(t *testing.T) {
	st := NewMemStore()
	const n = 16
	ss := sessions(t, st, n, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 3; round++ { // fresh keys each time
				got, err := s.AllGather(ctx, []byte(fmt.Sprintf("r%d-%d", r, round)))
				if err != nil {
					errs[r] = err
					return
				}
				for q, v := range got {
					if string(v) != fmt.Sprintf("r%d-%d", q, round) {
						errs[r] = fmt.Errorf("round %d: rank %d's value %q", round, q, v)
						return
					}
				}
				if err := s.Barrier(ctx); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// A second session on the same store (a job's second Init) uses other keys.
	ss2 := sessions(t, st, 1, Options{})
	if ss2[0].name == ss[0].name {
		t.Errorf("second session reuses the namespace %q", ss[0].name)
	}
}

func TestBarrierTimeout(t *testing.T) {
	ss := sessions(t, NewMemStore(), 3, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var errs [2]error
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = ss[r].Barrier(ctx) }()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "2 of 3 ranks arrived") || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestAllGatherMissing(t *testing.T) {
	ss := sessions(t, NewMemStore(), 4, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var errs [4]error
	for _, r := range []int{0, 2} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[r] = ss[r].AllGather(ctx, []byte("x")) }()
	}
	wg.Wait()
	for _, r := range []int{0, 2} {
		if err := errs[r]; err == nil || !strings.Contains(err.Error(), "ranks 1, 3 of 4 never joined the all-gather") ||
			!errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestSessionClosed(t *testing.T) {
	s := sessions(t, NewMemStore(), 1, Options{})[0]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := s.Barrier(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Barrier after Close: %v", err)
	}
}

func TestOpenBadJob(t *testing.T) {
	_, err := Open(context.Background(), &Options{Job: &Job{Rank: 2, WorldSize: 2}})
	if err == nil {
		t.Fatal("no error")
	}
}

// Something that is not a store on the store's port: the rank fails with
// an error instead of hanging.
func TestOpenGarbageStore(t *testing.T) {
	addr := httpServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	job := &Job{Launcher: LauncherNCCL4Go, Rank: 1, WorldSize: 2, LocalWorldSize: 1, StoreAddr: addr}
	s, err := Open(ctx, &Options{Job: job})
	if err == nil {
		err = s.Barrier(ctx)
		s.Close()
	}
	t.Logf("%v after %v", err, time.Since(start))
	if err == nil || !errors.Is(err, ErrProtocol) {
		t.Fatalf("error %v does not say the store spoke another protocol", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

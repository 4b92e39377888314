package rendezvous

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Against the fake NCCL, whose communicators of several ranks exist in one
// process without waiting for their peers: the ranks are goroutines sharing
// a memory store, and each creates its communicator.

// communicators runs Communicator on n goroutine ranks.
func communicators(t *testing.T, ctx context.Context, n int, opts Options) ([]*nccl.Communicator, []error) {
	t.Helper()
	ss := sessions(t, NewMemStore(), n, opts)
	comms := make([]*nccl.Communicator, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = s.Communicator(ctx, nil)
		}()
	}
	wg.Wait()
	t.Cleanup(func() { nccl.DestroyAll(comms...) })
	return comms, errs
}

func TestFakeCommunicator(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: 2}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		comms, errs := communicators(t, ctx, 4, Options{})
		for r, c := range comms {
			if errs[r] != nil {
				t.Fatalf("rank %d: %v", r, errs[r])
			}
			n, _ := c.NRanks()
			rank, _ := c.Rank()
			dev, _ := c.Device()
			if n != 4 || rank != r || int(dev) != r%2 {
				t.Errorf("rank %d: communicator of %d ranks, rank %d, device %d", r, n, rank, dev)
			}
		}
		if got := faketest.Calls(t, "ncclGetUniqueId"); got != 1 {
			t.Errorf("%d unique ids created, want 1", got)
		}
		if got := faketest.Calls(t, "ncclCommInitRankConfig"); got != 4 {
			t.Errorf("%d inits, want 4", got)
		}
	})
}

// Large jobs: one unique id per group of ranks, ncclCommInitRankScalable.
func TestFakeCommunicatorScalable(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: 8}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const n, per = 64, 8
		comms, errs := communicators(t, ctx, n, Options{RanksPerRoot: per})
		for r, c := range comms {
			if errs[r] != nil {
				t.Fatalf("rank %d: %v", r, errs[r])
			}
			if rank, _ := c.Rank(); rank != r {
				t.Errorf("rank %d: communicator rank %d", r, rank)
			}
		}
		if got := faketest.Calls(t, "ncclGetUniqueId"); got != n/per {
			t.Errorf("%d unique ids created, want %d", got, n/per)
		}
		if got := faketest.Calls(t, "ncclCommInitRankScalable"); got != n {
			t.Errorf("%d scalable inits, want %d", got, n)
		}
	})
}

// A library without ncclCommInitRankScalable, whatever release it reports:
// one unique id, plain inits (the function's presence decides, not the
// release number).
func TestFakeCommunicatorScalableMissing(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: 8, Release: 22303, Version: 23007}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const n, per = 16, 8
		_, errs := communicators(t, ctx, n, Options{RanksPerRoot: per})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		if got := faketest.Calls(t, "ncclGetUniqueId"); got != 1 {
			t.Errorf("%d unique ids created, want 1", got)
		}
		if got := faketest.Calls(t, "ncclCommInitRankConfig"); got != n {
			t.Errorf("%d inits, want %d", got, n)
		}
	})
}

// A rank whose NCCL init fails: it publishes its error, and the others,
// whose inits hang waiting for it, stop with that error instead of timing
// out.
func TestFakeCommunicatorRankFails(t *testing.T) {
	env := faketest.Env{Devices: 2, Extra: []string{"FAKE_NCCL_HANG=ncclCommInitRankConfig",
		"FAKE_NCCL_FAIL=ncclCommInitRankConfig=5@3"}} // the third init: ncclInvalidUsage
	faketest.Run(t, env, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, errs := communicators(t, ctx, 4, Options{})
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v", d)
		}
		failed := -1
		for r, err := range errs {
			if err == nil {
				t.Fatalf("rank %d: no error", r)
			}
			if errors.Is(err, nccl.ErrInvalidUsage) {
				if failed >= 0 {
					t.Fatalf("ranks %d and %d failed in NCCL", failed, r)
				}
				failed = r
			}
		}
		if failed < 0 {
			t.Fatalf("no rank failed in NCCL: %v", errs)
		}
		for r, err := range errs {
			if r == failed {
				continue
			}
			var re *RankError
			if !errors.As(err, &re) || re.Rank != failed || !strings.Contains(err.Error(), "invalid usage") {
				t.Errorf("rank %d: %v", r, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("rank %d timed out: %v", r, err)
			}
		}
	})
}

// A peer that never arrives, with NCCL's init never returning either: the
// context bounds the wait.
func TestFakeCommunicatorMissingRank(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: 2}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		ss := sessions(t, NewMemStore(), 3, Options{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for r := 0; r < 2; r++ { // rank 2 never comes
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[r] = ss[r].Communicator(ctx, nil) }()
		}
		wg.Wait()
		if late := time.Since(deadline); late > 0 {
			t.Errorf("returned %v after the deadline", late)
		}
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "rank 2 of 3 never checked in") {
				t.Errorf("rank %d: %v", r, err)
			}
		}
		if got := faketest.Calls(t, "ncclCommInitRankConfig"); got != 0 {
			t.Errorf("%d NCCL inits without every rank", got)
		}
	})
}

// No GPU: every rank fails before checking in, and says why.
func TestFakeCommunicatorNoGPU(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: -1}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		_, errs := communicators(t, ctx, 2, Options{})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "GPU") {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	})
}

// Init in one call, for a job of one rank (no launcher).
func TestFakeInitSingle(t *testing.T) {
	faketest.Run(t, faketest.Env{Devices: 1}, func(t *testing.T) {
		job, err := FromMap(nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		comm, got, err := Init(ctx, &Options{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		defer comm.Destroy()
		if n, _ := comm.NRanks(); n != 1 || got.Launcher != LauncherNone {
			t.Errorf("%d ranks, job %v", n, got)
		}
	})
}

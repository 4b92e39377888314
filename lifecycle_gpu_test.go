package nccl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
)

// GPU tests of lifecycle.go: one rank in this process, and several ranks
// as child processes sharing GPU 0 (gputest.RunRanks).

// sinceOK checks a call that needs NCCL since: on an older NCCL it must
// fail with an UnsupportedError for fn; on a new enough one it must not
// claim to be unsupported. It reports whether the call is supported.
func sinceOK(t *testing.T, what string, err error, r, since nccl.Release, fn string) bool {
	t.Helper()
	var ue *nccl.UnsupportedError
	if r < since {
		if !errors.As(err, &ue) || ue.Feature != fn || ue.Since != since || ue.Loaded != r {
			t.Errorf("%s on NCCL %s: %v, want %s unsupported before %s", what, r, err, fn, since)
		}
		return false
	}
	if errors.As(err, &ue) {
		t.Errorf("%s on NCCL %s says unsupported (%v), but NCCL %s has it", what, r, err, since)
	}
	return true
}

func TestGPULifecycleOneRank(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()

	// Split: one colour, and NoColor.
	child, err := c.Split(0, 0, nil)
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	if n, rank := identity(t, child); n != 1 || rank != 0 {
		t.Errorf("child %d/%d", rank, n)
	}
	none, err := c.Split(nccl.NoColor, 0, nil)
	if err != nil || none == nil || none.IsValid() {
		t.Errorf("Split(NoColor) = %v, %v; want a null communicator", none, err)
	}
	if err := child.Destroy(); err != nil {
		t.Errorf("child.Destroy: %v", err)
	}
	_, err = c.Split(0, 0, &nccl.Config{Device: nccl.Ptr(5)})
	wantArg(t, "Split onto another device", err, "Config.Device")

	// Shrink cannot exclude the only rank.
	_, err = c.Shrink([]int{0}, nil, nccl.ShrinkDefault)
	wantArg(t, "Shrink of every rank", err, "exclude")

	// Grow's id; the grow itself needs a joining rank (TestGPULifecycleRanks).
	id, err := c.GetUniqueID()
	if sinceOK(t, "GetUniqueID", err, r, 22902, "ncclCommGetUniqueId") && (err != nil || id.IsZero()) {
		t.Errorf("GetUniqueID = %v, %v", id, err)
	}
	var null nccl.Communicator
	_, err = null.Grow(2, nil, 1, nil)
	wantArg(t, "Grow of a joining rank without an id", err, "id")
	if r < 22902 { // (a real joining Grow waits for its peers: TestGPULifecycleRanks)
		nid, _ := nccl.NewUniqueID()
		_, err = null.Grow(2, &nid, 1, nil)
		sinceOK(t, "Grow (joining)", err, r, 22902, "ncclCommGrow")
		_, err = c.Grow(2, nil, nccl.ExistingRank, nil)
		sinceOK(t, "Grow (existing)", err, r, 22902, "ncclCommGrow")
	}

	// Memory statistics, suspend and resume.
	total, err := c.MemStat(nccl.MemStatGPUMemTotal)
	if sinceOK(t, "MemStat", err, r, 22907, "ncclCommMemStats") && err != nil {
		t.Errorf("MemStat(total) = %d, %v", total, err)
	}
	err = c.Suspend(nccl.SuspendMem)
	if sinceOK(t, "Suspend", err, r, 22907, "ncclCommSuspend") {
		switch {
		case errors.Is(err, nccl.ErrInvalidUsage):
			t.Logf("Suspend refused (memory manager disabled or shared): %v", err)
		case err != nil:
			t.Errorf("Suspend: %v", err)
		default:
			if v, err := c.MemStat(nccl.MemStatGPUMemSuspended); err != nil || v != 1 {
				t.Errorf("MemStat(suspended) = %d, %v; want 1", v, err)
			}
			if err := c.Resume(); err != nil {
				t.Errorf("Resume: %v", err)
			}
		}
	} else {
		sinceOK(t, "Resume", c.Resume(), r, 22907, "ncclCommResume")
	}
	t.Logf("NCCL %s: MemStat(total) %d", r, total)

	// Revoke, then Destroy (which skips Finalize).
	rc := initOne(t)
	if sinceOK(t, "Revoke", rc.Revoke(0), r, 22807, "ncclCommRevoke") {
		if err := rc.Destroy(); err != nil {
			t.Errorf("Destroy after Revoke: %v", err)
		}
	} else {
		rc.Destroy()
	}

	// After Destroy.
	d := initOne(t)
	d.Destroy()
	if _, err := d.Split(0, 0, nil); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Split after Destroy: %v", err)
	}
	if _, err := d.Shrink([]int{1}, nil, 0); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Shrink after Destroy: %v", err)
	}
	if err := d.Revoke(0); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("Revoke after Destroy: %v", err)
	}
}

// A non-blocking one-rank communicator and its non-blocking split complete
// through the context-aware Wait.
func TestGPULifecycleNonBlocking(t *testing.T) {
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	defer c.Destroy()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	child, err := c.SplitContext(ctx, 0, 0, nil)
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	if err := child.Wait(ctx); err != nil {
		t.Fatalf("child.Wait: %v", err)
	}
	if n, rank := identity(t, child); n != 1 || rank != 0 {
		t.Errorf("child %d/%d", rank, n)
	}
	if err := child.DestroyContext(ctx); err != nil {
		t.Errorf("child.Destroy: %v", err)
	}
}

// A non-blocking init whose peer never arrives: Wait returns at its 3 s
// deadline with both the context's and NCCL's state, the communicator is
// aborted, and no goroutine is left.
func TestGPUNonBlockingInitTimeout(t *testing.T) {
	gputest.Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	c, err := nccl.Init(2, 0, id, &nccl.Config{Blocking: nccl.Ptr(false)})
	if err != nil {
		t.Fatalf("non-blocking Init: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err = c.Wait(ctx)
	ctxErr(t, "Wait", err, time.Since(start), 6*time.Second)
	if c.IsValid() {
		t.Error("the communicator was not aborted")
	}
	noLeftGoroutines(t, before)
}

// Three ranks (processes 0-2) and one joining rank (process 3): split into
// colours 0, 1 and NoColor, shrink without the last rank, grow to four.
func TestGPULifecycleRanks(t *testing.T) {
	dir := t.TempDir()
	gputest.RunRanks(t, 4, 100*time.Second, []string{"NCCL4GO_TEST_GROW_DIR=" + dir},
		func(t *testing.T, rank, nprocs int, id nccl.UniqueID) {
			r, err := nccl.Version()
			if err != nil {
				t.Fatal(err)
			}
			idFile := filepath.Join(os.Getenv("NCCL4GO_TEST_GROW_DIR"), "grow-id")
			const n = 3
			if rank == n {
				joinGrow(t, r, idFile, n+1)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
			defer cancel()
			c, err := nccl.InitContext(ctx, n, rank, id, nil)
			if err != nil {
				t.Fatalf("rank %d: Init: %v", rank, err)
			}
			defer c.Destroy()

			// Split: ranks 0 and 1 alone in colours 0 and 1, rank 2 in none.
			color := rank
			if rank == 2 {
				color = nccl.NoColor
			}
			child, err := c.SplitContext(ctx, color, 0, nil)
			if err != nil {
				t.Fatalf("rank %d: Split: %v", rank, err)
			}
			if rank == 2 {
				if child == nil || child.IsValid() {
					t.Errorf("rank 2 (NoColor) got %v", child)
				}
			} else {
				if cn, cr := identity(t, child); cn != 1 || cr != 0 {
					t.Errorf("rank %d: child %d/%d, want 0/1", rank, cr, cn)
				}
				child.Destroy()
			}

			// Shrink without rank 2 (which does not call it).
			if rank < 2 {
				excl := []int{2}
				s, err := c.ShrinkContext(ctx, excl, nil, nccl.ShrinkDefault)
				if err != nil {
					t.Fatalf("rank %d: Shrink: %v", rank, err)
				}
				if sn, sr := identity(t, s); sn != 2 || sr != rank {
					t.Errorf("rank %d: shrunk %d/%d", rank, sr, sn)
				}
				if excl[0] != 2 {
					t.Errorf("Shrink changed the caller's slice")
				}
				s.Destroy()
			}
			barrier(t, c)

			// Grow to four: rank 0 coordinates, process 3 joins.
			var gid *nccl.UniqueID
			if rank == 0 {
				id, err := c.GetUniqueID()
				if !sinceOK(t, "GetUniqueID", err, r, 22902, "ncclCommGetUniqueId") {
					return
				}
				if err != nil {
					t.Fatalf("GetUniqueID: %v", err)
				}
				text, _ := id.MarshalText()
				if err := os.WriteFile(idFile+".tmp", text, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(idFile+".tmp", idFile); err != nil {
					t.Fatal(err)
				}
				gid = &id
			}
			g, err := c.GrowContext(ctx, n+1, gid, nccl.ExistingRank, nil)
			if !sinceOK(t, "Grow", err, r, 22902, "ncclCommGrow") {
				return
			}
			if err != nil {
				t.Fatalf("rank %d: Grow: %v", rank, err)
			}
			if gn, gr := identity(t, g); gn != n+1 || gr != rank {
				t.Errorf("rank %d: grown %d/%d", rank, gr, gn)
			}
			if err := g.DestroyContext(ctx); err != nil {
				t.Errorf("rank %d: grown Destroy: %v", rank, err)
			}
		})
}

// joinGrow is the joining rank of TestGPULifecycleRanks.
func joinGrow(t *testing.T, r nccl.Release, idFile string, n int) {
	if r < 22902 {
		var null nccl.Communicator
		id, _ := nccl.NewUniqueID()
		_, err := null.Grow(n, &id, n-1, nil)
		sinceOK(t, "Grow (joining)", err, r, 22902, "ncclCommGrow")
		return
	}
	var text []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		if text, err = os.ReadFile(idFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grow id from the coordinator: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	id, err := nccl.ParseUniqueID(string(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var null nccl.Communicator
	g, err := null.GrowContext(ctx, n, &id, n-1, nil)
	if err != nil {
		t.Fatalf("joining Grow: %v", err)
	}
	if gn, gr := identity(t, g); gn != n || gr != n-1 {
		t.Errorf("joined %d/%d", gr, gn)
	}
	if err := g.DestroyContext(ctx); err != nil {
		t.Errorf("joined Destroy: %v", err)
	}
}

// barrier is an all-reduce of one element, synchronized.
func barrier(t *testing.T, c *nccl.Communicator) {
	t.Helper()
	dev, _ := c.Device()
	b, err := cuda.Alloc[float32](dev, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	s := dev.DefaultStream()
	if err := c.AllReduce(nccl.BufferOf(b), nccl.BufferOf(b), nccl.Sum, s); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

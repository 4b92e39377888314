package perf

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/rendezvous"
	"github.com/nccl4go/nccl/trace"
)

// opCounter is an Observer counting the operations queued on a
// communicator, and noting any other than the benchmark's own.
type opCounter struct {
	n      atomic.Int64
	mu     sync.Mutex
	others []string
	want   trace.Op
}

func (o *opCounter) Queued(op nccl.QueuedOp) {
	o.n.Add(1)
	if op.Event.Op != o.want {
		o.mu.Lock()
		o.others = append(o.others, op.Event.Op.String())
		o.mu.Unlock()
	}
}

// watchedHost wraps a process's host channel: it counts barriers and the
// operations queued on the process's communicators while one is running.
type watchedHost struct {
	HostChannel
	ops      []*opCounter
	barriers atomic.Int64
	during   atomic.Int64
}

func (h *watchedHost) Barrier(ctx context.Context) error {
	h.barriers.Add(1)
	before := h.count()
	err := h.HostChannel.Barrier(ctx)
	h.during.Add(h.count() - before)
	return err
}

func (h *watchedHost) count() int64 {
	var n int64
	for _, o := range h.ops {
		n += o.n.Load()
	}
	return n
}

// noClose shares one in-memory store between the sessions of a test.
type noClose struct{ rendezvous.Store }

func (noClose) Close() error { return nil }

// runProcs runs one "process" per world on goroutines, joined by a host
// channel over a shared in-memory store, and returns their reports.
func runProcs(t *testing.T, worlds []*World, o Options, want trace.Op) ([]*Report, []*watchedHost) {
	t.Helper()
	store := rendezvous.NewMemStore()
	reps := make([]*Report, len(worlds))
	hosts := make([]*watchedHost, len(worlds))
	errs := make([]error, len(worlds))
	var wg sync.WaitGroup
	for p, w := range worlds {
		s, err := rendezvous.Open(context.Background(), &rendezvous.Options{
			Job: &rendezvous.Job{Rank: p, WorldSize: len(worlds)}, Store: noClose{store}, Name: t.Name()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := &watchedHost{HostChannel: s}
		for _, c := range w.Comms {
			oc := &opCounter{want: want}
			if _, err := c.SetObserver(oc); err != nil {
				t.Fatal(err)
			}
			h.ops = append(h.ops, oc)
		}
		w.Proc, w.NProcs, w.Host = p, len(worlds), h
		hosts[p] = h
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			reps[p], errs[p] = Run(ctx, o, w, &TableWriter{W: &out})
			if p == 0 {
				t.Logf("%s", out.String())
			}
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	return reps, hosts
}

// With -z 1 across processes, the barrier after each operation is
// host-only: no NCCL operation is queued while one runs, and the only
// operations the processes queue at all are the benchmark's own (the
// NCCL coordination queued all-reduces and broadcasts).
func TestHostBarrierMakesNoNCCLCall(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		var worlds []*World
		for range 2 {
			w, err := LocalWorld(context.Background(), []int{0}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			worlds = append(worlds, w)
		}
		o := DefaultOptions("reduce_scatter")
		o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Blocking = 1024, 4096, 2, 5, 1
		reps, hosts := runProcs(t, worlds, o, trace.ReduceScatter)
		for p, h := range hosts {
			// 3 sizes x 2 cells x 5 iterations, plus the barriers around them.
			if n := h.barriers.Load(); n < 3*2*5 {
				t.Errorf("process %d: %d host barriers, want at least 30", p, n)
			}
			if n := h.during.Load(); n != 0 {
				t.Errorf("process %d: %d NCCL operations queued during host barriers", p, n)
			}
			for _, oc := range h.ops {
				if len(oc.others) > 0 {
					t.Errorf("process %d queued %v besides the benchmark's reduce-scatters", p, oc.others)
				}
			}
			if reps[p].Errors != 0 || len(reps[p].Rows) != 3 {
				t.Errorf("process %d: %d errors, %d rows", p, reps[p].Errors, len(reps[p].Rows))
			}
		}
	})
}

// One process with wrong results among two: "Out of bounds values" counts
// that process's wrong cells once, as nccl-tests does (every process
// counted every cell wrong anywhere, so the sum grew with the number of
// processes).
func TestOutOfBoundsCountsEachProcessOnce(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		good, err := LocalWorld(context.Background(), []int{0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer good.Close()
		// The fake's two-rank communicators move no data: every check of
		// this process fails.
		bad, err := LocalWorld(context.Background(), []int{0, 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		o := DefaultOptions("all_reduce")
		o.MinBytes, o.MaxBytes, o.Iters = 4096, 4096, 1
		reps, _ := runProcs(t, []*World{good, bad}, o, trace.AllReduce)
		for p, r := range reps {
			// One row: the bad process's out-of-place and in-place cells.
			if r.Errors != 2 {
				t.Errorf("process %d: Out of bounds values %d, want 2 (the bad process's 2 cells)", p, r.Errors)
			}
			if r.Rows[0].OutOfPlace.Wrong == 0 {
				t.Errorf("process %d: #wrong %d, want the bad process's count", p, r.Rows[0].OutOfPlace.Wrong)
			}
		}
	})
}

package nccl_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/spin"
	"github.com/nccl4go/nccl/trace"
)

// countHook counts what it is told; watch makes it mark the entries
// watched (as a follower of operations does).
type countHook struct {
	mu     sync.Mutex
	ops    []nccl.QueuedOp
	groups int
	watch  bool
}

func (h *countHook) Queued(op nccl.QueuedOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	if h.watch {
		op.Watch()
	}
}

func (h *countHook) GroupEnded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.groups++
}

func (h *countHook) n() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// entriesOf returns the dump entries of the communicator named name.
func entriesOf(t *testing.T, name string) []trace.DumpEntry {
	t.Helper()
	d := trace.Default().Snapshot("test")
	var id uint32
	for _, c := range d.Comms {
		if c.Name == name {
			id = c.ID
		}
	}
	if id == 0 {
		t.Fatalf("no communicator %q in the dump", name)
	}
	var out []trace.DumpEntry
	for _, e := range d.Entries {
		if e.Comm == id {
			out = append(out, e)
		}
	}
	return out
}

// Hooks compose: each AddHook is removed by its own remove, exactly and
// idempotently, whatever else was added.
func TestHooksAddRemove(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := collBuf(t, 0, f32s(4)...)
		ar := func() {
			t.Helper()
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		a, b := &countHook{}, &countHook{}
		ra1, err := c.AddHook(a)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := c.AddHook(b)
		if err != nil {
			t.Fatal(err)
		}
		ra2, err := c.AddHook(a) // the same hook twice: told twice
		if err != nil {
			t.Fatal(err)
		}
		ar()
		if a.n() != 2 || b.n() != 1 {
			t.Fatalf("told a %d, b %d times; want 2, 1", a.n(), b.n())
		}
		ra1()
		ra1() // idempotent: does not remove a's second entry
		ar()
		if a.n() != 3 || b.n() != 2 {
			t.Fatalf("after one remove of a: told a %d, b %d times; want 3, 2", a.n(), b.n())
		}
		rb()
		ar()
		if a.n() != 4 || b.n() != 2 {
			t.Fatalf("after removing b: told a %d, b %d times; want 4, 2", a.n(), b.n())
		}
		ra2()
		ar()
		if a.n() != 4 || b.n() != 2 {
			t.Fatalf("after removing all: told a %d, b %d times; want 4, 2", a.n(), b.n())
		}
		if _, err := c.AddHook(nil); err == nil {
			t.Error("AddHook(nil) accepted")
		}
		var null nccl.Communicator
		if _, err := null.AddHook(a); err == nil {
			t.Error("AddHook on a null communicator accepted")
		}
	})
}

// Hooks are added and removed from many goroutines while calls run: each
// hook is told of every call made between its add and its remove (-race).
func TestHooksConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := collBuf(t, 0, f32s(4)...)
		stop := make(chan struct{})
		var calls sync.WaitGroup
		calls.Add(1)
		go func() {
			defer calls.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					h := &countHook{}
					remove, err := c.AddHook(h)
					if err != nil {
						t.Error(err)
						return
					}
					spin.Yield()
					remove()
					n := h.n()
					remove()
					tc, _ := c.TraceComm()
					before := tc.Seq()
					var bo spin.Backoff
					for tc.Seq() < before+2 {
						bo.Wait()
					}
					if h.n() > n+1 { // at most one call in flight at remove
						t.Errorf("hook told %d times after its remove", h.n()-n)
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		calls.Wait()
	})
}

// A hook that does not follow the operations leaves their entries
// unwatched: a healthy job's dump reads "enqueued", never "stuck". Only a
// hook that calls QueuedOp.Watch (and then starts and completes them)
// marks them.
func TestHookDoesNotMarkWatched(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "unwatched"})
		buf := collBuf(t, 0, f32s(4)...)
		if _, err := addHook(c, &countHook{}); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		es := entriesOf(t, "unwatched")
		if len(es) != 1 || es[0].Watched {
			t.Fatalf("entries %+v; want one unwatched AllReduce", es)
		}
		for _, cr := range trace.Analyze([]*trace.Dump{trace.Default().Snapshot("test")}).Comms {
			if cr.Verdict == trace.VerdictStuck {
				t.Errorf("analysis of a healthy job: %+v", cr)
			}
		}
	})
}

// A hook that follows an operation marks it watched.
func TestHookWatchMarks(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "watched"})
		buf := collBuf(t, 0, f32s(4)...)
		h := &countHook{watch: true}
		if _, err := c.AddHook(h); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		op := h.ops[0]
		op.Trace.Start(op.Ref)
		op.Trace.Complete(op.Ref)
		es := entriesOf(t, "watched")
		if len(es) != 1 || !es[0].Watched || es[0].State != trace.Completed {
			t.Fatalf("entries %+v; want one watched, completed AllReduce", es)
		}
	})
}

// watchingHook follows every operation queued on a stream
// (nccl.WatchingHook): it never calls Watch.
type watchingHook struct{ countHook }

func (*watchingHook) WatchesQueued() {}

// A WatchingHook's operations on a stream are recorded watched, without a
// call to Watch (the watchdog's hot path); a plain hook's are not; and the
// hook is told so in op.Event.Watched.
func TestWatchingHookRecordsWatched(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "watching"})
		buf := collBuf(t, 0, f32s(4)...)
		plain := &countHook{}
		if _, err := c.AddHook(plain); err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		h := &watchingHook{}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		remove()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		es := entriesOf(t, "watching")
		if len(es) != 3 || es[0].Watched || !es[1].Watched || es[2].Watched {
			t.Fatalf("entries %+v; want AllReduce unwatched, watched (a WatchingHook attached), unwatched (removed)", es)
		}
		if len(h.ops) != 1 || !h.ops[0].Event.Watched || len(plain.ops) != 3 || plain.ops[0].Event.Watched || !plain.ops[1].Event.Watched {
			t.Errorf("hooks told %+v and %+v; want Event.Watched only while the WatchingHook was attached", h.ops, plain.ops)
		}
	})
}

func containsAny(s string, words ...string) bool {
	for _, w := range words {
		for i := 0; i+len(w) <= len(s); i++ {
			if s[i:i+len(w)] == w {
				return true
			}
		}
	}
	return false
}

// Group ids belong to the goroutine's group: two operations of one group
// on goroutine A share an id even when goroutine B opens a group between
// them (they used the last group begun anywhere in the process).
func TestGroupIDPerGoroutine(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		a, b := fakeComm(t, 1, 0, nil), fakeComm(t, 1, 0, nil)
		ha, hb := &countHook{}, &countHook{}
		if _, err := addHook(a, ha); err != nil {
			t.Fatal(err)
		}
		if _, err := addHook(b, hb); err != nil {
			t.Fatal(err)
		}
		bufA, bufB := collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(4)...)
		first, opened, second := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := nccl.Group(func() error {
				if err := a.AllReduce(bufA, bufA, nccl.Sum, cuda.Stream{}); err != nil {
					return err
				}
				close(first)
				<-opened
				defer close(second)
				return a.AllReduce(bufA, bufA, nccl.Sum, cuda.Stream{})
			})
			if err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			<-first
			err := nccl.Group(func() error {
				close(opened)
				<-second
				return b.AllReduce(bufB, bufB, nccl.Sum, cuda.Stream{})
			})
			if err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if len(ha.ops) != 2 || len(hb.ops) != 1 {
			t.Fatalf("told %d and %d operations", len(ha.ops), len(hb.ops))
		}
		ga0, ga1, gb := ha.ops[0].Event.Group, ha.ops[1].Event.Group, hb.ops[0].Event.Group
		if ga0 == 0 || ga0 != ga1 || gb == 0 || gb == ga0 {
			t.Errorf("group ids: A's operations %d and %d, B's %d; want A's equal, B's another, none 0", ga0, ga1, gb)
		}
		if ha.groups != 1 || hb.groups != 1 {
			t.Errorf("GroupEnded told %d and %d times, want once each", ha.groups, hb.groups)
		}
		// Outside a group: no group id.
		if err := a.AllReduce(bufA, bufA, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		if g := ha.ops[2].Event.Group; g != 0 {
			t.Errorf("group id %d outside a group", g)
		}
	})
}

// Lifecycle operations are operations: Split, Shrink, Finalize, Revoke and
// Destroy (or Abort) are recorded, told to the hooks with no stream, so that
// a hang in one of them is not blamed on the last collective.
func TestLifecycleRecorded(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64", "FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
			name := "life-nb"
			if blocking {
				name = "life-b"
			}
			c := fakeComm(t, 3, 1, &nccl.Config{CommName: name, Blocking: nccl.Ptr(blocking)})
			h := &countHook{}
			if _, err := addHook(c, h); err != nil {
				t.Fatal(err)
			}
			buf := collBuf(t, 0, f32s(6)...)
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
			child, err := c.Split(0, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer child.Destroy()
			shrunk, err := c.Shrink([]int{0}, nil, nccl.ShrinkDefault)
			if err != nil {
				t.Fatal(err)
			}
			if err := shrunk.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer shrunk.Destroy()
			if err := c.Destroy(); err != nil { // Finalize, then Destroy
				t.Fatal(err)
			}
			want := []trace.Op{trace.AllReduce, trace.Split, trace.Shrink, trace.Finalize, trace.Destroy}
			var got []trace.Op
			for _, op := range h.ops {
				got = append(got, op.Event.Op)
				if op.OnStream != (op.Event.Op == trace.AllReduce) {
					t.Errorf("%v: OnStream %v", op.Event.Op, op.OnStream)
				}
			}
			if !equalOps(got, want) {
				t.Fatalf("hook told %v, want %v", got, want)
			}
			if s := h.ops[1].Ref.Seq(); s != 2 {
				t.Errorf("Split has seq %d, want 2 (after the AllReduce)", s)
			}
			es := entriesOf(t, name)
			got = got[:0]
			for _, e := range es {
				got = append(got, e.Op)
				// The binding follows lifecycle operations itself: watched,
				// and completed once NCCL's work is over; the AllReduce,
				// which no hook follows here, is not watched.
				if life := e.Op != trace.AllReduce; e.Watched != life || (life && e.State != trace.Completed) {
					t.Errorf("dump entry %v: watched %v, %v", e.Op, e.Watched, e.State)
				}
			}
			if !equalOps(got, want) {
				t.Errorf("dump entries %v, want %v", got, want)
			}
			for _, cr := range trace.Analyze([]*trace.Dump{trace.Default().Snapshot("test")}).Comms {
				if cr.Verdict == trace.VerdictStuck {
					t.Errorf("analysis of a healthy job: %+v", cr)
				}
			}
		})
	}
}

func equalOps(a, b []trace.Op) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Operations inside GroupSimulate run nothing: they take no sequence
// number (which made the analyzer report the rank behind) and are not told
// to the hooks.
func TestGroupSimulateTakesNoSeq(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		h := &countHook{}
		if _, err := addHook(c, h); err != nil {
			t.Fatal(err)
		}
		buf := collBuf(t, 0, f32s(4)...)
		if _, err := nccl.GroupSimulate(func() error {
			return c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{})
		}); err != nil {
			t.Fatal(err)
		}
		tc, err := c.TraceComm()
		if err != nil {
			t.Fatal(err)
		}
		if tc.Seq() != 0 || h.n() != 0 {
			t.Errorf("after a simulated AllReduce: seq %d, hook told %d; want 0, 0", tc.Seq(), h.n())
		}
	})
}

// logHook notes, for each operation it is told of, how many calls the fake
// NCCL had logged by then.
type logHook struct {
	t    *testing.T
	ops  []trace.Op
	logs [][]string
}

func (h *logHook) Queued(op nccl.QueuedOp) {
	h.ops = append(h.ops, op.Event.Op)
	h.logs = append(h.logs, faketest.LogLines(h.t))
}

func (h *logHook) GroupEnded() {}

// A blocking communicator's Split and Finalize wait inside NCCL for the
// other ranks, where they may hang: they are recorded (and told) before
// NCCL is called, so that a dump taken during the hang shows them. A
// non-blocking communicator's, which return at once, once NCCL accepted
// them.
func TestBlockingLifecycleRecordedFirst(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		faketest.Run(t, faketest.Env{}, func(t *testing.T) {
			c := fakeComm(t, 2, 0, &nccl.Config{Blocking: nccl.Ptr(blocking)})
			defer c.Destroy()
			if err := c.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			h := &logHook{t: t}
			if _, err := c.AddHook(h); err != nil {
				t.Fatal(err)
			}
			child, err := c.Split(0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer child.Destroy()
			if err := c.FinalizeContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(h.ops) != 2 || h.ops[0] != trace.Split || h.ops[1] != trace.Finalize {
				t.Fatalf("told %v, want [Split Finalize]", h.ops)
			}
			for i, fn := range []string{"ncclCommSplit", "ncclCommFinalize"} {
				called := false
				for _, l := range h.logs[i] {
					called = called || l == fn
				}
				if called == blocking {
					t.Errorf("blocking %v: %s already called when the hook was told: %v", blocking, fn, called)
				}
			}
		})
	}
}

// A blocking Split refused before NCCL (another goroutine's open group
// holds the communicator) is not recorded: it takes no sequence number.
func TestRefusedLifecycleNotRecorded(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		h := &countHook{}
		if _, err := c.AddHook(h); err != nil {
			t.Fatal(err)
		}
		buf := collBuf(t, 0, f32s(4)...)
		queued, refused := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := nccl.Group(func() error {
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
					return err
				}
				close(queued)
				<-refused
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
		<-queued
		_, err := c.Split(0, 0, nil)
		close(refused)
		wg.Wait()
		if err == nil {
			t.Fatal("Split accepted while another goroutine's group holds the communicator")
		}
		tc, _ := c.TraceComm()
		if h.n() != 1 || tc.Seq() != 1 {
			t.Errorf("after the refused Split: hook told %d operations, seq %d; want 1, 1 (the AllReduce)", h.n(), tc.Seq())
		}
	})
}

// blockHook blocks in its first Queued until released.
type blockHook struct {
	in, release chan struct{}
	once        sync.Once
}

func (h *blockHook) Queued(nccl.QueuedOp) {
	h.once.Do(func() {
		close(h.in)
		<-h.release
	})
}

func (h *blockHook) GroupEnded() {}

// remove needs no lock of the communicator: it returns while a call holds
// the communicator (here inside a hook; in life, a blocking call inside
// NCCL), and the call in flight still ends normally.
func TestHookRemoveNeverWaits(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := collBuf(t, 0, f32s(4)...)
		h := &blockHook{in: make(chan struct{}), release: make(chan struct{})}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}) }()
		<-h.in // the call holds the communicator
		removed := make(chan struct{})
		go func() { remove(); close(removed) }()
		select {
		case <-removed:
		case <-time.After(5 * time.Second):
			t.Fatal("remove waited for the call in flight")
		}
		close(h.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// The binding's own following of lifecycle operations does not make the
// analyzer call a healthy job stuck: collectives after a Split that no
// watchdog followed say nothing about completion.
func TestLifecycleThenUnwatchedNotStuck(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=64"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "split-then-ar"})
		buf := collBuf(t, 0, f32s(4)...)
		child, err := c.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer child.Destroy()
		if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		for _, cr := range trace.Analyze([]*trace.Dump{trace.Default().Snapshot("test")}).Comms {
			if cr.Verdict == trace.VerdictStuck {
				t.Errorf("analysis of a healthy job: %+v", cr)
			}
		}
	})
}

// AddHook's doc: the operations keep their sequence numbers when the
// flight recorder is off (NCCL4GO_TRACE_BUFFER=0).
func TestHookSeqWithRecorderOff(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL4GO_TRACE_BUFFER=0"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		buf := collBuf(t, 0, f32s(4)...)
		h := &countHook{}
		remove, err := c.AddHook(h)
		if err != nil {
			t.Fatal(err)
		}
		defer remove()
		for range 3 {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.ops) != 3 {
			t.Fatalf("told %d operations, want 3", len(h.ops))
		}
		for i, op := range h.ops {
			if i > 0 && op.Ref.Seq() != h.ops[i-1].Ref.Seq()+1 {
				t.Errorf("op %d: Seq %d after %d, want consecutive", i, op.Ref.Seq(), h.ops[i-1].Ref.Seq())
			}
			if op.Ref.Seq() == 0 {
				t.Errorf("op %d: Seq 0 with the recorder off", i)
			}
		}
	})
}

// AddHook's doc: remove holds no reference that keeps the communicator
// reachable: a communicator dropped while its remove is kept is still
// reported as leaked.
func TestHookRemoveKeepsNoComm(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		faketest.AllowLeakedComms("the test drops a hooked communicator to see it reported")
		leaks := make(chan nccl.Leak, 4)
		nccl.SetLeakHandler(func(l nccl.Leak) { leaks <- l })
		defer nccl.SetLeakHandler(nil)
		remove := func() func() {
			c := rawComm(t)
			remove, err := c.AddHook(&countHook{})
			if err != nil {
				t.Fatal(err)
			}
			return remove
		}()
		var got bool
		for i := 0; i < 50 && !got; i++ {
			runtime.GC()
			select {
			case <-leaks:
				got = true
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !got {
			t.Fatal("no leak reported for a dropped communicator whose hook's remove is kept")
		}
		remove() // after the communicator is gone: does nothing, no panic
	})
}

// nopHook is told and does nothing.
type nopHook struct{}

func (nopHook) Queued(nccl.QueuedOp) {}
func (nopHook) GroupEnded()          {}

// Telling a hook keeps the hot path: with hooks attached an AllReduce
// still makes one cgo call and no heap allocation of the binding's own.
func TestHookKeepsHotPath(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		b := collBuf(t, 0, f32s(1)...)
		for range 2 {
			remove, err := c.AddHook(nopHook{})
			if err != nil {
				t.Fatal(err)
			}
			defer remove()
		}
		call := func() {
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		wantHotPath(t, "AllReduce with two hooks", call)
	})
}

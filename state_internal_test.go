package nccl

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// Every (state, event) pair: a legal one moves to the table's state, an
// illegal one returns a *StateError naming the operation, matching a
// sentinel, and changes nothing.
func TestLifecycleTransitions(t *testing.T) {
	legal := 0
	for s := range numStates {
		for e := range numEvents {
			c := &Communicator{state: s}
			err := c.move("Op"+e.String(), e)
			want, ok := next(s, e)
			if ok {
				legal++
				if err != nil || c.state != want {
					t.Errorf("%s --%s-->: %v, state %s; want %s", s, e, err, c.state, want)
				}
				continue
			}
			var se *StateError
			if !errors.As(err, &se) {
				t.Errorf("%s --%s-->: %v, want a *StateError", s, e, err)
				continue
			}
			if se.Op != "Op"+e.String() || c.state != s {
				t.Errorf("%s --%s-->: Op %q, state %s; want the op and the state unchanged", s, e, se.Op, c.state)
			}
			matched := 0
			for _, sentinel := range []error{ErrNotInitialized, ErrClosed, ErrInProgress, ErrInvalidUsage} {
				if errors.Is(err, sentinel) {
					matched++
				}
			}
			if matched == 0 {
				t.Errorf("%s --%s-->: %v matches no sentinel", s, e, err)
			}
		}
	}
	if legal != 30 {
		t.Errorf("%d legal (state, event) pairs, want 30: update this count with the table and its drawing", legal)
	}

	// The refusals a caller sees, pinned.
	for _, tc := range []struct {
		s    commState
		e    lifeEvent
		want error
		text string
	}{
		{stateNull, evUse, ErrNotInitialized, "communicator not initialized"},
		{stateDestroyed, evUse, ErrClosed, "communicator destroyed"},
		{stateAborted, evDestroy, ErrClosed, "already aborted"},
		{stateFinalized, evQueue, ErrClosed, "finalized"},
		{stateRevoked, evQueue, ErrClosed, "revoked"},
		{stateFinalized, evDerive, ErrClosed, "finalized"},
		{stateFinalized, evFinalize, ErrInvalidUsage, "already finalized"},
		{stateRevoked, evFinalize, ErrInvalidUsage, "no Finalize after Revoke"},
		{stateLive, evInitialize, ErrInvalidUsage, "already initialized"},
		{stateCreating, evAbort, ErrInProgress, "aborted as soon as NCCL returns it"},
		{statePending, evUse, ErrInProgress, "still being created"},
		{stateDestroyed, evJoin, ErrClosed, "destroyed"},
	} {
		err := (&Communicator{state: tc.s}).move("X", tc.e)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "nccl: X: ") {
			t.Errorf("%s --%s-->: %v; want %v saying %q", tc.s, tc.e, err, tc.want, tc.text)
		}
	}
}

// The drawing in state.go's comment lists exactly the table's edges.
func TestLifecycleDrawingMatchesTable(t *testing.T) {
	src, err := os.ReadFile("state.go")
	if err != nil {
		t.Fatal(err)
	}
	edge := regexp.MustCompile(`^//\t([a-z, ]+) --([A-Za-z]+)--> ([a-z=]+)$`)
	var drawn []string
	for _, line := range strings.Split(string(src), "\n") {
		m := edge.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, from := range strings.Split(m[1], ", ") {
			drawn = append(drawn, from+" "+m[2]+" "+m[3])
		}
	}
	var table []string
	for _, e := range lifeEdges {
		to := "="
		if e.to != stay {
			to = e.to.String()
		}
		for _, from := range e.from {
			table = append(table, from.String()+" "+e.ev.String()+" "+to)
		}
	}
	slices.Sort(drawn)
	slices.Sort(table)
	if !slices.Equal(drawn, table) {
		t.Errorf("state.go's drawing and lifeEdges differ:\ndrawn: %q\ntable: %q", drawn, table)
	}
	if len(table) == 0 {
		t.Fatal("no edges")
	}
}

// ptr is set exactly in the states that hold an NCCL communicator, which
// lockLive's fast check (ptr == 0) relies on; the use event is legal
// exactly there.
func TestLifecycleUseMatchesPtrStates(t *testing.T) {
	for s := range numStates {
		_, ok := next(s, evUse)
		holds := s == stateLive || s == stateFinalized || s == stateRevoked
		if ok != holds {
			t.Errorf("%s: use legal %v, holds a pointer %v", s, ok, holds)
		}
	}
}

// The calls drive the table: a communicator walked through its life on the
// fake library is in the state each step names, and holds an NCCL pointer
// exactly in live, finalized and revoked.
func TestFakeLifecycleWalk(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=3"}}, func(t *testing.T) {
		want := func(step string, c *Communicator, s commState) {
			t.Helper()
			c.mu.Lock()
			got, ptr := c.state, c.ptr
			c.mu.Unlock()
			if got != s || (ptr != 0) != (s == stateLive || s == stateFinalized || s == stateRevoked) {
				t.Errorf("after %s: state %s, ptr %#x; want %s", step, got, ptr, s)
			}
		}
		id, err := NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		var c Communicator
		want("zero value", &c, stateNull)
		if err := c.Initialize(1, 0, id, nil); err != nil {
			t.Fatal(err)
		}
		want("Initialize", &c, stateLive)
		if err := c.Initialize(1, 0, id, nil); !errors.Is(err, ErrInvalidUsage) {
			t.Errorf("second Initialize: %v, want ErrInvalidUsage", err)
		}
		if err := c.Finalize(); err != nil {
			t.Fatal(err)
		}
		want("Finalize", &c, stateFinalized)
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		want("Destroy", &c, stateDestroyed)
		if err := c.Initialize(1, 0, id, nil); err != nil {
			t.Fatal(err)
		}
		want("Initialize after Destroy", &c, stateLive)
		if err := c.Revoke(0); err != nil {
			t.Fatal(err)
		}
		want("Revoke", &c, stateRevoked)
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
		want("Abort", &c, stateAborted)

		parent, err := Init(1, 0, id, &Config{Blocking: Ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		defer parent.Abort()
		if err := parent.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		child, err := parent.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		want("Split on a non-blocking parent", child, statePending)
		if err := child.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		want("Wait on the child", child, stateLive)
		if err := child.Abort(); err != nil {
			t.Fatal(err)
		}
		want("Abort of the child", child, stateAborted)
		none, err := parent.Split(NoColor, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		want("Split with NoColor", none, stateNull)
		abandoned, err := parent.Split(0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := abandoned.Abort(); err != nil {
			t.Fatal(err)
		}
		want("Abort of a pending child", abandoned, stateAborted)
	})
}

package nccl

import "fmt"

// The lifecycle of a Communicator: one state (Communicator.state, guarded
// by its mu) and the table of legal transitions below, applied by one
// function, moveLocked. Every lifecycle check of the package asks the
// table (through moveLocked, or allowsLocked for a call that changes
// nothing); no other field says what a communicator may do.
//
// States
//
//	null       no NCCL communicator: the zero value, Grow's joining side, or
//	           the child of a rank that passed NoColor to Split
//	creating   Initialize is inside NCCL's init, without mu; NCCL has given
//	           no pointer yet (Destroy and Abort ask to abort it once it does)
//	pending    a Split or Shrink child whose pointer NCCL stores only when
//	           the parent's job ends (pending.go)
//	live       ptr set: takes every call
//	finalized  ptr set: Finalize accepted; takes no new operations
//	revoked    ptr set: Revoke accepted; takes no new operations, may still
//	           be split or shrunk
//	destroyed  Destroy freed it (ptr 0)
//	aborted    Abort freed it, or its creation failed (ptr 0)
//
//	ptr != 0 exactly in live, finalized and revoked (lockLive's fast check).
//
//	                  Initialize              created
//	   null -----------------------> creating ---------> live --Finalize--> finalized
//	   |  ^                              |                ^  |                  |
//	   |  +-----------failed-------------+                |  +--Revoke--> revoked
//	   |                                                  |                     |
//	   +--Split--> pending ---------created---------------+                     |
//	   |              |                                   |                     |
//	   |              +--failed, Abort--> aborted         |  live, finalized, revoked
//	   |                                                  |  --Destroy--> destroyed
//	   +--created (InitAll and Grow make a new one)-------+  --Abort--> aborted
//
//	   destroyed and aborted take Initialize as null does.
//
// Transitions (the table, one edge a line; "=" keeps the state; a test
// checks this list against lifeEdges):
//
//	null, destroyed, aborted --Initialize--> creating
//	creating --created--> live
//	creating --failed--> null
//	null --created--> live
//	null --Split--> pending
//	pending --created--> live
//	pending --failed--> aborted
//	pending --Abort--> aborted
//	live --Finalize--> finalized
//	live --Revoke--> revoked
//	finalized, revoked --Revoke--> =
//	live, finalized, revoked --use--> =
//	live --queue--> =
//	live, revoked --derive--> =
//	live, finalized, revoked --Destroy--> destroyed
//	live, finalized, revoked --Abort--> aborted
//	null --join--> =
//	null --Finalize--> =
//	null --Destroy--> =
//	null --Abort--> =
//
// Events: Initialize, Split, Finalize, Revoke, Destroy and Abort are the
// methods of those names (Split stands for Shrink too: the child's side;
// Destroy and Abort move the state when NCCL has freed the communicator);
// created and failed are NCCL's answer to a creation (Init, InitAll, Grow,
// or a pending child's parent job); use is any call on the NCCL
// communicator, queue one that queues new operations (collectives,
// registrations, ...), derive a Split, Shrink or Grow on the parent, join
// Grow on a null communicator (a joining rank). Any other (state, event) is
// refused with a *[StateError] (see refusal).
//
// Not lifecycle, and so plain fields: blocking (a config fact), identity
// and props (caches), nbCounted and hasClean (bookkeeping of what adoption
// registered), abortReq (what creating was asked), closing (Destroy's
// mutual exclusion), abortCause (the cause a StateError carries).

// commState is a [Communicator]'s lifecycle state.
type commState uint8

const (
	stateNull commState = iota
	stateCreating
	statePending
	stateLive
	stateFinalized
	stateRevoked
	stateDestroyed
	stateAborted
	numStates
)

var stateNames = [numStates]string{"null", "creating", "pending", "live", "finalized", "revoked", "destroyed", "aborted"}

func (s commState) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("commState(%d)", uint8(s))
}

// lifeEvent is what moves (or only asks) the lifecycle.
type lifeEvent uint8

const (
	evInitialize lifeEvent = iota
	evCreated
	evFailed
	evSplit
	evFinalize
	evRevoke
	evUse
	evQueue
	evDerive
	evJoin
	evDestroy
	evAbort
	numEvents
)

var eventNames = [numEvents]string{"Initialize", "created", "failed", "Split", "Finalize", "Revoke", "use", "queue", "derive", "join", "Destroy", "Abort"}

func (e lifeEvent) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("lifeEvent(%d)", uint8(e))
}

// lifeEdge is a legal transition.
type lifeEdge struct {
	from []commState
	ev   lifeEvent
	to   commState // stay: keep the state
}

// stay is lifeEdge.to for an event that keeps the state.
const stay = numStates

// lifeEdges is the table: every legal transition, in the drawing's order.
var lifeEdges = []lifeEdge{
	{[]commState{stateNull, stateDestroyed, stateAborted}, evInitialize, stateCreating},
	{[]commState{stateCreating}, evCreated, stateLive},
	{[]commState{stateCreating}, evFailed, stateNull},
	{[]commState{stateNull}, evCreated, stateLive},
	{[]commState{stateNull}, evSplit, statePending},
	{[]commState{statePending}, evCreated, stateLive},
	{[]commState{statePending}, evFailed, stateAborted},
	{[]commState{statePending}, evAbort, stateAborted},
	{[]commState{stateLive}, evFinalize, stateFinalized},
	{[]commState{stateLive}, evRevoke, stateRevoked},
	{[]commState{stateFinalized, stateRevoked}, evRevoke, stay},
	{[]commState{stateLive, stateFinalized, stateRevoked}, evUse, stay},
	{[]commState{stateLive}, evQueue, stay},
	{[]commState{stateLive, stateRevoked}, evDerive, stay},
	{[]commState{stateLive, stateFinalized, stateRevoked}, evDestroy, stateDestroyed},
	{[]commState{stateLive, stateFinalized, stateRevoked}, evAbort, stateAborted},
	{[]commState{stateNull}, evJoin, stay},
	{[]commState{stateNull}, evFinalize, stay},
	{[]commState{stateNull}, evDestroy, stay},
	{[]commState{stateNull}, evAbort, stay},
}

// illegal marks a refused (state, event) in lifeTable.
const illegal = numStates + 1

// lifeTable is lifeEdges indexed: the next state, stay, or illegal.
var lifeTable = func() (t [numStates][numEvents]commState) {
	for s := range t {
		for e := range t[s] {
			t[s][e] = illegal
		}
	}
	for _, e := range lifeEdges {
		for _, s := range e.from {
			t[s][e.ev] = e.to
		}
	}
	return t
}()

// next is the state event e leads to from s, and whether e is legal there.
func next(s commState, e lifeEvent) (commState, bool) {
	switch to := lifeTable[s][e]; to {
	case illegal:
		return s, false
	case stay:
		return s, true
	default:
		return to, true
	}
}

// moveLocked applies event e to c (mu held): the transition's new state, or
// the refusal of op, a *[StateError], changing nothing.
func (c *Communicator) moveLocked(op string, e lifeEvent) error {
	to, ok := next(c.state, e)
	if !ok {
		return c.refusalLocked(op, e)
	}
	c.state = to
	return nil
}

// move is moveLocked under c's mu.
func (c *Communicator) move(op string, e lifeEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moveLocked(op, e)
}

// allowsLocked reports whether event e is legal in c's state (mu held),
// without applying it.
func (c *Communicator) allowsLocked(e lifeEvent) bool {
	_, ok := next(c.state, e)
	return ok
}

// refusalLocked is the *[StateError] of op, whose event e c's state refuses
// (mu held).
func (c *Communicator) refusalLocked(op string, e lifeEvent) error {
	return refusal(op, c.state, e, c.abortCause)
}

// refusal is the *[StateError] of op refused in state s for event e: which
// sentinel it matches and what it tells the caller.
func refusal(op string, s commState, e lifeEvent, cause error) *StateError {
	se := &StateError{Op: op, State: s.String(), Cause: cause}
	if s == stateNull {
		se.State = "not initialized"
	}
	switch s {
	case stateNull, stateDestroyed, stateAborted:
		// ErrNotInitialized (and ErrClosed once destroyed or aborted):
		// StateError.Is by State.
		if s != stateNull && (e == evDestroy || e == evAbort || e == evFinalize) {
			se.err = ErrClosed
			se.why = "communicator already " + s.String()
		}
	case stateCreating:
		se.err = ErrInProgress
		se.why = "a blocking init of this communicator is inside NCCL, which cannot be interrupted"
		if e == evDestroy || e == evAbort {
			se.why += ": it will be aborted as soon as NCCL returns it"
		}
		if e == evInitialize {
			se.err, se.why = ErrInvalidUsage, "communicator already being initialized"
		}
	case statePending:
		se.err = ErrInProgress
		se.why = "the communicator is still being created by Split or Shrink: Wait for it (or end the group that created it) first"
		if e == evInitialize {
			se.err = ErrInvalidUsage
		}
	case stateLive:
		se.err, se.why = ErrInvalidUsage, "communicator already initialized"
		if e == evSplit {
			se.why = "communicator already initialized: a child starts null"
		}
	case stateFinalized, stateRevoked:
		switch e {
		case evFinalize:
			se.err = ErrInvalidUsage
			if s == stateFinalized {
				se.why = "communicator already finalized"
			} else {
				se.why = "communicator revoked: NCCL allows no Finalize after Revoke (Destroy or Abort it)"
			}
		case evInitialize:
			se.err, se.why = ErrInvalidUsage, "communicator already initialized"
		default:
			se.err = ErrClosed
			if s == stateFinalized {
				se.why = "communicator finalized (by Finalize, or by a Destroy under way): it takes no new operations"
			} else {
				se.why = "communicator revoked: it takes no new operations (Split, Shrink, Destroy or Abort it)"
			}
		}
	}
	return se
}

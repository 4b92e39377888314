package nccl

import (
	"fmt"
	"runtime"
	"sync"
)

// Communicator is an NCCL communicator (ncclComm_t): one rank's handle on a
// group of ranks that run collectives together.
//
// The zero value is the null communicator: every method on it returns an
// error wrapping [ErrNotInitialized] that names the operation (a
// *[StateError]), except [Communicator.Destroy], [Communicator.Abort] and
// [Communicator.Finalize], which do nothing. [Communicator.Initialize] makes
// it a communicator; [Communicator.Split] gives one to ranks that pass
// [NoColor]; [Communicator.Grow]'s joining ranks start from one. A finalized
// or revoked communicator takes no new operations ([ErrClosed]).
//
// A Communicator is safe for use by several goroutines: its NCCL calls are
// serialized. Abort is never held up by a wait in flight (a non-blocking
// communicator waits outside NCCL, releasing the communicator between
// polls); it does wait for a call that is inside NCCL, since freeing the
// communicator under it would crash the process: a blocking communicator's
// Split, Finalize or Destroy waits inside NCCL for its peers. Operations
// issued inside a group follow the rules of [Group]. Do not copy a
// Communicator once used; pass *Communicator.
type Communicator struct {
	mu    sync.Mutex // held for each NCCL call on ptr, never while waiting
	ptr   uintptr    // ncclComm_t; != 0 exactly in states live, finalized and revoked
	state commState  // the lifecycle (state.go): changed only by moveLocked

	// Facts of the NCCL communicator, set when it is adopted.
	blocking bool // Config.Blocking: NCCL runs the communicator blocking (a config fact)
	dev      int  // CUDA device ordinal
	// Caches, filled on first use (identity.go, properties.go).
	nranks   int
	rank     int
	identity bool // nranks and rank are cached
	// The collective hot path reads the fields above and these two (mu
	// through trace.hooks): kept together, they span two cache lines.
	coll  collState  // facts the collectives cache (collectives.go)
	trace traceState // the flight recorder's view (record.go)

	props    *Properties
	propsErr error // a query failure that cannot change (unsupported)

	// Lifecycle bookkeeping that is data, not state (state.go).
	abortReq   string        // "Abort" or "Destroy" when called while creating: abort once created
	closing    chan struct{} // a Destroy is under way: closed when it returns
	abortCause error         // AbortCause's reason: later calls' StateError wraps it
	nbCounted  bool          // counted in capi.NonBlockingAdd (NCCL runs it non-blocking)
	cleanup    runtime.Cleanup
	hasClean   bool // cleanup is registered (leak.go)

	resources []resource  // tracked, closed by Destroy and Abort (resource.go)
	customOps []*CustomOp // live custom reduction operators (redop.go)
	life      lifeState   // outputs NCCL writes later: Split/Shrink/Grow, windows (pending.go)
}

// Blocking reports whether NCCL runs the communicator blocking: its
// [Config.Blocking] (default true), unless NCCL_COMM_BLOCKING=0 made NCCL run
// it non-blocking. False for a null communicator. Not an NCCL call.
func (c *Communicator) Blocking() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ptr != 0 && c.blocking && !c.nbCounted
}

// Handle is the raw ncclComm_t, 0 for a null communicator, for passing to
// C code that calls NCCL itself. It is valid only until [Communicator.Destroy]
// or [Communicator.Abort].
func (c *Communicator) Handle() uintptr {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == 0 && c.life.pend != nil {
		c.resolveLocked() // a Split or Shrink child becomes valid once ready
	}
	return c.ptr
}

// IsValid reports whether c is initialized (not null, destroyed or aborted).
func (c *Communicator) IsValid() bool { return c.Handle() != 0 }

// String reads "nccl.Communicator(rank 1/4, cuda:1, 0x7f...)" or
// "nccl.Communicator(null)". It never calls NCCL.
func (c *Communicator) String() string {
	if c == nil {
		return "nccl.Communicator(null)"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.state == statePending && c.life.pend != nil:
		return fmt.Sprintf("nccl.Communicator(being created by %s, cuda:%d)", c.life.pend.op, c.dev)
	case c.state == stateCreating:
		return "nccl.Communicator(being initialized)"
	case c.ptr == 0 && c.state != stateNull:
		return fmt.Sprintf("nccl.Communicator(null, %s)", c.state)
	case c.ptr == 0:
		return "nccl.Communicator(null)"
	case !c.identity:
		return fmt.Sprintf("nccl.Communicator(cuda:%d, %#x)", c.dev, c.ptr)
	}
	return fmt.Sprintf("nccl.Communicator(rank %d/%d, cuda:%d, %#x)", c.rank, c.nranks, c.dev, c.ptr)
}

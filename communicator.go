package nccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
	"github.com/nccl4go/nccl/trace"
)

// Communicator is an NCCL communicator (ncclComm_t): one rank's handle on a
// group of ranks that run collectives together.
//
// The zero value is the null communicator: every method on it returns an
// error wrapping [ErrNotInitialized] that names the operation, except
// Destroy, Abort and Finalize, which do nothing. Initialize makes it a
// communicator; Split gives one to ranks that pass [NoColor]; Grow's joining
// ranks start from one.
//
// A Communicator is safe for use by several goroutines: its NCCL calls are
// serialized. Abort is never held up by a wait in flight (a non-blocking
// communicator waits outside NCCL, releasing the communicator between
// polls); it does wait for a call that is inside NCCL, since freeing the
// communicator under it would crash the process: a blocking communicator's
// Split, Finalize or Destroy waits inside NCCL for its peers. Operations
// issued inside a group stay NCCL's until the group ends, and NCCL's queue
// of a communicator belongs to one group at a time: while one goroutine's
// open group holds operations of the communicator, other goroutines cannot
// queue operations on it, and Finalize, Destroy and Abort refuse (all with
// [ErrInvalidUsage]), as they do inside a group. A finalized communicator
// takes no new operations ([ErrClosed]). Do not copy
// a Communicator once used; pass *Communicator.
type Communicator struct {
	mu         sync.Mutex // held for each NCCL call on ptr, never while waiting
	ptr        uintptr    // ncclComm_t, 0 when null
	state      commState
	blocking   bool // Config.Blocking: NCCL runs the communicator blocking
	dev        int  // CUDA device ordinal
	nranks     int  // cached after the first query
	rank       int
	identity   bool          // nranks and rank are cached
	finalized  bool          // Finalize was called (NCCL rejects a second one)
	revoked    bool          // Revoke was called (NCCL then refuses Finalize and new work)
	creating   bool          // Initialize is inside NCCL's init, without mu
	abortReq   string        // "Abort" or "Destroy" when called while creating: abort once created
	closing    chan struct{} // a Destroy is under way: closed when it returns
	abortCause error         // AbortCause's reason: later calls' StateError wraps it
	nbCounted  bool          // counted in capi.NonBlockingAdd (NCCL runs it non-blocking)
	props      *Properties
	propsErr   error // a query failure that cannot change (unsupported)
	resources  []resource
	coll       collState   // facts the collectives cache (collectives.go)
	customOps  []*CustomOp // live custom reduction operators (redop.go)
	life       lifeState   // outputs NCCL writes later: Split/Shrink/Grow, windows (child.go)
	trace      traceState  // the flight recorder's view (record.go)
	cleanup    runtime.Cleanup
	hasClean   bool
}

type commState uint8

const (
	stateNull commState = iota
	stateLive
	stateDestroyed
	stateAborted
)

func (s commState) String() string {
	switch s {
	case stateDestroyed:
		return "destroyed"
	case stateAborted:
		return "aborted"
	case stateLive:
		return "live"
	}
	return "not initialized"
}

// resource is something a communicator tracks and closes before it goes.
type resource interface {
	// closeLocked releases the resource; the communicator's mu is held and
	// its ptr is still valid.
	closeLocked() error
}

// registry maps live NCCL communicators to their Go values, for the
// communicators a group used (the shim names them by pointer).
var registry sync.Map // uintptr -> weak.Pointer[Communicator]

func register(c *Communicator) { registry.Store(c.ptr, weak.Make(c)) }

func lookup(ptr uintptr) *Communicator {
	if v, ok := registry.Load(ptr); ok {
		return v.(weak.Pointer[Communicator]).Value()
	}
	return nil
}

// Init creates this rank's communicator among nranks ranks
// (ncclCommInitRankConfig), on device cfg.Device (default 0). Every rank
// calls it with the same id and nranks and its own rank. Collective: it
// returns once all ranks have joined (for a blocking communicator). NCCL 2.14.3.
func Init(nranks, rank int, id UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(context.Background(), started, "Init", nranks, rank, []UniqueID{id}, cfg)
}

// InitContext is [Init] (ncclCommInitRankConfig, collective, NCCL 2.14.3)
// that completes before returning and is bounded by ctx: for a non-blocking
// communicator ([Config.Blocking] false), if ctx ends before all ranks have
// joined, the communicator is aborted and the error matches both ctx.Err()
// and [ErrInProgress]. A blocking init waits inside NCCL, where ctx cannot
// reach it: ctx is checked before.
func InitContext(ctx context.Context, nranks, rank int, id UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(ctx, completed, "Init", nranks, rank, []UniqueID{id}, cfg)
}

// newComm is the Init family's constructor.
func newComm(ctx context.Context, m mode, op string, nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	c := new(Communicator)
	if err := c.initialize(ctx, m, op, nranks, rank, ids, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// InitScalable is [Init] with several ids spread over the ranks
// (ncclCommInitRankScalable), for very large jobs: ids[i] was created by one
// rank each, and every rank passes all of them. Collective. NCCL 2.23.4.
func InitScalable(nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(context.Background(), started, "InitScalable", nranks, rank, ids, cfg)
}

// InitScalableContext is [InitScalable] (ncclCommInitRankScalable, collective,
// NCCL 2.23.4) bounded by ctx as [InitContext] is.
func InitScalableContext(ctx context.Context, nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(ctx, completed, "InitScalable", nranks, rank, ids, cfg)
}

// Initialize initializes a null communicator in place
// (ncclCommInitRankConfig; see [Init]). It fails if c is already initialized.
// Collective. NCCL 2.14.3.
func (c *Communicator) Initialize(nranks, rank int, id UniqueID, cfg *Config) error {
	return c.initialize(context.Background(), started, "Init", nranks, rank, []UniqueID{id}, cfg)
}

// InitializeContext is Initialize (ncclCommInitRankConfig, collective, NCCL
// 2.14.3) bounded by ctx as [InitContext] is.
func (c *Communicator) InitializeContext(ctx context.Context, nranks, rank int, id UniqueID, cfg *Config) error {
	return c.initialize(ctx, completed, "Init", nranks, rank, []UniqueID{id}, cfg)
}

// initialize is the Init family: ncclCommInitRankConfig, or
// ncclCommInitRankScalable for several ids, finished as m says.
func (c *Communicator) initialize(ctx context.Context, m mode, op string, nranks, rank int, ids []UniqueID, cfg *Config) error {
	if c == nil {
		return argErr(op, "communicator", "nil *Communicator")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := loaded()
	if err != nil {
		return err
	}
	if nranks < 1 || nranks > maxInt32 {
		return argErr(op, "nranks", "%d: need at least 1 and at most %d", nranks, maxInt32)
	}
	if rank < 0 || rank >= nranks {
		return argErr(op, "rank", "%d: not in [0, %d)", rank, nranks)
	}
	if len(ids) == 0 {
		return argErr(op, "ids", "no UniqueID")
	}
	if len(ids) > nranks {
		return argErr(op, "ids", "%d ids for %d ranks: at most one per rank", len(ids), nranks)
	}
	for i, id := range ids {
		if id.IsZero() {
			return argErr(op, "id", "UniqueID %d is all zeros: create it with NewUniqueID on one rank and send it to the others", i)
		}
	}
	ccfg, blocking, err := cfg.encode(op, r)
	if err != nil {
		return err
	}
	dev := cfg.device(0)
	cctx, err := deviceContext(op, "Config.Device", dev)
	if err != nil {
		return err
	}

	// A blocking init waits inside NCCL for every rank: do not hold mu
	// meanwhile (nothing can use c before it has a pointer).
	if !c.startCreating() {
		return fmt.Errorf("nccl: %s: communicator already initialized (%v): %w", op, c, ErrInvalidUsage)
	}
	defer c.endCreating()
	cell := capi.NewCell()
	defer cell.Free()
	var st capi.Status
	fn := "ncclCommInitRankConfig"
	if len(ids) == 1 && op != "InitScalable" {
		st = capi.CommInitRankConfig(cctx, cell, nranks, (*[128]byte)(&ids[0]), rank, ccfg)
	} else {
		fn = "ncclCommInitRankScalable"
		raw := make([][128]byte, len(ids))
		for i := range ids {
			raw[i] = ids[i]
		}
		st = capi.CommInitRankScalable(cctx, cell, nranks, rank, raw, ccfg)
	}
	ptr := cell.Load()
	if st.Code != 0 && Result(st.Code) != InProgress {
		if ptr != 0 { // NCCL leaves a failed communicator to be aborted
			capi.CommAbort(ptr)
		}
		return statusErr(op, fn, st)
	}
	if by := c.adoptCreated(ptr, dev, blocking, hashID(ids), cfg.commName()); by != "" {
		return errors.Join(fmt.Errorf("nccl: %s: aborted (%s was called during the init): %w", op, by, ErrClosed), c.Abort())
	}
	return c.settle(ctx, m, op)
}

// startCreating marks c as being created by an init, which runs without
// mu. It reports false, changing nothing, if c is initialized or being
// created already.
func (c *Communicator) startCreating() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 || c.life.pend != nil || c.creating {
		return false
	}
	c.creating = true
	return true
}

// endCreating ends what startCreating began, once the init has returned.
func (c *Communicator) endCreating() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creating, c.abortReq = false, ""
}

// adoptCreated makes c the owner of the NCCL communicator its init
// created, with its flight recorder's identity (record.go). It returns the
// call ("Abort" or "Destroy") that asked to abort c during the init, if any.
func (c *Communicator) adoptCreated(ptr uintptr, dev int, blocking bool, hash uint64, name string) (abortReq string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adoptLocked(ptr, dev, blocking)
	c.trace.hash, c.trace.name = hash, name
	abortReq, c.abortReq = c.abortReq, ""
	return abortReq
}

// settle finishes the creation of c: in a group nothing can complete before
// the group ends; otherwise it waits until NCCL is done when m or a
// blocking communicator says so.
func (c *Communicator) settle(ctx context.Context, m mode, op string) error {
	if _, blocking := c.devBlocking(); !completes(m, blocking) || capi.GroupDepth() > 0 {
		return nil
	}
	if err := c.wait(ctx, op); err != nil {
		c.Abort()
		return err
	}
	return nil
}

// devBlocking returns c's device and whether it is blocking.
func (c *Communicator) devBlocking() (dev int, blocking bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dev, c.blocking
}

// adoptLocked makes c the owner of a new NCCL communicator.
func (c *Communicator) adoptLocked(ptr uintptr, dev int, blocking bool) {
	c.ptr, c.state, c.dev, c.blocking = ptr, stateLive, dev, blocking
	if nb := !blocking || os.Getenv("NCCL_COMM_BLOCKING") == "0"; nb != c.nbCounted {
		if nb {
			capi.NonBlockingAdd(1)
		} else {
			capi.NonBlockingAdd(-1)
		}
		c.nbCounted = nb
	}
	c.identity, c.finalized, c.revoked, c.props, c.propsErr, c.resources = false, false, false, nil, nil, nil
	c.abortCause = nil // a new NCCL communicator: the last one's abort is not its
	register(c)
	c.watchLeak()
}

// deviceContext is the primary context of device dev, or an ArgError on
// the argument arg.
func deviceContext(op, arg string, dev int) (uintptr, error) {
	ctx, err := primaryContext(dev)
	if err != nil {
		return 0, &ArgError{Op: op, Arg: arg, Reason: fmt.Sprintf("device %d: %v", dev, err), Err: err}
	}
	return ctx, nil
}

// InitAll creates one communicator per device, all in this process
// (several GPUs driven from one process): rank i runs on devices[i]. nil
// means every visible device. A device may appear twice only where the
// loaded NCCL lets ranks share a GPU (2.30.3 and later, with
// NCCL_MULTI_RANK_GPU_ENABLE=1); ranks sharing a GPU must then run their
// operations on distinct streams, or their kernels wait for each other
// forever. Destroy each communicator when done.
// Collective over the ranks it creates, all in this process. NCCL 2.14.3
// (built on ncclCommInitRankConfig in a group, as ncclCommInitAll is, so
// that it takes a config and a context can bound it).
func InitAll(devices []int) ([]*Communicator, error) {
	return initAll(context.Background(), started, devices, nil)
}

// InitAllContext is [InitAll] (ncclCommInitRankConfig per device in one
// group, NCCL 2.14.3) with a config for every communicator (its Device must
// be nil), bounded by ctx when the config is non-blocking; a blocking group
// waits inside NCCL.
func InitAllContext(ctx context.Context, devices []int, cfg *Config) ([]*Communicator, error) {
	return initAll(ctx, completed, devices, cfg)
}

// initAll is InitAll, finished as m says.
func initAll(ctx context.Context, m mode, devices []int, cfg *Config) ([]*Communicator, error) {
	const op = "InitAll"
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := loaded()
	if err != nil {
		return nil, err
	}
	if devices == nil {
		n, err := cuda.Count()
		if err != nil {
			return nil, fmt.Errorf("nccl: %s: counting devices: %w", op, err)
		}
		devices = make([]int, n)
		for i := range devices {
			devices[i] = i
		}
	}
	if len(devices) == 0 {
		return nil, argErr(op, "devices", "empty: need at least one device")
	}
	if cfg != nil && cfg.Device != nil {
		return nil, argErr(op, "Config.Device", "set: InitAll places rank i on devices[i]")
	}
	if err := checkDuplicates(op, devices, r); err != nil {
		return nil, err
	}
	ccfg, blocking, err := cfg.encode(op, r)
	if err != nil {
		return nil, err
	}
	ctxs := make([]uintptr, len(devices))
	for i, d := range devices {
		if ctxs[i], err = deviceContext(op, "Config.Device", d); err != nil {
			return nil, err
		}
	}
	id, err := NewUniqueID()
	if err != nil {
		return nil, err
	}
	comms := make([]*Communicator, len(devices))
	err = group(ctx, m, func() error { // the group's final wait is bounded by ctx too
		for i, d := range devices {
			cell := capi.NewCell()
			st := capi.CommInitRankConfig(ctxs[i], cell, len(devices), (*[128]byte)(&id), i, ccfg)
			ptr := cell.Load()
			cell.Free()
			if st.Code != 0 && Result(st.Code) != InProgress {
				return statusErr(op, "ncclCommInitRankConfig", st)
			}
			c := &Communicator{}
			c.adoptLocked(ptr, d, blocking)
			c.trace.hash, c.trace.name = hashID([]UniqueID{id}), cfg.commName()
			comms[i] = c
		}
		return nil
	})
	// The group's end waited for every rank (within ctx); a failure is
	// usually the same on every rank: say it once.
	if err != nil {
		for _, c := range comms {
			c.Abort()
		}
		return nil, fmt.Errorf("nccl: %s of %d ranks: %w", op, len(devices), joinDistinct(err))
	}
	return comms, nil
}

// checkDuplicates rejects a device list that repeats a device where NCCL
// would refuse (or, in 2.30.3-2.30.4, hang).
func checkDuplicates(op string, devices []int, r Release) error {
	sorted := slices.Clone(devices)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] != sorted[i-1] {
			continue
		}
		switch {
		case !has(r, versions.MultiRankGPU):
			return argErr(op, "devices", "device %d appears twice: NCCL %s allows one rank per GPU (several need NCCL %s and NCCL_MULTI_RANK_GPU_ENABLE=1)", sorted[i], r, Release(versions.MultiRankGPU.Since()))
		case os.Getenv("NCCL_MULTI_RANK_GPU_ENABLE") != "1":
			return argErr(op, "devices", "device %d appears twice: set NCCL_MULTI_RANK_GPU_ENABLE=1 to let ranks share a GPU", sorted[i])
		}
	}
	return nil
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

// identityLocked fills the cached rank and size (ncclCommCount,
// ncclCommUserRank, ncclCommCuDevice). It returns capi.Pending while NCCL is
// still creating the communicator.
func (c *Communicator) identityLocked(op string) (int32, error) {
	if c.identity {
		return 0, nil
	}
	n, st := capi.CommCount(c.ptr)
	if st.Code == capi.Pending {
		return capi.Pending, nil
	}
	if err := statusErr(op, "ncclCommCount", st); err != nil {
		return 0, err
	}
	rank, st := capi.CommUserRank(c.ptr)
	if err := statusErr(op, "ncclCommUserRank", st); err != nil {
		return 0, err
	}
	dev, st := capi.CommCuDevice(c.ptr)
	if err := statusErr(op, "ncclCommCuDevice", st); err != nil {
		return 0, err
	}
	c.nranks, c.rank, c.dev, c.identity = n, rank, dev, true
	return 0, nil
}

// ident returns the cached identity, querying NCCL the first time (waiting
// for a communicator still being created).
func (c *Communicator) ident(op string) (nranks, rank, dev int, err error) {
	for {
		nranks, rank, dev, code, err := c.tryIdent(op)
		if err != nil || code != capi.Pending {
			return nranks, rank, dev, err
		}
		if err := c.wait(context.Background(), op); err != nil {
			return 0, 0, 0, err
		}
	}
}

// tryIdent is one attempt of ident, with mu held: code is capi.Pending
// while NCCL is still creating the communicator.
func (c *Communicator) tryIdent(op string) (nranks, rank, dev int, code int32, err error) {
	if _, err := c.lockLive(op); err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.mu.Unlock()
	if code, err := c.identityLocked(op); err != nil || code == capi.Pending {
		return 0, 0, 0, code, err
	}
	return c.nranks, c.rank, c.dev, 0, nil
}

// NRanks is the number of ranks (ncclCommCount, cached). NCCL 2.3.5.
func (c *Communicator) NRanks() (int, error) {
	n, _, _, err := c.ident("get nranks")
	return n, err
}

// Rank is this rank's index in [0, NRanks) (ncclCommUserRank, cached).
// NCCL 2.3.5.
func (c *Communicator) Rank() (int, error) {
	_, r, _, err := c.ident("get rank")
	return r, err
}

// Device is the communicator's CUDA device (ncclCommCuDevice, cached).
// NCCL 2.3.5.
func (c *Communicator) Device() (cuda.Device, error) {
	_, _, d, err := c.ident("get device")
	return cuda.Device(d), err
}

// String reads "nccl.Communicator(rank 1/4, cuda:1, 0x7f...)" or
// "nccl.Communicator(null)". It never calls NCCL.
func (c *Communicator) String() string {
	if c == nil {
		return "nccl.Communicator(null)"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.ptr == 0 && c.life.pend != nil:
		return fmt.Sprintf("nccl.Communicator(being created by %s, cuda:%d)", c.life.pend.op, c.dev)
	case c.ptr == 0 && c.state != stateNull:
		return fmt.Sprintf("nccl.Communicator(null, %s)", c.state)
	case c.ptr == 0:
		return "nccl.Communicator(null)"
	case !c.identity:
		return fmt.Sprintf("nccl.Communicator(cuda:%d, %#x)", c.dev, c.ptr)
	}
	return fmt.Sprintf("nccl.Communicator(rank %d/%d, cuda:%d, %#x)", c.rank, c.nranks, c.dev, c.ptr)
}

// currentState is c's state (without resolving a pending child).
func (c *Communicator) currentState() commState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Finalize flushes the communicator's outstanding operations and tears down
// its connections (ncclCommFinalize), leaving Destroy with only local work.
// Collective. A no-op on a null communicator. NCCL 2.14.3.
func (c *Communicator) Finalize() error { return c.finalize(context.Background(), started) }

// FinalizeContext is Finalize (ncclCommFinalize, collective, NCCL 2.14.3)
// that completes before returning: for a non-blocking communicator, when ctx
// ends first the communicator is aborted.
func (c *Communicator) FinalizeContext(ctx context.Context) error { return c.finalize(ctx, completed) }

// finalize is ncclCommFinalize, finished as m says.
func (c *Communicator) finalize(ctx context.Context, m mode) error {
	if err := c.awaitPending(ctx, "Finalize"); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	if c.Handle() == 0 {
		st := c.currentState()
		if st == stateNull {
			return nil
		}
		return fmt.Errorf("nccl: Finalize: communicator already %s: %w", st, ErrClosed)
	}
	if err := c.notInGroup("Finalize", c.Handle()); err != nil {
		return err
	}
	return c.call(ctx, m, "Finalize", "ncclCommFinalize", takeLive, &trace.Event{Op: trace.Finalize}, func(ptr uintptr) (capi.Status, error) {
		switch {
		case c.finalized:
			return capi.Status{}, fmt.Errorf("nccl: Finalize: communicator already finalized: %w", ErrInvalidUsage)
		case c.revoked:
			return capi.Status{}, fmt.Errorf("nccl: Finalize: communicator revoked: NCCL allows no Finalize after Revoke (Destroy or Abort it): %w", ErrInvalidUsage)
		}
		st := capi.CommFinalize(ptr)
		if accepted(st) {
			c.finalized = true
		}
		return st, nil
	})
}

// Destroy closes the communicator's resources, finalizes it (waiting for
// its peers) and frees it (ncclCommFinalize, ncclCommDestroy). Collective
// among the ranks of one node unless Finalize was called. A no-op on a null
// communicator; after Destroy or Abort it returns an error wrapping
// [ErrClosed], also when another goroutine's Abort or Destroy released it
// first (of concurrent calls exactly one reports success). Inside a group,
// or while another goroutine's open group holds
// operations of the communicator, it returns an error wrapping
// [ErrInvalidUsage] and leaves the communicator allocated (its resources may
// already be closed, and it may be finalized): call Destroy again after
// that group. NCCL 2.3.5.
func (c *Communicator) Destroy() error { return c.DestroyContext(context.Background()) }

// DestroyContext is Destroy (ncclCommFinalize then ncclCommDestroy,
// collective within a node, NCCL 2.14.3) bounded by ctx: for a non-blocking
// communicator, if the peers do not finalize before ctx ends, it is aborted
// instead.
func (c *Communicator) DestroyContext(ctx context.Context) error {
	if c == nil {
		return nil
	}
	if err := c.awaitPending(ctx, "Destroy"); err != nil {
		return err
	}
	// One Destroy at a time: a concurrent one waits for it, then finds the
	// communicator closed (or, if the first was refused, destroys it).
	for {
		null, busy, err := c.claimDestroy()
		if null {
			return err
		}
		if busy == nil {
			break
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return fmt.Errorf("nccl: Destroy: waiting for another goroutine's Destroy: %w", ctx.Err())
		}
	}
	defer c.endDestroy()
	if err := c.notInGroup("Destroy", c.Handle()); err != nil {
		return err
	}
	// Let an operation in flight end first, so that resources close cleanly.
	if err := c.wait(ctx, "Destroy"); err != nil && c.Handle() == 0 {
		return err // ctx ended: aborted
	}
	var errs []error
	if err := c.closeResources(); err != nil {
		errs = append(errs, err)
	}
	var err error
	if !c.skipsFinalize() {
		err = c.finalize(ctx, completed)
		var refused *groupRefusal
		if errors.As(err, &refused) {
			// Refused before NCCL (another goroutine's group took the
			// communicator meanwhile): nothing was finalized or freed.
			return errors.Join(append(errs, err)...)
		}
	}
	if err == nil {
		err = c.wait(ctx, "Destroy") // a non-blocking communicator's finalize
	}
	if err != nil {
		if c.Handle() == 0 { // aborted because ctx ended
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, err)
	}
	if err := c.release("Destroy", "ncclCommDestroy", capi.CommDestroy, stateDestroyed, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// claimDestroy makes the calling goroutine the one destroying c, or
// returns busy, the closing channel of the Destroy under way. For a
// communicator without an NCCL pointer it reports null, with Destroy's
// answer (releaseNullLocked).
func (c *Communicator) claimDestroy() (null bool, busy chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == 0 {
		return true, nil, c.releaseNullLocked("Destroy")
	}
	if c.closing != nil {
		return false, c.closing, nil
	}
	c.closing = make(chan struct{})
	return false, nil, nil
}

// endDestroy ends the Destroy claimDestroy began, letting those waiting
// for it go on.
func (c *Communicator) endDestroy() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.closing)
	c.closing = nil
}

// skipsFinalize reports whether Destroy must not finalize c: it was
// finalized or revoked already, or it is orphaned (a thread ended inside a
// group holding its work), which can be neither finalized nor destroyed:
// release aborts it.
func (c *Communicator) skipsFinalize() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finalized || c.revoked || (c.ptr != 0 && capi.GroupOrphaned(c.ptr))
}

// AbortCause is Abort (ncclCommAbort, NCCL 2.4.2) that records why: every
// later call on the communicator returns a *[StateError] that wraps cause
// (errors.Is and errors.As reach it), so that a goroutine that did not see
// the abort learns its reason. A watchdog that gave up on an operation
// passes its timeout error. The cause is recorded only by the call that
// aborts the communicator (of concurrent AbortCause calls, the one that
// returns nil; the others return an error wrapping [ErrClosed]), and the
// first cause recorded stays.
func (c *Communicator) AbortCause(cause error) error { return c.abort(cause) }

// Abort closes the communicator's resources and frees it at once,
// cancelling its operations in flight (ncclCommAbort). Every active rank
// should abort too. It never waits for another goroutine's wait, only for a
// call that is inside NCCL (see [Communicator]). A no-op on a null
// communicator; after Destroy or Abort it returns an error wrapping
// [ErrClosed], also when another goroutine's Destroy or Abort released it
// during this call: of concurrent Destroy and Abort calls exactly one
// reports success. During a blocking [Init] (which NCCL gives no handle to) it
// returns an error wrapping [ErrInProgress], and the Init aborts the
// communicator as soon as NCCL returns it. Inside a group, or while
// another goroutine's group holds operations of the communicator (until
// that group's end returns), it returns an error wrapping [ErrInvalidUsage]:
// to be able to abort operations that may hang, make the communicator
// non-blocking, whose group end returns at once. When a goroutine exits
// inside a group ([GroupStart] without [GroupEnd]) and Go ends its thread, its
// communicators refuse new work (NCCL can never run what that group
// queued) and can be aborted; Go parks the main thread instead of ending
// it, so there the holds stay. Not collective in this process's view; NCCL asks every active
// rank to abort. NCCL 2.4.2.
func (c *Communicator) Abort() error { return c.abort(nil) }

// abort is Abort recording cause (nil: none) if this call is the one that
// aborts the communicator: the cause travels as an argument to release, so
// that a concurrent AbortCause cannot lend it its own.
func (c *Communicator) abort(cause error) error {
	if c == nil || c.abandonPending(cause) {
		return nil
	}
	if null, err := c.releaseNull("Abort"); null {
		return err
	}
	if err := c.notInGroup("Abort", c.Handle()); err != nil {
		return err
	}
	err := c.closeResources()
	return errors.Join(err, c.release("Abort", "ncclCommAbort", capi.CommAbort, stateAborted, cause))
}

// releaseNull is releaseNullLocked when c has no NCCL pointer: null
// reports whether it had none.
func (c *Communicator) releaseNull(op string) (null bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 {
		return false, nil
	}
	return true, c.releaseNullLocked(op)
}

// releaseNullLocked is what Destroy and Abort (op) do to a communicator
// without an NCCL pointer (mu held): nothing for the null communicator,
// ErrClosed once destroyed or aborted, and ErrInProgress during a blocking
// init, which NCCL gives no handle to: the init then aborts what NCCL
// returns.
func (c *Communicator) releaseNullLocked(op string) error {
	st, creating := c.state, c.creating
	if creating {
		c.abortReq = op
	}
	switch {
	case creating:
		return fmt.Errorf("nccl: %s: a blocking init of this communicator is inside NCCL, which cannot be interrupted: it will be aborted as soon as NCCL returns it: %w", op, ErrInProgress)
	case st == stateNull:
		return nil
	}
	return fmt.Errorf("nccl: %s: communicator already %s: %w", op, st, ErrClosed)
}

// notInGroup refuses to finalize or free c while a group is open on this
// thread (NCCL would defer the work to the group's end, after the binding
// freed what it writes) or while another thread's group holds operations
// of c (its end would use the freed communicator).
func (c *Communicator) notInGroup(op string, ptr uintptr) error {
	if capi.GroupDepth() > 0 {
		return &groupRefusal{fmt.Sprintf("nccl: %s: inside a group: NCCL would defer it to the group's end; call it after the group", op)}
	}
	if ptr != 0 && capi.GroupHeld(ptr) > 0 {
		return &groupRefusal{fmt.Sprintf("nccl: %s: the communicator has operations in a group another goroutine has not ended: end that group first", op)}
	}
	return nil
}

// release frees the NCCL communicator with f and makes c null; cause is
// recorded as the abort's reason when it ends aborted. Of concurrent
// releases exactly one succeeds: the others find c released and return
// an error wrapping ErrClosed.
func (c *Communicator) release(op, fn string, f func(uintptr) capi.Status, final commState, cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == 0 {
		return c.releasedLocked(op)
	}
	ptr := c.ptr
	// Checked again under mu, which every call that would add a group's
	// hold on c takes: no group can take c between this check and the free.
	if err := c.notInGroup(op, ptr); err != nil {
		return err
	}
	// Resources made after Destroy closed them (another goroutine) go now,
	// while the communicator they need is still there.
	var resErr error
	for i := len(c.resources) - 1; i >= 0; i-- {
		resErr = errors.Join(resErr, c.resources[i].closeLocked())
	}
	c.resources = nil
	broken := c.lifeBeforeReleaseLocked(op, ptr)
	// Before the free: once freed, another communicator may get the same
	// address (and its own records).
	if fn == "ncclCommDestroy" && capi.GroupOrphaned(ptr) {
		// Work NCCL can never run is queued on it: abort, do not destroy.
		f, fn, final = capi.CommAbort, "ncclCommAbort", stateAborted
	}
	// The flight recorder's last entry of the communicator: a local
	// operation, recorded before the call (a Destroy can wait in NCCL).
	if len(c.trace.host) > 0 { // lifecycle work that ended unseen: say so first
		c.asyncErrorLocked(ptr)
	}
	ev := trace.Event{Op: trace.Abort}
	if fn == "ncclCommDestroy" {
		ev.Op = trace.Destroy
	}
	ref := c.recordLocked(&ev)
	registry.Delete(ptr)
	capi.GroupForget(ptr)
	var st capi.Status
	for {
		st = f(ptr)
		if st.Code != capi.Pending {
			break
		}
		// Destroy of a communicator whose last operation is still running:
		// NCCL needs it ready first. Abort instead of waiting here, under mu.
		f, fn, final = capi.CommAbort, "ncclCommAbort", stateAborted
	}
	var abortErr error
	if st.Code != 0 && fn == "ncclCommDestroy" {
		// NCCL refuses to destroy a broken communicator (its async error
		// is set) and leaves it allocated: abort it, which frees it.
		final = stateAborted
		abortErr = statusErr(op, "ncclCommAbort", capi.CommAbort(ptr))
	}
	c.completeLocked(ref)
	c.trace.host = nil
	c.lifeAfterReleaseLocked(final, broken)
	c.closeTraceLocked()
	if final == stateAborted && c.abortCause == nil {
		c.abortCause = cause // AbortCause's reason
	}
	c.ptr, c.state, c.resources = 0, final, nil
	if c.nbCounted {
		capi.NonBlockingAdd(-1)
		c.nbCounted = false
	}
	if c.hasClean {
		c.cleanup.Stop()
		c.hasClean = false
	}
	return errors.Join(resErr, statusErr(op, fn, st), abortErr)
}

// releasedLocked is the error of a Destroy or Abort (op) that found c
// released by another goroutine's (mu held).
func (c *Communicator) releasedLocked(op string) error {
	if c.state == stateNull {
		return fmt.Errorf("nccl: %s: communicator released by another goroutine meanwhile: %w", op, ErrClosed)
	}
	return fmt.Errorf("nccl: %s: communicator already %s (by another goroutine meanwhile): %w", op, c.state, ErrClosed)
}

// closeResources closes every tracked resource, newest first.
func (c *Communicator) closeResources() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.resources) - 1; i >= 0; i-- {
		if err := c.resources[i].closeLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	c.resources = nil
	return errors.Join(errs...)
}

// trackLocked adds a resource to be closed by Destroy and Abort (mu held).
func (c *Communicator) trackLocked(r resource) { c.resources = append(c.resources, r) }

// untrackLocked forgets a resource closed on its own (mu held).
func (c *Communicator) untrackLocked(r resource) {
	if i := slices.Index(c.resources, r); i >= 0 {
		c.resources = slices.Delete(c.resources, i, i+1)
	}
}

package nccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Init creates this rank's communicator among nranks ranks
// (ncclCommInitRankConfig), on device cfg.Device (default 0). Every rank
// calls it with the same id and nranks and its own rank. Collective: it
// returns once all ranks have joined (for a blocking communicator). NCCL 2.14.3.
func Init(nranks, rank int, id UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(context.Background(), started, "Init", false, nranks, rank, []UniqueID{id}, cfg)
}

// InitContext is [Init] (ncclCommInitRankConfig, collective, NCCL 2.14.3)
// that completes before returning and is bounded by ctx: for a non-blocking
// communicator ([Config.Blocking] false), if ctx ends before all ranks have
// joined, the communicator is aborted and the error matches both ctx.Err()
// and [ErrInProgress]. A blocking init waits inside NCCL, where ctx cannot
// reach it: ctx is checked before.
func InitContext(ctx context.Context, nranks, rank int, id UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(ctx, completed, "Init", false, nranks, rank, []UniqueID{id}, cfg)
}

// newComm is the [Init] family's constructor.
func newComm(ctx context.Context, m mode, op string, scalable bool, nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	c := new(Communicator)
	if err := c.initialize(ctx, m, op, scalable, nranks, rank, ids, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// InitScalable is [Init] with several ids spread over the ranks
// (ncclCommInitRankScalable), for very large jobs: ids[i] was created by one
// rank each, and every rank passes all of them. Collective. NCCL 2.23.4.
func InitScalable(nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(context.Background(), started, "InitScalable", true, nranks, rank, ids, cfg)
}

// InitScalableContext is [InitScalable] (ncclCommInitRankScalable, collective,
// NCCL 2.23.4) bounded by ctx as [InitContext] is.
func InitScalableContext(ctx context.Context, nranks, rank int, ids []UniqueID, cfg *Config) (*Communicator, error) {
	return newComm(ctx, completed, "InitScalable", true, nranks, rank, ids, cfg)
}

// Initialize initializes a null communicator in place
// (ncclCommInitRankConfig; see [Init]). It fails if c is already initialized.
// Collective. NCCL 2.14.3.
func (c *Communicator) Initialize(nranks, rank int, id UniqueID, cfg *Config) error {
	return c.initialize(context.Background(), started, "Initialize", false, nranks, rank, []UniqueID{id}, cfg)
}

// InitializeContext is Initialize (ncclCommInitRankConfig, collective, NCCL
// 2.14.3) bounded by ctx as [InitContext] is.
func (c *Communicator) InitializeContext(ctx context.Context, nranks, rank int, id UniqueID, cfg *Config) error {
	return c.initialize(ctx, completed, "Initialize", false, nranks, rank, []UniqueID{id}, cfg)
}

// initialize is the [Init] family, finished as m says: ncclCommInitRankConfig,
// or ncclCommInitRankScalable when scalable ([InitScalable], even with one
// id). op names the exported function or method in errors.
func (c *Communicator) initialize(ctx context.Context, m mode, op string, scalable bool, nranks, rank int, ids []UniqueID, cfg *Config) error {
	if c == nil {
		return argErr(op, "communicator", "nil *Communicator")
	}
	r, err := loadedCtx(ctx)
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
	if err := c.startCreating(op); err != nil {
		return err
	}
	defer c.endCreating()
	cell := capi.NewCell()
	defer cell.Free()
	var st capi.Status
	fn := "ncclCommInitRankConfig"
	if !scalable {
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
	by, err := c.adoptCreated(op, ptr, dev, blocking, hashID(ids), cfg.commName())
	if err != nil {
		return err
	}
	if by != "" {
		return errors.Join(fmt.Errorf("nccl: %s: aborted (%s was called during the init): %w", op, by, ErrClosed), c.Abort())
	}
	return c.settle(ctx, m, op)
}

// startCreating moves c to creating for an init, which runs without mu;
// c must be null, destroyed or aborted (state.go).
func (c *Communicator) startCreating(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moveLocked(op, evInitialize)
}

// endCreating ends what startCreating began, once the init has returned:
// an init that adopted nothing leaves c null.
func (c *Communicator) endCreating() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateCreating {
		c.moveLocked("Initialize", evFailed)
	}
	c.abortReq = ""
}

// adoptCreated makes c the owner of the NCCL communicator its init
// created, with its flight recorder's identity (record.go). It returns the
// call ("Abort" or "Destroy") that asked to abort c during the init, if any.
func (c *Communicator) adoptCreated(op string, ptr uintptr, dev int, blocking bool, hash uint64, name string) (abortReq string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.adoptLocked(op, ptr, dev, blocking); err != nil {
		return "", err
	}
	c.trace.hash, c.trace.name = hash, name
	abortReq, c.abortReq = c.abortReq, ""
	return abortReq, nil
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

// adoptLocked makes c the owner of a new NCCL communicator (mu held): the
// lifecycle's created event, from creating (Initialize), pending (a Split
// child) or null ([InitAll], Grow). Where the state refuses, ptr is aborted
// and the refusal returned.
func (c *Communicator) adoptLocked(op string, ptr uintptr, dev int, blocking bool) error {
	if err := c.moveLocked(op, evCreated); err != nil {
		capi.CommAbort(ptr)
		return err
	}
	c.ptr, c.dev, c.blocking = ptr, dev, blocking
	if nb := !blocking || os.Getenv("NCCL_COMM_BLOCKING") == "0"; nb != c.nbCounted {
		if nb {
			capi.NonBlockingAdd(1)
		} else {
			capi.NonBlockingAdd(-1)
		}
		c.nbCounted = nb
	}
	c.identity, c.props, c.propsErr, c.resources = false, nil, nil, nil
	c.abortCause = nil // a new NCCL communicator: the last one's abort is not its
	register(c)
	c.watchLeak()
	return nil
}

// deviceContext is the primary context of device dev, or an [ArgError] on
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
// forever. Destroy the communicators together with [DestroyAll] when done:
// a loop of [Communicator.Destroy] from one goroutine can deadlock on
// releases whose finalize waits for the other ranks (seen on NCCL 2.31.0a16
// with two ranks of one process on one GPU), since the first Destroy waits
// for ranks that only a later one finalizes.
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

// initAll is [InitAll], finished as m says.
func initAll(ctx context.Context, m mode, devices []int, cfg *Config) ([]*Communicator, error) {
	const op = "InitAll"
	r, err := loadedCtx(ctx)
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
			if err := c.adoptLocked(op, ptr, d, blocking); err != nil {
				return err
			}
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

package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// DefaultRanksPerRoot is how many ranks share one unique id, and so one
// bootstrap root, in NCCL's scalable init: jobs of more ranks create one id
// per group of this many ranks (torch's TORCH_NCCL_RANKS_PER_ROOT default).
const DefaultRanksPerRoot = 128

// Options configure [Open] and [Init]. The zero value (or nil) reads the job
// from the environment and picks everything else.
type Options struct {
	// Job is the job; nil reads it with [FromEnv].
	Job *Job
	// Store is the store to rendezvous through; nil: the job's. Rank 0
	// hosts one at MasterAddr:MasterPort, unless the launcher hosts one
	// ([Job.StoreAddr]: nccl4go run, torchrun's agent store); a job of one
	// rank uses an in-memory store. A Store given here is closed by Close.
	Store Store
	// Name separates the keys of independent rendezvous in one store;
	// default "nccl4go". Every rank must use the same.
	Name string
	// Device is the CUDA device of this rank; nil: the local rank modulo
	// the number of visible devices ([cuda.Count], which honours
	// CUDA_VISIBLE_DEVICES), so that a launcher that shows each rank one
	// GPU, or all of them, both work.
	Device *int
	// Config is the base configuration of the communicators; [Init] copies
	// it and fills Device. A nil Config.Blocking makes the communicator
	// non-blocking, so that the context bounds the init (a blocking init
	// waits inside NCCL, where no context reaches); Split it into a blocking
	// one for a hot loop.
	Config *nccl.Config
	// RanksPerRoot is the number of ranks per unique id: a job of more
	// ranks uses NCCL's scalable init (ncclCommInitRankScalable, NCCL
	// 2.23.4) with one id per group, created by the group's first rank, so
	// that no single root bootstraps thousands of ranks. 0:
	// [DefaultRanksPerRoot]; negative: always one id. Every rank must use the
	// same.
	RanksPerRoot int
	// Logf, when set, receives progress messages.
	Logf func(format string, args ...any)
	// Linger is how long Close, on the rank that hosts the store, waits for
	// the other ranks to close their sessions before stopping the server
	// (default 10s): a rank that returns early, with an error the others
	// are still finding out, must not pull the store from under them.
	Linger time.Duration
}

// Session is one process's membership in a job's rendezvous: the job, the
// store, and, on rank 0 when no launcher hosts a store, the store's server.
// Create communicators with Communicator; every rank must call it the same
// number of times in the same order (each call uses fresh keys). Safe for
// concurrent use, though concurrent Communicator calls must then happen in
// the same order on every rank.
type Session struct {
	// Job is the job the session belongs to.
	Job *Job

	store  Store
	server *Server
	name   string
	opts   Options

	mu     sync.Mutex
	gen    int
	closed bool
}

// generations counts the sessions of each store namespace in this process,
// so that a new session on a store that outlives it (a launcher's) uses
// fresh keys.
var generations struct {
	sync.Mutex
	n map[string]int
}

func nextGeneration(ns string) int {
	generations.Lock()
	defer generations.Unlock()
	if generations.n == nil {
		generations.n = make(map[string]int)
	}
	g := generations.n[ns]
	generations.n[ns] = g + 1
	return g
}

// Open joins the job's rendezvous: it reads the job (unless opts.Job is
// set) and connects to its store, or hosts it on rank 0 when nobody else
// does. Every wait is bounded by ctx.
func Open(ctx context.Context, opts *Options) (*Session, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	job := o.Job
	if job == nil {
		var err error
		if job, err = FromEnv(); err != nil {
			return nil, err
		}
	}
	if job.WorldSize < 1 || job.Rank < 0 || job.Rank >= job.WorldSize {
		return nil, fmt.Errorf("rendezvous: rank %d of a job of %d ranks", job.Rank, job.WorldSize)
	}
	name := o.Name
	if name == "" {
		name = "nccl4go"
	}
	s := &Session{Job: job, name: name, opts: o, store: o.Store}
	if s.store == nil {
		if err := s.connect(ctx); err != nil {
			return nil, err
		}
	}
	if job.StorePrefix != "" {
		s.store = WithPrefix(s.store, job.StorePrefix)
	}
	// A store that outlives the session (a launcher's, torchrun's) may have
	// seen earlier sessions with this name: take the next generation.
	// (Keyed by rank too, for jobs whose ranks are goroutines of one process.)
	s.name = name + "/" + strconv.Itoa(nextGeneration(fmt.Sprintf("%s|%s|%s|%d", job.StoreAddr, job.StorePrefix, name, job.Rank)))
	return s, nil
}

// connect opens the job's store.
func (s *Session) connect(ctx context.Context) error {
	j := s.Job
	switch {
	case j.StoreAddr != "":
		st, err := Dial(ctx, j.StoreAddr, s.dialOptions(ctx))
		if err != nil {
			return fmt.Errorf("rendezvous: rank %d: connecting to the job's store: %w", j.Rank, err)
		}
		s.store = st
	case j.WorldSize == 1:
		s.store = NewMemStore()
	default:
		addr := net.JoinHostPort(j.MasterAddr, strconv.Itoa(j.MasterPort))
		if j.Rank == 0 {
			srv, err := Listen(net.JoinHostPort("", strconv.Itoa(j.MasterPort)), &ServerOptions{Secret: j.StoreSecret})
			if err != nil {
				return fmt.Errorf("rendezvous: rank 0 hosts the store: %w (is another job using port %d? set MASTER_PORT)",
					err, j.MasterPort)
			}
			s.server = srv
			s.store = srv.Local() // the server's own table, no connection to itself
			break
		}
		st, err := Dial(ctx, addr, s.dialOptions(ctx))
		if err != nil {
			return fmt.Errorf("rendezvous: rank %d: connecting to the store rank 0 hosts: %w", j.Rank, err)
		}
		s.store = st
	}
	if s.opts.Logf != nil {
		s.opts.Logf("rendezvous: %v", j)
	}
	return nil
}

func (s *Session) dialOptions(ctx context.Context) *DialOptions {
	o := &DialOptions{Secret: s.Job.StoreSecret}
	if d, ok := ctx.Deadline(); ok {
		o.Timeout = time.Until(d)
	}
	return o
}

// Store is the session's store (with the job's prefix), for the program's
// own keys. Keys under the session's Name are the session's.
func (s *Session) Store() Store { return s.store }

// Close closes the store client and, on the rank that hosts it, the store
// server, once every rank has closed its session or [Options.Linger] has
// passed. Idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.leave()
	err := s.store.Close()
	if s.server != nil {
		err = errors.Join(err, s.server.Close())
	}
	return err
}

// leave tells the store this rank is done with it; the rank hosting the
// server waits for every rank to say so (within Linger).
func (s *Session) leave() {
	if s.Job.WorldSize == 1 {
		return
	}
	linger := s.opts.Linger
	if linger <= 0 {
		linger = 10 * time.Second
	}
	if s.server == nil {
		linger = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), linger)
	defer cancel()
	st := WithPrefix(s.store, s.name)
	n, err := st.Add(ctx, keyDone, 1)
	if err != nil {
		return
	}
	if n == int64(s.Job.WorldSize) {
		st.Set(ctx, keyDone+"/all", []byte{markOK}) //nolint:errcheck // best effort
	}
	if s.server != nil {
		st.Wait(ctx, keyDone+"/all") //nolint:errcheck // a rank that crashed never says done
	}
}

// next returns the namespace of the next communicator or barrier.
func (s *Session) next(kind string) (Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("rendezvous: session: %w", ErrClosed)
	}
	g := s.gen
	s.gen++
	return WithPrefix(s.store, s.name+"/"+kind+strconv.Itoa(g)), nil
}

// Device returns the CUDA device this rank uses: [Options.Device], else the
// local rank modulo the number of visible devices.
func (s *Session) Device() (int, error) {
	if s.opts.Device != nil {
		return *s.opts.Device, nil
	}
	return deviceFor(s.Job.LocalRank)
}

// deviceFor is the device of a local rank: localRank modulo the number of
// visible devices (CUDA_VISIBLE_DEVICES is honoured by the driver). With
// one visible device (a launcher that binds each rank to a GPU) it is 0.
func deviceFor(localRank int) (int, error) {
	n, err := cuda.Count()
	if err != nil {
		return 0, fmt.Errorf("rendezvous: local rank %d: counting the GPUs: %w", localRank, err)
	}
	if n < 1 {
		return 0, fmt.Errorf("rendezvous: local rank %d: no visible GPU (CUDA_VISIBLE_DEVICES=%q)", localRank,
			os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	return localRank % n, nil
}

// groups is the number of unique ids for n ranks.
func (s *Session) groups() int {
	per := s.opts.RanksPerRoot
	if per == 0 {
		per = DefaultRanksPerRoot
	}
	n := s.Job.WorldSize
	if per < 0 || n <= per {
		return 1
	}
	if _, err := nccl.Version(); err == nil && !capi.Present(capi.SymCommInitRankScalable) {
		return 1 // no ncclCommInitRankScalable
	}
	return (n + per - 1) / per
}

// Communicator creates a communicator over every rank of the job
// (collective): rank 0 (and, for large jobs, the first rank of each group)
// creates the unique id and publishes it in the store, the others wait for
// it, and all call NCCL's init, each wait bounded by ctx.
//
// When a rank never arrives, every rank that did returns, before ctx's
// deadline, a *[MissingError] naming the missing ranks. When a rank fails
// (no GPU, NCCL's init fails), it writes its error to the store and the
// others stop waiting with a *[RankError] carrying it instead of timing out.
func (s *Session) Communicator(ctx context.Context, cfg *nccl.Config) (*nccl.Communicator, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ns, err := s.next("comm")
	if err != nil {
		return nil, err
	}
	j := s.Job
	ngroups := s.groups()
	host, _ := os.Hostname()
	x := &exchange{
		store: ns, rank: j.Rank, nranks: j.WorldSize, ngroups: ngroups,
		info: host + ":" + strconv.Itoa(os.Getpid()), logf: s.opts.Logf,
		newID: func() ([]byte, error) {
			id, err := nccl.NewUniqueID()
			if err != nil {
				return nil, err
			}
			return id.MarshalBinary()
		},
	}
	c := nccl.Config{}
	if s.opts.Config != nil {
		c = *s.opts.Config
	}
	if cfg != nil {
		c = *cfg
	}
	if c.Device == nil {
		dev, err := s.Device()
		if err != nil {
			x.failEarly(ctx, err)
			return nil, err
		}
		c.Device = &dev
	}
	if c.Blocking == nil {
		c.Blocking = nccl.Ptr(false)
	}
	blobs, err := x.run(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]nccl.UniqueID, len(blobs))
	for i, b := range blobs {
		if err := ids[i].UnmarshalBinary(b); err != nil {
			return nil, err
		}
	}
	return s.create(ctx, ns, ids, &c)
}

// create calls NCCL's init while watching the store for another rank's
// failure.
func (s *Session) create(ctx context.Context, ns Store, ids []nccl.UniqueID, cfg *nccl.Config) (*nccl.Communicator, error) {
	j := s.Job
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchAbort(wctx, ns, j.WorldSize, cancel)
	}()
	var comm *nccl.Communicator
	var err error
	if len(ids) == 1 {
		comm, err = nccl.InitContext(wctx, j.WorldSize, j.Rank, ids[0], cfg)
	} else {
		comm, err = nccl.InitScalableContext(wctx, j.WorldSize, j.Rank, ids, cfg)
	}
	cause := context.Cause(wctx)
	cancel(nil)
	<-watched
	if err == nil {
		return comm, nil
	}
	var peer *RankError
	if errors.As(cause, &peer) && peer.Rank != j.Rank {
		return nil, fmt.Errorf("rendezvous: rank %d: creating the communicator stopped, %w (own error: %v)", j.Rank, peer, err)
	}
	err = fmt.Errorf("rendezvous: rank %d: creating the communicator of %d ranks on device %d: %w", j.Rank, j.WorldSize,
		*cfg.Device, err)
	pctx, pcancel := after(ctx)
	defer pcancel()
	ns.CompareSet(pctx, keyAbort, nil, encodeFailure(j.Rank, err)) //nolint:errcheck // best effort
	return nil, err
}

// watchAbort polls the store for a rank's failure until ctx ends, and
// cancels with it. The interval grows with the job so that the store sees
// about the same load whatever the size (about 20000 checks a second at
// 4096 ranks).
func watchAbort(ctx context.Context, st Store, nranks int, cancel context.CancelCauseFunc) {
	interval := max(50*time.Millisecond, time.Duration(nranks)*50*time.Microsecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := st.Check(ctx, keyAbort)
		if err != nil || !ok {
			continue // a store that went away: NCCL's init or ctx ends the wait
		}
		v, err := st.Get(ctx, keyAbort)
		if err == nil && len(v) > 0 && v[0] == markFailed {
			cancel(decodeFailure(v))
			return
		}
	}
}

// Barrier waits until every rank has called it (collective), or ctx ends.
func (s *Session) Barrier(ctx context.Context) error {
	ns, err := s.next("barrier")
	if err != nil {
		return err
	}
	return barrier(ctx, ns, s.Job.WorldSize)
}

func barrier(ctx context.Context, st Store, n int) error {
	c, err := st.Add(ctx, "arrived", 1)
	if err != nil {
		return fmt.Errorf("rendezvous: barrier: %w", err)
	}
	if c == int64(n) {
		if err := st.Set(ctx, "all", []byte{markOK}); err != nil {
			return fmt.Errorf("rendezvous: barrier: %w", err)
		}
	}
	if err := st.Wait(ctx, "all"); err != nil {
		if ctx.Err() != nil {
			dctx, cancel := after(ctx)
			defer cancel()
			if got, err2 := st.Add(dctx, "arrived", 0); err2 == nil {
				return fmt.Errorf("rendezvous: barrier: %d of %d ranks arrived: %w", got, n, err)
			}
		}
		return fmt.Errorf("rendezvous: barrier: %w", err)
	}
	return nil
}

// AllGather gives every rank every rank's value (collective): the result
// is indexed by rank. Each rank reads every value: meant for small values
// and jobs of up to a few thousand ranks.
func (s *Session) AllGather(ctx context.Context, value []byte) ([][]byte, error) {
	ns, err := s.next("allgather")
	if err != nil {
		return nil, err
	}
	return allGather(ctx, ns, s.Job.Rank, s.Job.WorldSize, value)
}

func allGather(ctx context.Context, st Store, rank, n int, value []byte) ([][]byte, error) {
	if err := st.Set(ctx, strconv.Itoa(rank), value); err != nil {
		return nil, fmt.Errorf("rendezvous: all-gather: %w", err)
	}
	keys := make([]string, n)
	for r := range keys {
		keys[r] = strconv.Itoa(r)
	}
	wctx, cancel := margin(ctx, rank)
	defer cancel()
	if err := st.Wait(wctx, keys...); err != nil {
		if ctx.Err() == nil && wctx.Err() == nil {
			return nil, fmt.Errorf("rendezvous: all-gather: %w", err)
		}
		x := &exchange{store: st, rank: rank, nranks: n}
		dctx, dcancel := after(ctx)
		defer dcancel()
		missing, err2 := x.missing(dctx, "", n, func(i int) int { return i })
		if err2 != nil || len(missing) == 0 {
			return nil, fmt.Errorf("rendezvous: all-gather: %w", errors.Join(err, err2))
		}
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return nil, &MissingError{Missing: missing, WorldSize: n, What: "joined the all-gather", Err: cause}
	}
	out := make([][]byte, n)
	for r := range out {
		v, err := st.Get(ctx, keys[r])
		if err != nil {
			return nil, fmt.Errorf("rendezvous: all-gather: reading rank %d's value: %w", r, err)
		}
		out[r] = v
	}
	return out, nil
}

// Init creates a communicator over the job in one call: [Open], then
// Communicator, then Close once every rank is done with the store (so that
// rank 0, when it hosts the store, serves it until the last rank has read
// the ids). It returns the job too.
func Init(ctx context.Context, opts *Options) (*nccl.Communicator, *Job, error) {
	s, err := Open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close() // on the rank hosting the store: once every rank has closed
	comm, err := s.Communicator(ctx, nil)
	if err != nil {
		return nil, s.Job, err
	}
	return comm, s.Job, nil
}

package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/rendezvous"
)

// World is the ranks one process drives, and its place among the
// processes of the job. All ranks of all processes form one communicator.
type World struct {
	// Comms are this process's communicators, in rank order (one per GPU
	// it drives).
	Comms []*nccl.Communicator
	// Proc and NProcs place the process among the job's processes (0 and 1
	// for a single process). Only process 0 reports.
	Proc, NProcs int
	// Group is the group number printed in the device lines (0).
	Group int
	// Host, when set, is how the processes meet on the host: the engine's
	// barriers (-z 1 included) and its reductions of times and error
	// counts go through it and make no NCCL call, as nccl-tests' go
	// through MPI. [JobWorld] sets it to the job's rendezvous session. When
	// nil and NProcs > 1, they go through the communicators (a small NCCL
	// operation each, on streams of their own).
	Host HostChannel
	// InitMemory is the GPU memory the communicators' creation took (the
	// most on any of the process's GPUs; [LocalWorld] and [JobWorld] measure
	// it), for -M.
	InitMemory int64
	owned      bool
	session    *rendezvous.Session
}

// HostChannel is a host-only channel between the processes of a job;
// [*rendezvous.Session] is one. Both calls are collective over the
// processes (one call per process, in the same order everywhere), and
// AllGather's result is indexed by [World.Proc].
type HostChannel interface {
	Barrier(ctx context.Context) error
	AllGather(ctx context.Context, value []byte) ([][]byte, error)
}

// Close destroys the communicators [LocalWorld] created, together
// ([nccl.DestroyAll]: one by one from one goroutine they can deadlock where
// NCCL's finalize waits for the other ranks); it does nothing for a [World]
// built by hand.
func (w *World) Close() error {
	if w == nil || !w.owned {
		return nil
	}
	var errs []error
	errs = append(errs, nccl.DestroyAll(w.Comms...))
	if w.session != nil {
		errs = append(errs, w.session.Close())
	}
	w.owned = false
	return errors.Join(errs...)
}

// rankState is one local rank's resources.
type rankState struct {
	comm   *nccl.Communicator
	rank   int
	dev    cuda.Device
	stream cuda.Stream
	owned  bool // stream made here
	// send and recv are the buffers of the current type: the allocations
	// plus -u elements.
	send, recv uintptr
	// sendAlloc and recvAlloc are the allocations (ncclMemAlloc).
	sendAlloc, recvAlloc uintptr
	// sendBuf and recvBuf cover the whole allocations: each operation's
	// buffers are narrowed from them, so the binding checks the memory
	// against the driver once per run, not once per call (sub).
	sendBuf, recvBuf nccl.Buffer
	// registered are the buffers' registrations (-R).
	registered []io.Closer
}

// bench is one run.
type bench struct {
	ctx    context.Context
	opts   Options
	coll   *collective
	world  *World
	comms  []*nccl.Communicator // this thread's share of world.Comms
	nranks int
	ranks  []*rankState
	coord  coordinator
	host   []byte // staging for data checks, maxBytes long
	maxB   uint64 // the buffers' size
	// memBefore and memFree are the free GPU memory (-M) before the
	// buffers and after them.
	memBefore, memFree uint64

	// state of the current size
	dt      dataType
	op      redOp
	root    int
	cnt     counts
	elt     uint64
	total   uint64           // bytes one operation spans: the larger buffer
	steps   uint64           // operations that fit in the buffers one after another
	wait    waitState        // syncStreams' arrays, one entry per rank
	keepOps []*nccl.CustomOp // PreMulSum operators captured into a graph
	keep    bool

	bwSum   float64
	bwCount int
	errors  int
	rep     uint64 // data-check repetitions, the seed of each
}

// RunError is a failure of the benchmark itself (not a wrong result,
// which the report counts).
type RunError struct {
	Op  string // what was being done, e.g. "all_reduce 1048576 bytes float sum"
	Err error
}

// Error reads "perf: <op>: <err>".
func (e *RunError) Error() string { return "perf: " + e.Op + ": " + e.Err.Error() }

// Unwrap is the cause.
func (e *RunError) Unwrap() error { return e.Err }

// ErrTimeout: a wait for the GPU exceeded [Options.Timeout] (-T); the
// communicators were aborted.
var ErrTimeout = errors.New("perf: test timeout")

// Run runs the benchmark of opts on world and reports to rep (only on
// process 0; rep may be nil). It returns the report on every process. A
// wrong result is not an error: [Report.Errors] counts it. The benchmark
// locks its goroutine to an OS thread while it runs; with [Options.Threads]
// above 1, each thread's goroutine drives its share of world.Comms on an
// OS thread of its own, and the first thread reports.
func Run(ctx context.Context, opts Options, world *World, rep Reporter) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if world == nil || len(world.Comms) == 0 {
		return nil, &OptionError{"world", "", "no communicator"}
	}
	if rep == nil || world.Proc != 0 {
		rep = Reporters()
	}
	if opts.Threads > 1 {
		return runThreads(ctx, opts, world, rep)
	}
	return run(ctx, opts, world, world.Comms, nil, rep)
}

// run is one thread's benchmark over comms; coord, when set, is its
// coordination with the other threads and processes.
func run(ctx context.Context, opts Options, world *World, comms []*nccl.Communicator, coord coordinator, rep Reporter) (*Report, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	coll, _ := lookupTest(opts.Test)
	b := &bench{ctx: ctx, opts: opts, coll: coll, world: world, comms: comms, coord: coord}
	defer b.free()
	h, err := b.setup()
	if err != nil {
		return nil, err
	}
	report := &Report{Header: *h, Test: opts.Test, Iters: opts.Iters, Start: time.Now()}
	rep.Begin(&report.Header)
	if err := b.runAll(report, rep); err != nil {
		return report, err
	}
	errs, err := b.coord.reduce(float64(b.errors), reduceSum)
	if err != nil {
		return report, &RunError{"summing errors", err}
	}
	report.Errors = int(errs)
	report.AvgBusBW = b.bwSum / float64(b.bwCount)
	if b.bwCount == 0 {
		report.AvgBusBW = math.Copysign(math.NaN(), -1) // 0.0/0.0, as C computes it
	}
	if opts.MinBusBW > 0 && !(report.AvgBusBW >= opts.MinBusBW*0.9) {
		report.BWFailed = true
	}
	if opts.MemoryReport {
		free, err := b.freeMemory()
		if err != nil {
			return report, err
		}
		report.Memory = &MemoryReport{Init: world.InitMemory, Buffers: report.BufferMemory, Collective: int64(b.memFree) - int64(free)}
	}
	report.LastError, _ = nccl.LastError()
	report.End = time.Now()
	rep.End(report)
	return report, nil
}

// setup finds the ranks, sizes the buffers and allocates them.
func (b *bench) setup() (*Header, error) {
	o := &b.opts
	first := b.comms[0]
	n, err := first.NRanks()
	if err != nil {
		return nil, &RunError{"communicator", err}
	}
	b.nranks = n
	for _, c := range b.comms {
		r, err := c.Rank()
		if err != nil {
			return nil, &RunError{"communicator", err}
		}
		d, err := c.Device()
		if err != nil {
			return nil, &RunError{"communicator", err}
		}
		b.ranks = append(b.ranks, &rankState{comm: c, rank: r, dev: d})
	}
	// One process needs no coordination (nccl-tests' barriers and
	// reductions span its threads, of which there is one); several
	// coordinate through NCCL itself, as nccl-tests does through MPI.
	switch {
	case b.coord != nil: // a thread's, made by runThreads
	case b.world.NProcs <= 1:
		b.coord = localCoordinator{}
	case b.world.Host != nil:
		b.coord = &hostCoordinator{ctx: b.ctx, host: b.world.Host, nprocs: b.world.NProcs}
	default:
		if b.coord, err = newNCCLCoordinator(b); err != nil {
			return nil, err
		}
	}
	rel, err := nccl.Version()
	if err != nil {
		return nil, &RunError{"NCCL version", err}
	}
	h := &Header{Program: b.coll.program, Options: *o, NRanks: n, LocalRanks: len(b.ranks), NCCLVersion: int(rel), ABIVersion: int(nccl.ABIRelease)}
	if h.Devices, err = b.devices(); err != nil {
		return nil, err
	}
	// Leave room as nccl-tests does: a GiB per 16 GiB (at most 4) plus one,
	// then send, recv and (when checking) expected buffers.
	maxMem := uint64(math.MaxUint64)
	for _, r := range b.ranks {
		m, err := r.dev.TotalMemory()
		if err != nil {
			return nil, &RunError{"device memory", err}
		}
		maxMem = min(maxMem, m)
	}
	if m, err := b.coord.reduce(float64(maxMem), reduceMin); err == nil {
		maxMem = uint64(m)
	}
	const gib = 1 << 30
	reserve := min((maxMem+16*gib-1)/(16*gib)*gib, 4*gib)
	if maxMem > reserve+gib {
		div := uint64(2)
		if o.Check > 0 {
			div = 3
		}
		if memMax := (maxMem - reserve - gib) / div; o.MaxBytes > memMax {
			o.MaxBytes = memMax
			o.MinBytes = min(o.MinBytes, o.MaxBytes)
			h.ReducedMaxBytes = memMax
		}
	}
	b.maxB = max(o.MaxBytes, 64)
	if b.memBefore, err = b.freeMemory(); err != nil {
		return nil, err
	}
	b.host = make([]byte, 0)
	for _, r := range b.ranks {
		if o.StreamNull {
			r.stream = r.dev.DefaultStream()
		} else {
			if r.stream, err = r.dev.NewStream(); err != nil {
				return nil, &RunError{"stream", err}
			}
			r.owned = true
		}
		// -u pads the allocations with 8 bytes (the largest type) per
		// element of misalignment, as nccl-tests does.
		size := b.maxB + 8*uint64(o.Unaligned)
		if r.sendAlloc, err = nccl.MemAllocRaw(r.dev, size); err != nil {
			return nil, &RunError{fmt.Sprintf("allocating %d bytes on %s", size, r.dev), err}
		}
		if r.recvAlloc, err = nccl.MemAllocRaw(r.dev, size); err != nil {
			return nil, &RunError{fmt.Sprintf("allocating %d bytes on %s", size, r.dev), err}
		}
		r.send, r.recv = r.sendAlloc, r.recvAlloc
		r.sendBuf = nccl.RawBuffer(r.sendAlloc, int(size), nccl.Uint8, int(r.dev))
		r.recvBuf = nccl.RawBuffer(r.recvAlloc, int(size), nccl.Uint8, int(r.dev))
	}
	if err := b.register(); err != nil {
		return nil, err
	}
	if err := b.wait.init(b.ranks); err != nil {
		return nil, err
	}
	if b.memFree, err = b.freeMemory(); err != nil {
		return nil, err
	}
	h.BufferMemory = b.memBefore - b.memFree
	return h, nil
}

// register registers every rank's buffers with its communicator (-R), as
// nccl-tests does: symmetric windows (collective, so in one group) from
// NCCL 2.27, else local registration.
func (b *bench) register() error {
	if b.opts.Register == 0 {
		return nil
	}
	symmetric := b.opts.Register == 2 && capi.Present(capi.SymCommWindowRegister)
	return nccl.Group(func() error {
		for _, r := range b.ranks {
			for _, buf := range []nccl.Buffer{r.sendBuf, r.recvBuf} {
				var reg io.Closer
				var err error
				if symmetric {
					reg, err = r.comm.RegisterWindow(buf, nccl.WindowCollSymmetric)
				} else {
					reg, err = r.comm.RegisterBuffer(buf)
				}
				if err != nil {
					return &RunError{fmt.Sprintf("registering the buffers (-R %d)", b.opts.Register), err}
				}
				r.registered = append(r.registered, reg)
			}
		}
		return nil
	})
}

// freeMemory is the least free memory over this process's GPUs, the
// minimum over processes: with the value before, what -M reports (the
// largest use on any GPU, as nccl-tests).
func (b *bench) freeMemory() (uint64, error) {
	if !b.opts.MemoryReport {
		return 0, nil
	}
	least := uint64(math.MaxUint64)
	for _, r := range b.ranks {
		free, _, err := r.dev.MemInfo()
		if err != nil {
			return 0, &RunError{"device memory (-M)", err}
		}
		least = min(least, free)
	}
	m, err := b.coord.reduce(float64(least), reduceMin)
	if err != nil {
		return 0, &RunError{"device memory (-M)", err}
	}
	return uint64(m), nil
}

// free releases what setup allocated.
func (b *bench) free() {
	for _, r := range b.ranks {
		for _, reg := range r.registered {
			reg.Close()
		}
		if r.sendAlloc != 0 {
			nccl.MemFree(r.sendAlloc)
		}
		if r.recvAlloc != 0 {
			nccl.MemFree(r.recvAlloc)
		}
		if r.owned {
			r.stream.Destroy()
		}
	}
	if b.coord != nil {
		b.coord.close()
	}
}

// devices describes every rank of the job, gathered to every process.
func (b *bench) devices() ([]DeviceInfo, error) {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i >= 0 {
		host = host[:i]
	}
	var local []DeviceInfo
	for _, r := range b.ranks {
		name, _ := r.dev.Name()
		dom, _ := r.dev.Attribute(cuda.AttrPCIDomainID)
		bus, _ := r.dev.Attribute(cuda.Attribute(33))  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
		slot, _ := r.dev.Attribute(cuda.Attribute(34)) // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
		local = append(local, DeviceInfo{Rank: r.rank, Group: b.world.Group, Pid: os.Getpid(), Host: host,
			Device: int(r.dev), PCI: fmt.Sprintf("%04x:%02x:%02x", dom, bus, slot), Name: name})
	}
	all, err := b.coord.gatherDevices(local)
	if err != nil {
		return nil, &RunError{"gathering device descriptions", err}
	}
	return all, nil
}

// runAll sweeps every type, reduction and root the options ask for.
func (b *bench) runAll(report *Report, rep Reporter) error {
	o := &b.opts
	var dts []dataType
	if o.Type == "all" {
		cc := 1 << 30
		for _, r := range b.ranks {
			ma, mi, err := r.dev.ComputeCapability()
			if err == nil {
				cc = min(cc, ma*10+mi)
			}
		}
		if m, err := b.coord.reduce(float64(cc), reduceMin); err == nil {
			cc = int(m)
		}
		for _, t := range types {
			if (t.dt == nccl.Float8E4M3 || t.dt == nccl.Float8E5M2) && cc < 90 {
				continue // nccl-tests drops fp8 before Hopper
			}
			dts = append(dts, t)
		}
	} else {
		t, _ := lookupType(o.Type)
		dts = []dataType{t}
	}
	var rops []redOp
	switch {
	case !b.coll.usesOp:
		rops = []redOp{{name: b.coll.opName, op: nccl.Sum}}
	case o.Op == "all":
		rops = ops
	default:
		op, _ := lookupOp(o.Op)
		rops = []redOp{op}
	}
	roots := []int{-1}
	if b.coll.rooted {
		if o.Root == -1 {
			roots = roots[:0]
			for r := 0; r < b.nranks; r++ {
				roots = append(roots, r)
			}
		} else {
			if o.Root >= b.nranks {
				return &OptionError{"-r", fmt.Sprint(o.Root), fmt.Sprintf("not a rank of %d", b.nranks)}
			}
			roots = []int{o.Root}
		}
	}
	if b.coll.pow2 && b.nranks&(b.nranks-1) != 0 {
		if b.world.Proc == 0 {
			// nccl-tests prints this and runs nothing.
			if tw, ok := firstTable(rep); ok {
				fmt.Fprintf(tw.W, "nRanks %d is not a power of 2, skipping\n", b.nranks)
			}
		}
		return nil
	}
	for _, dt := range dts {
		for _, op := range rops {
			for _, root := range roots {
				err := b.timeTest(dt, op, root, report, rep)
				if err != nil && (o.Type == "all" || o.Op == "all") && errors.Is(err, nccl.ErrUnsupported) {
					// One combination of a sweep over all types or ops that
					// the loaded NCCL or GPU cannot run (fp8 Avg on one
					// rank, say): say so and go on, where nccl-tests stops.
					if tw, ok := firstTable(rep); ok && b.world.Proc == 0 {
						fmt.Fprintf(tw.W, "# skipping %s %s: %v\n", dt.name, op.name, err)
					}
					report.Skipped = append(report.Skipped, fmt.Sprintf("%s %s: %v", dt.name, op.name, err))
					continue
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func firstTable(rep Reporter) (*TableWriter, bool) {
	switch r := rep.(type) {
	case *TableWriter:
		return r, true
	case multiReporter:
		for _, x := range r {
			if t, ok := firstTable(x); ok {
				return t, true
			}
		}
	}
	return nil, false
}

// setSize sets the counts of a size (nccl-tests' setupArgs).
func (b *bench) setSize(size uint64) {
	b.elt = uint64(b.dt.dt.Size())
	b.cnt = b.coll.counts(size/b.elt, b.elt, b.nranks)
	if b.coll.kind == collAllToAllV {
		v := alltoallvCount(b.cnt.param, b.elt, b.nranks, b.opts.spread())
		b.cnt.send, b.cnt.recv = v, v
	}
	b.total = max(b.sendBytes(), b.expectedBytes())
	b.steps = 1
	if b.total != 0 {
		b.steps = max(b.opts.MaxBytes/b.total, 1)
	}
}

func (b *bench) sendBytes() uint64     { return b.cnt.send * b.elt }
func (b *bench) expectedBytes() uint64 { return b.cnt.recv * b.elt }

// misalign points the buffers -u elements of dt past the allocations.
func (b *bench) misalign(dt dataType) {
	off := uintptr(b.opts.Unaligned * dt.dt.Size())
	for _, r := range b.ranks {
		r.send, r.recv = r.sendAlloc+off, r.recvAlloc+off
	}
}

// timeTest is nccl-tests' TimeTest: warm up, then sweep the sizes.
func (b *bench) timeTest(dt dataType, op redOp, root int, report *Report, rep Reporter) error {
	o := &b.opts
	b.dt, b.op, b.root = dt, op, root
	b.misalign(dt)
	if err := b.coord.barrier(); err != nil {
		return &RunError{"barrier", err}
	}
	for _, size := range o.warmupSizes() {
		b.setSize(size)
		for iter := 0; iter < o.Warmup; iter++ {
			if err := b.startColl(false, iter); err != nil {
				return b.fail(size, "warm-up", err)
			}
		}
		if err := b.completeColl(); err != nil {
			return b.fail(size, "warm-up", err)
		}
	}
	sizes := o.sizes()
	for cycle := 0; o.Cycles == 0 || cycle < o.Cycles; cycle++ {
		for _, size := range sizes {
			if err := b.ctx.Err(); err != nil {
				return err
			}
			b.setSize(size)
			row := Row{Size: max(b.sendBytes(), b.expectedBytes()), Count: b.cnt.param, Type: dt.name, Op: op.name, Root: root}
			var err error
			if row.OutOfPlace, err = b.benchTime(false); err != nil {
				return b.fail(size, "out-of-place", err)
			}
			if row.InPlace, err = b.benchTime(true); err != nil {
				return b.fail(size, "in-place", err)
			}
			if o.Ceiling {
				if row.Ceiling, err = b.ceiling(); err != nil {
					return b.fail(size, "ceiling", err)
				}
			}
			report.Rows = append(report.Rows, row)
			rep.Row(b.coll.name, &report.Rows[len(report.Rows)-1])
		}
	}
	return nil
}

func (b *bench) fail(size uint64, what string, err error) error {
	var re *RunError
	if errors.As(err, &re) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &RunError{fmt.Sprintf("%s %d bytes %s %s root %d %s", b.coll.name, size, b.dt.name, b.op.name, b.root, what), err}
}

// benchTime is nccl-tests' BenchTime: one column group of a row.
func (b *bench) benchTime(inPlace bool) (Cell, error) {
	o := &b.opts
	if o.Check > 0 {
		if err := b.initData(inPlace, 99); err != nil {
			return Cell{}, err
		}
	}
	// Sync
	if err := b.startColl(inPlace, 0); err != nil {
		return Cell{}, err
	}
	if err := b.completeColl(); err != nil {
		return Cell{}, err
	}
	if err := b.coord.barrier(); err != nil {
		return Cell{}, err
	}

	var ev *iterEvents // per-iteration timing (-I)
	if o.PerIterTiming && o.Graph == 0 {
		var err error
		if ev, err = b.newIterEvents(o.Iters); err != nil {
			return Cell{}, err
		}
		defer ev.destroy()
	}
	var collOnly time.Duration
	start := time.Now()
	loop := func() error {
		if o.AggIters <= 1 && o.Blocking == 0 && ev == nil && len(b.ranks) == 1 && !b.op.mulsum && b.cnt.param != 0 {
			return b.plainLoop(inPlace)
		}
		// The offset of operation k is shiftOf(k); kept as a running
		// count, so that the loop divides nothing.
		step := uint64(0)
		var t0 time.Duration
		for iter := 0; iter < o.Iters; iter++ {
			if o.Blocking == 3 {
				t0 = time.Since(start)
			}
			if o.AggIters > 1 {
				if err := nccl.GroupStart(); err != nil {
					return err
				}
			}
			if ev != nil {
				if err := b.recordIter(ev, iter, false); err != nil {
					return err
				}
			}
			for a := 0; a < o.AggIters; a++ {
				err := b.issue(inPlace, step*b.total)
				if step++; step == b.steps {
					step = 0
				}
				if err != nil {
					if o.AggIters > 1 {
						nccl.GroupEnd()
					}
					return err
				}
			}
			if o.AggIters > 1 {
				if err := nccl.GroupEnd(); err != nil {
					return err
				}
			}
			if o.Blocking == 3 {
				if err := b.syncStreams(); err != nil {
					return err
				}
				if ev != nil {
					if err := b.recordIter(ev, iter, true); err != nil {
						return err
					}
				}
				collOnly += time.Since(start) - t0
				if err := b.coord.barrier(); err != nil {
					return err
				}
			}
		}
		if ev != nil && !ev.paired {
			return b.recordIter(ev, o.Iters, false)
		}
		return nil
	}
	if o.Graph > 0 {
		execs, cleanup, err := b.capture(loop)
		if err != nil {
			return Cell{}, err
		}
		err = b.coord.barrier()
		start = time.Now()
		for l := 0; err == nil && l < o.Graph; l++ {
			for i, r := range b.ranks {
				if err = execs[i].Launch(r.stream); err != nil {
					break
				}
			}
		}
		cpu := time.Since(start)
		if err == nil {
			err = b.completeColl()
		}
		elapsed := time.Since(start)
		cleanup()
		if err != nil {
			return Cell{}, err
		}
		return b.finish(inPlace, cpu, elapsed, nil)
	}
	if err := loop(); err != nil {
		return Cell{}, err
	}
	cpu := time.Since(start)
	if o.Blocking == 3 {
		cpu = collOnly
	}
	if err := b.completeColl(); err != nil {
		return Cell{}, err
	}
	elapsed := time.Since(start)
	if o.Blocking == 3 {
		elapsed = collOnly
	}
	var iterTimes []float64
	if ev != nil {
		// completeColl leaves the streams alone in blocking mode.
		if o.Blocking != 0 && o.AggIters <= 1 {
			if err := b.syncStreams(); err != nil {
				return Cell{}, err
			}
		}
		var err error
		if iterTimes, err = ev.times(o.AggIters); err != nil {
			return Cell{}, err
		}
	}
	return b.finish(inPlace, cpu, elapsed, iterTimes)
}

// plainLoop is the timed loop's common case: one rank, one operation per
// iteration, nothing to record or wait for in between. Per iteration it
// does what nccl-tests' startColl does for one GPU (the next offset, the
// NCCL call) and nothing else: the generic loop's per-iteration checks of
// -m, -z and -I, and runColl's address arithmetic, are hoisted out of it.
func (b *bench) plainLoop(inPlace bool) error {
	r := b.ranks[0]
	send, recv := r.send, r.recv
	if inPlace {
		send = recv + uintptr(b.cnt.sendInPlace*b.elt*uint64(r.rank))
		recv += uintptr(b.cnt.recvInPlace * b.elt * uint64(r.rank))
	}
	k := int(b.coll.kind)
	if k >= len(callers) || callers[k] == nil {
		return fmt.Errorf("unknown test %q", b.coll.name)
	}
	fn := callers[k]
	op, total, steps := b.op.op, uintptr(b.total), b.steps
	step, shift := uint64(0), uintptr(0)
	for range b.opts.Iters {
		if err := fn(b, r, op, inPlace, send+shift, recv+shift); err != nil {
			return err
		}
		shift += total
		if step++; step == steps {
			step, shift = 0, 0
		}
	}
	return nil
}

// finish turns the timed loop's durations into a cell and checks the data.
func (b *bench) finish(inPlace bool, cpu, elapsed time.Duration, iterTimes []float64) (Cell, error) {
	o := &b.opts
	n := float64(o.Iters * o.AggIters)
	cpuSec := cpu.Seconds() / n
	deltaSec := elapsed.Seconds() / n
	if o.Graph > 0 {
		deltaSec /= float64(o.Graph)
	}
	deltaSec, err := b.coord.reduce(deltaSec, reduceHow(o.Average))
	if err != nil {
		return Cell{}, err
	}
	alg, bus, _ := Bandwidth(b.coll.name, b.cnt.param, b.elt, deltaSec, b.nranks)
	if err := b.coord.barrier(); err != nil {
		return Cell{}, err
	}
	cell := Cell{AlgBW: alg, BusBW: bus, Time: deltaSec * 1e6}
	if iterTimes != nil {
		if cell.PerIter, err = b.perIter(iterTimes); err != nil {
			return Cell{}, err
		}
	}
	if o.CPUTime {
		cell.Time = cpuSec * 1e6
	}
	checked := o.Check > 0 && !(inPlace && b.coll.noInCheck)
	for c := 0; c < o.Check; c++ {
		b.rep++
		if err := b.initData(inPlace, b.rep); err != nil {
			return Cell{}, err
		}
		if o.Graph > 0 {
			execs, cleanup, err := b.capture(func() error { return b.startColl(inPlace, 0) })
			if err != nil {
				return Cell{}, err
			}
			for i, r := range b.ranks {
				if err == nil {
					err = execs[i].Launch(r.stream)
				}
			}
			if err == nil {
				err = b.completeColl()
			}
			cleanup()
			if err != nil {
				return Cell{}, err
			}
		} else {
			if err := b.startColl(inPlace, 0); err != nil {
				return Cell{}, err
			}
			if err := b.completeColl(); err != nil {
				return Cell{}, err
			}
		}
		if !checked {
			continue // nccl-tests does not count in-place alltoall and sendrecv
		}
		wrong, err := b.checkData(inPlace)
		if err != nil {
			return Cell{}, err
		}
		if wrong != 0 {
			// nccl-tests' CheckData: each process counts the cells its
			// own ranks got wrong; Run sums the counts over processes.
			b.errors++
		}
		total, err := b.coord.reduce(float64(wrong), reduceSum)
		if err != nil {
			return Cell{}, err
		}
		cell.Wrong = int64(total)
		if cell.Wrong != 0 {
			break
		}
	}
	cell.Checked = checked
	b.bwSum += bus
	b.bwCount++
	return cell, nil
}

// capture records fn into one graph per stream and instantiates them;
// cleanup destroys the graphs, their instances and the PreMulSum operators
// captured.
func (b *bench) capture(fn func() error) ([]*cuda.GraphExec, func(), error) {
	streams := make([]cuda.Stream, len(b.ranks))
	for i, r := range b.ranks {
		streams[i] = r.stream
	}
	b.keep = true
	graphs, err := cuda.CaptureStreams(streams, cuda.CaptureThreadLocal, fn)
	b.keep = false
	var execs []*cuda.GraphExec
	cleanup := func() {
		for _, e := range execs {
			e.Destroy()
		}
		for _, g := range graphs {
			g.Destroy()
		}
		for _, op := range b.keepOps {
			op.Close()
		}
		b.keepOps = b.keepOps[:0]
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	for _, g := range graphs {
		e, err := g.Instantiate()
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		execs = append(execs, e)
	}
	return execs, cleanup, nil
}

// startColl is nccl-tests' startColl: one operation on every local rank
// (in a group when there are several), at an offset that moves with iter.
func (b *bench) startColl(inPlace bool, iter int) error {
	return b.issue(inPlace, b.shiftOf(iter))
}

// shiftOf is the byte offset of operation iter in the buffers: operations
// walk through them, one operation's size at a time, as nccl-tests does.
func (b *bench) shiftOf(iter int) uint64 {
	return b.total * (uint64(iter) % b.steps)
}

// issue is startColl at a given offset.
func (b *bench) issue(inPlace bool, shift uint64) error {
	if len(b.ranks) == 1 {
		if err := b.runColl(b.ranks[0], inPlace, shift); err != nil {
			return err
		}
	} else {
		if err := nccl.GroupStart(); err != nil {
			return err
		}
		for _, r := range b.ranks {
			if err := b.runColl(r, inPlace, shift); err != nil {
				nccl.GroupEnd()
				return err
			}
		}
		if err := nccl.GroupEnd(); err != nil {
			return err
		}
	}
	if b.opts.Blocking != 0 {
		if err := b.syncStreams(); err != nil {
			return err
		}
		if b.opts.Blocking == 1 {
			return b.coord.barrier()
		}
	}
	return nil
}

// completeColl waits for the streams (nccl-tests' completeColl).
func (b *bench) completeColl() error {
	if b.opts.Blocking != 0 && b.opts.AggIters <= 1 {
		return nil
	}
	return b.syncStreams()
}

func (b *bench) abort() {
	for _, r := range b.ranks {
		r.comm.Abort()
	}
}

// sendOf is the allocation the send buffer lies in: the receive buffer's
// in place.
func (r *rankState) sendOf(inPlace bool) nccl.Buffer {
	if inPlace {
		return r.recvBuf
	}
	return r.sendBuf
}

// sub is count elements of the current type at p, inside base's
// allocation (so that the binding checks the memory once per run).
func (b *bench) sub(base nccl.Buffer, p uintptr, count uint64) nccl.Buffer {
	base.Ptr, base.Count, base.Type = p, int(count), b.dt.dt
	return base
}

// runColl issues one operation of rank r.
func (b *bench) runColl(r *rankState, inPlace bool, shift uint64) error {
	if b.cnt.param == 0 {
		return nil // the binding refuses empty buffers; NCCL would do nothing
	}
	elt := b.elt
	recv := r.recv + uintptr(shift)
	send := r.send + uintptr(shift)
	if inPlace {
		send = recv + uintptr(b.cnt.sendInPlace*elt*uint64(r.rank))
		recv += uintptr(b.cnt.recvInPlace * elt * uint64(r.rank))
	}
	if !b.op.mulsum {
		return b.call(r, b.op.op, inPlace, send, recv)
	}
	// nccl-tests makes a PreMulSum operator per call, whatever the test.
	o, err := newPreMulSum(r.comm, b.dt.dt, mulsumScalar(r.rank))
	if err != nil {
		return err
	}
	err = b.call(r, o.Op(), inPlace, send, recv)
	if b.keep {
		b.keepOps = append(b.keepOps, o)
	} else {
		o.Close()
	}
	return err
}

// call is the NCCL call of the test, on rank r's buffers at send and recv.
func (b *bench) call(r *rankState, op nccl.RedOp, inPlace bool, send, recv uintptr) error {
	if k := int(b.coll.kind); k < len(callers) && callers[k] != nil {
		return callers[k](b, r, op, inPlace, send, recv)
	}
	return fmt.Errorf("unknown test %q", b.coll.name)
}

// callers are the tests' NCCL calls, by kind, on rank r's buffers at send
// and recv. Each builds its buffers itself: passed down by value, two
// buffers and the call's other arguments overflow the registers
// (BenchmarkTimedLoop: about 20 ns per operation).
var callers = [...]func(b *bench, r *rankState, op nccl.RedOp, inPlace bool, send, recv uintptr) error{
	collAllReduce: func(b *bench, r *rankState, op nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.AllReduce(b.sub(r.sendOf(inPlace), send, count), b.sub(r.recvBuf, recv, count), op, r.stream)
	},
	collAllGather: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.AllGather(b.sub(r.sendOf(inPlace), send, count), b.sub(r.recvBuf, recv, count*uint64(b.nranks)), r.stream)
	},
	collBroadcast: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.Broadcast(b.sub(r.sendOf(inPlace), send, count), b.sub(r.recvBuf, recv, count), b.root, r.stream)
	},
	collReduce: func(b *bench, r *rankState, op nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.Reduce(b.sub(r.sendOf(inPlace), send, count), b.sub(r.recvBuf, recv, count), op, b.root, r.stream)
	},
	collReduceScatter: func(b *bench, r *rankState, op nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.ReduceScatter(b.sub(r.sendOf(inPlace), send, count*uint64(b.nranks)), b.sub(r.recvBuf, recv, count), op, r.stream)
	},
	collAllToAll: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count, n := b.cnt.param, uint64(b.nranks)
		switch {
		case hasAlltoAll() && send != recv:
			return r.comm.AllToAll(b.sub(r.sendOf(inPlace), send, count*n), b.sub(r.recvBuf, recv, count*n), r.stream)
		case hasAlltoAll():
			return allToAllInPlace(r.comm, send, count, b.dt.dt, r.stream)
		}
		return b.allToAllP2P(r, r.sendOf(inPlace), r.recvBuf, send, recv)
	},
	collGather: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.Gather(b.sub(r.sendOf(inPlace), send, count), b.sub(r.recvBuf, recv, count*uint64(b.nranks)), b.root, r.stream)
	},
	collScatter: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		count := b.cnt.param
		return r.comm.Scatter(b.sub(r.sendOf(inPlace), send, count*uint64(b.nranks)), b.sub(r.recvBuf, recv, count), b.root, r.stream)
	},
	collSendRecv: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		return b.sendRecv(r, r.sendOf(inPlace), r.recvBuf, send, recv)
	},
	collHypercube: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		return b.hypercube(r, r.recvBuf, send, recv)
	},
	collAllToAllV: func(b *bench, r *rankState, _ nccl.RedOp, inPlace bool, send, recv uintptr) error {
		return b.alltoallv(r, r.sendOf(inPlace), r.recvBuf, send, recv)
	},
}

// The collectives made of several NCCL calls.

// allToAllP2P is alltoall before NCCL 2.28, nccl-tests' form: a group of
// sends and receives.
func (b *bench) allToAllP2P(r *rankState, sb, rb nccl.Buffer, send, recv uintptr) error {
	count, n, elt := b.cnt.param, b.nranks, b.elt
	c, s := r.comm, r.stream
	return nccl.Group(func() error {
		for p := 0; p < n; p++ {
			off := uintptr(uint64(p) * count * elt)
			if err := c.Send(b.sub(sb, send+off, count), p, s); err != nil {
				return err
			}
			if err := c.Recv(b.sub(rb, recv+off, count), p, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// sendRecv sends to the next rank and receives from the previous one.
func (b *bench) sendRecv(r *rankState, sb, rb nccl.Buffer, send, recv uintptr) error {
	count, n := b.cnt.param, b.nranks
	c, s := r.comm, r.stream
	return nccl.Group(func() error {
		if err := c.Send(b.sub(sb, send, count), (r.rank+1)%n, s); err != nil {
			return err
		}
		return c.Recv(b.sub(rb, recv, count), (r.rank-1+n)%n, s)
	})
}

// hypercube is nccl-tests' hypercube all-gather: the own block copied in,
// then log2(n) exchanges with the peer across each dimension.
func (b *bench) hypercube(r *rankState, rb nccl.Buffer, send, recv uintptr) error {
	count, n, elt := b.cnt.param, b.nranks, b.elt
	c, s := r.comm, r.stream
	size := count * elt
	if own := recv + uintptr(uint64(r.rank)*size); own != send {
		dst := cuda.Wrap[uint8](own, int(size), r.dev)
		if err := dst.CopyFromAsync(cuda.Wrap[uint8](send, int(size), r.dev), s); err != nil {
			return err
		}
	}
	for mask := 1; mask < n; mask <<= 1 {
		lo := r.rank &^ (mask - 1)
		hi := lo ^ mask
		peer := r.rank ^ mask
		err := nccl.Group(func() error {
			if err := c.Send(b.sub(rb, recv+uintptr(uint64(lo)*size), count*uint64(mask)), peer, s); err != nil {
				return err
			}
			return c.Recv(b.sub(rb, recv+uintptr(uint64(hi)*size), count*uint64(mask)), peer, s)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// newPreMulSum makes a PreMulSum operator of type dt with the factor v.
func newPreMulSum(c *nccl.Communicator, dt nccl.DataType, v int64) (*nccl.CustomOp, error) {
	switch dt {
	case nccl.Int8:
		return nccl.PreMulSum(c, int8(v))
	case nccl.Uint8:
		return nccl.PreMulSum(c, uint8(v))
	case nccl.Int32:
		return nccl.PreMulSum(c, int32(v))
	case nccl.Uint32:
		return nccl.PreMulSum(c, uint32(v))
	case nccl.Int64:
		return nccl.PreMulSum(c, v)
	case nccl.Uint64:
		return nccl.PreMulSum(c, uint64(v))
	case nccl.Float16:
		return nccl.PreMulSum(c, cuda.Float16From(float32(v)))
	case nccl.BFloat16:
		return nccl.PreMulSum(c, cuda.BFloat16From(float32(v)))
	case nccl.Float32:
		return nccl.PreMulSum(c, float32(v))
	case nccl.Float64:
		return nccl.PreMulSum(c, float64(v))
	case nccl.Float8E4M3:
		return nccl.PreMulSum(c, cuda.Float8E4M3From(float32(v)))
	case nccl.Float8E5M2:
		return nccl.PreMulSum(c, cuda.Float8E5M2From(float32(v)))
	}
	return nil, fmt.Errorf("no PreMulSum for %s", dt)
}

// pattern of the current run with seed.
func (b *bench) pattern(seed uint64) *pattern {
	return newPattern(b.dt.dt, b.op, b.coll.reduces, b.nranks, seed)
}

// initData writes every local rank's input and clears its output (data
// check runs only).
func (b *bench) initData(inPlace bool, seed uint64) error {
	p := b.pattern(seed)
	for _, r := range b.ranks {
		if eb := b.expectedBytes(); eb > 0 {
			if err := cuda.Wrap[uint8](r.recv, int(eb), r.dev).Memset(0); err != nil {
				return err
			}
		}
		rooted := b.coll.name == "broadcast" || b.coll.name == "scatter"
		sb := b.sendBytes()
		if sb == 0 || (rooted && r.rank != b.root) {
			if err := r.dev.Synchronize(); err != nil {
				return err
			}
			continue
		}
		in := r.send
		if inPlace {
			in = r.recv + uintptr(b.cnt.sendInPlace*b.elt*uint64(r.rank))
		}
		host := b.hostBuf(sb)
		p.fill(host, layout{{n: b.cnt.send, src: srcInput, rank: r.rank}})
		if err := cuda.Wrap[uint8](in, int(sb), r.dev).CopyFromHost(host); err != nil {
			return err
		}
		if err := r.dev.Synchronize(); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) hostBuf(n uint64) []byte {
	if uint64(cap(b.host)) < n {
		b.host = make([]byte, n)
	}
	return b.host[:n]
}

// checkData compares every local rank's output with what it must hold
// and returns the number of wrong elements of this process's ranks.
func (b *bench) checkData(inPlace bool) (int64, error) {
	eb := b.expectedBytes()
	if eb == 0 {
		return 0, nil
	}
	p := b.pattern(b.rep)
	var wrong int64
	for _, r := range b.ranks {
		out := r.recv
		if inPlace {
			out += uintptr(b.cnt.recvInPlace * b.elt * uint64(r.rank))
		}
		host := b.hostBuf(eb)
		if err := cuda.Wrap[uint8](out, int(eb), r.dev).CopyToHost(host); err != nil {
			return 0, err
		}
		wrong += p.check(host, b.outLayout(r.rank, inPlace))
	}
	return wrong, nil
}

// outLayout is what rank q's checked output must hold.
func (b *bench) outLayout(q int, inPlace bool) layout {
	n, param, root, total := b.nranks, b.cnt.param, b.root, b.cnt.recv
	in := func(r int, off, count uint64) segment { return segment{n: count, src: srcInput, rank: r, off: off} }
	reduced := layout{{n: total, src: srcReduced}}
	zero := layout{{n: total}}
	blocks := func(f func(p int) segment) layout {
		l := make(layout, n)
		for p := range l {
			l[p] = f(p)
		}
		return l
	}
	gathered := blocks(func(p int) segment { return in(p, 0, param) })
	switch b.coll.name {
	case "all_reduce":
		return reduced
	case "reduce":
		switch {
		case q == root:
			return reduced
		case inPlace:
			return layout{in(q, 0, total)}
		}
		return zero
	case "reduce_scatter":
		return layout{{n: total, src: srcReduced, off: uint64(q) * param}}
	case "broadcast":
		return layout{in(root, 0, total)}
	case "all_gather", "hypercube":
		return gathered
	case "gather":
		switch {
		case q == root:
			return gathered
		case inPlace:
			return blocks(func(p int) segment {
				if p == q {
					return in(q, 0, param)
				}
				return segment{n: param}
			})
		}
		return zero
	case "scatter":
		return layout{in(root, uint64(q)*param, total)}
	case "alltoall":
		return blocks(func(p int) segment { return in(p, uint64(q)*param, param) })
	case "sendrecv":
		return layout{in((q-1+n)%n, 0, total)}
	case "alltoallv":
		return b.alltoallvLayout(q)
	}
	return zero
}

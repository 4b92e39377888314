package devapi

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

//go:embed kernels.cu
var kernelsSource string

// Source is the CUDA C++ of the ready kernels, for reading and for
// programs that compile it themselves.
func Source() string { return kernelsSource }

// Kernels are the ready kernels, compiled for one device. Safe for
// concurrent use.
type Kernels struct {
	mod       *cuda.Module
	allReduce *cuda.Function
	allGather *cuda.Function
	probe     *cuda.Function
}

// Load compiles the ready kernels for opts.Device (from the cache after
// the first time) and loads them.
func Load(opts Options) (*Kernels, error) {
	code, err := Compile(kernelsSource, opts)
	if err != nil {
		return nil, err
	}
	mod, err := opts.Device.LoadModule(code)
	if err != nil {
		return nil, err
	}
	k := &Kernels{mod: mod}
	if k.allReduce, err = mod.Function("nccl4go_lsa_allreduce_sum_f32"); err != nil {
		mod.Unload()
		return nil, err
	}
	if k.allGather, err = mod.Function("nccl4go_lsa_allgather_f32"); err != nil {
		mod.Unload()
		return nil, err
	}
	if k.probe, err = mod.Function("nccl4go_devcomm_probe"); err != nil {
		mod.Unload()
		return nil, err
	}
	return k, nil
}

// Close unloads the kernels' module. A nil or zero [Kernels] has nothing to
// close; a second Close returns an error wrapping [cuda.ErrClosed].
func (k *Kernels) Close() error {
	if k == nil || k.mod == nil {
		return nil
	}
	return k.mod.Unload()
}

// use refuses a nil or zero [Kernels] (what a failed [Load] returns).
func (k *Kernels) use(op string) error {
	if k == nil || k.mod == nil {
		return &cuda.ArgError{Op: op, Arg: "kernels", Reason: "nil or zero Kernels: get them from Load"}
	}
	return nil
}

// Module is the kernels' module.
func (k *Kernels) Module() *cuda.Module { return k.mod }

// AllReduceSum launches, on s, this rank's part of a sum all-reduce of
// count float32 values from send (at byte offset sendOffset of every
// rank's window) to recv (at recvOffset), through LSA memory, on blocks
// blocks of threads threads. Every rank of the LSA team must launch it with
// the same arguments; it returns when the launch is queued. blocks must be
// at most the device communicator's LSA barrier count
// (DevCommRequirements.LSABarrierCount). send and recv must not overlap.
func (k *Kernels) AllReduceSum(s cuda.Stream, send *nccl.Window, sendOffset uint64, recv *nccl.Window, recvOffset uint64,
	count int, dc *nccl.DevComm, blocks, threads int) error {
	if err := k.use("AllReduceSum"); err != nil {
		return err
	}
	return launchWindows(k.allReduce, "AllReduceSum", s, send, sendOffset, recv, recvOffset, count, dc, blocks, threads)
}

// AllGather launches, on s, this rank's part of an all-gather of count
// float32 values per rank: this rank's send window (at sendOffset) goes to
// elements [lsaRank*count, (lsaRank+1)*count) of every rank's recv window
// (at recvOffset), through LSA memory. The rules of AllReduceSum apply.
func (k *Kernels) AllGather(s cuda.Stream, send *nccl.Window, sendOffset uint64, recv *nccl.Window, recvOffset uint64,
	count int, dc *nccl.DevComm, blocks, threads int) error {
	if err := k.use("AllGather"); err != nil {
		return err
	}
	return launchWindows(k.allGather, "AllGather", s, send, sendOffset, recv, recvOffset, count, dc, blocks, threads)
}

// launchWindows checks the launch shape and launches f, a kernel from
// send's window to recv's (AllReduceSum, AllGather: op names it in errors).
func launchWindows(f *cuda.Function, op string, s cuda.Stream, send *nccl.Window, sendOffset uint64, recv *nccl.Window, recvOffset uint64,
	count int, dc *nccl.DevComm, blocks, threads int) error {
	if blocks <= 0 || threads <= 0 || count < 0 {
		return &cuda.ArgError{Op: op, Arg: "blocks, threads, count",
			Reason: fmt.Sprintf("%d, %d, %d", blocks, threads, count)}
	}
	return f.Launch(s, cuda.LaunchConfig{Grid: cuda.Dim(blocks), Block: cuda.Dim(threads)},
		send, sendOffset, recv, recvOffset, uint64(count), dc)
}

// ProbeResult is what the probe kernel saw of its device communicator.
type ProbeResult struct {
	Rank, NRanks, LSARank, LSASize int
	// LSAPointer is the device address of this rank's window at the
	// offset, as ncclGetLsaPointer gave it for its own LSA rank.
	LSAPointer uintptr
	// BarrierDone: an LSA barrier of all LSA ranks completed.
	BarrierDone bool
	// First is the float32 read through LSAPointer.
	First float32
}

// Probe runs the probe kernel on s (one block) and waits for it: what the
// kernel sees of dc (rank, size, LSA rank and size), the LSA pointer to
// this rank's own window at offset and the value there, and whether an
// LSA barrier went through. Every rank of the LSA team must run it at the
// same time (ranks of one process: from one goroutine each), since the
// kernel waits at the barrier for all of them.
func (k *Kernels) Probe(s cuda.Stream, win *nccl.Window, offset uint64, dc *nccl.DevComm) (*ProbeResult, error) {
	if err := k.use("Probe"); err != nil {
		return nil, err
	}
	out, err := cuda.Alloc[uint64](k.mod.Device(), 8)
	if err != nil {
		return nil, err
	}
	defer out.Free()
	if err := out.Memset(0); err != nil {
		return nil, err
	}
	if err := k.probe.Launch(s, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(32)}, win, offset, out, dc); err != nil {
		return nil, err
	}
	if err := sync(s, k.mod.Device()); err != nil {
		return nil, err
	}
	v, err := out.ToHost()
	if err != nil {
		return nil, err
	}
	return &ProbeResult{Rank: int(v[0]), NRanks: int(v[1]), LSARank: int(v[2]), LSASize: int(v[3]),
		LSAPointer: uintptr(v[4]), BarrierDone: v[5] == 1, First: math.Float32frombits(uint32(v[6]))}, nil
}

// sync waits for s, or for the device when s is the zero Stream.
func sync(s cuda.Stream, dev cuda.Device) error {
	if _, ok := s.Device(); !ok {
		return dev.Synchronize()
	}
	return s.Synchronize()
}

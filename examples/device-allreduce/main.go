// Device-allreduce all-reduces from inside a Go program's own CUDA kernel:
// ranks of one process (one per GPU, or several on one GPU with
// NCCL_MULTI_RANK_GPU_ENABLE=1 and NCCL 2.30.3+) register windows, create
// device communicators with LSA barriers, and launch the kernel below,
// which reads every peer's input and writes every peer's output through
// load/store-accessible (LSA) pointers. The result is checked against
// Communicator.AllReduce, replayed from CUDA graphs, and timed beside it.
//
//	go build -o device-allreduce ./examples/device-allreduce
//	NCCL4GO_NCCL_INCLUDE=$NCCL_HOME/include ./device-allreduce -ranks 2
//
// The kernel is compiled at run time against the NCCL device headers that
// match the loaded libnccl (NVRTC, else nvcc) and cached on disk.
package main

import (
	"flag"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/devapi"
)

const kernel = `#include <nccl_device.h>
extern "C" __global__ void allreduce(ncclWindow_t send, ncclWindow_t recv, size_t count, ncclDevComm comm) {
	ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier, blockIdx.x};
	bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
	size_t stride = (size_t)blockDim.x * gridDim.x * comm.lsaSize;
	for (size_t i = threadIdx.x + (size_t)blockDim.x * (comm.lsaRank + blockIdx.x * comm.lsaSize); i < count; i += stride) {
		float sum = 0;
		for (int p = 0; p < comm.lsaSize; p++) sum += ((float *)ncclGetLsaPointer(send, 0, p))[i];
		for (int p = 0; p < comm.lsaSize; p++) ((float *)ncclGetLsaPointer(recv, 0, p))[i] = sum;
	}
	bar.sync(ncclCoopCta(), cuda::memory_order_release);
}
`

const blocks, threads = 4, 256

type rank struct {
	c          *nccl.Communicator
	s          cuda.Stream
	send, recv cuda.Slice[float32]
	sw, rw     *nccl.Window
	dc         *nccl.DevComm
	f          *cuda.Function
}

func main() {
	nranks := flag.Int("ranks", 2, "ranks in this process")
	oneGPU := flag.Bool("one-gpu", false, "put every rank on GPU 0 (else one rank per GPU)")
	n := flag.Int("n", 1<<16, "floats to all-reduce")
	iters := flag.Int("iters", 100, "graph replays and timed iterations")
	flag.Parse()
	ngpu, err := cuda.Count()
	if err != nil {
		log.Fatal(err)
	}
	devs := make([]int, *nranks)
	for i := range devs {
		if !*oneGPU && ngpu >= *nranks {
			devs[i] = i
		}
	}
	comms, err := nccl.InitAll(devs)
	if err != nil {
		log.Fatalf("InitAll(%v): %v", devs, err)
	}
	// Destroy the ranks together: a Destroy per rank from one goroutine
	// can deadlock where finalize waits for the other ranks.
	defer nccl.DestroyAll(comms...)
	rs := make([]*rank, *nranks)
	for i, c := range comms {
		rs[i] = &rank{c: c}
	}
	// Every step is collective: each rank's goroutine makes its part.
	each(rs, func(i int, r *rank) error {
		dev := cuda.Device(devs[i])
		r.s, r.send, r.recv = must(dev.NewStream()), must(nccl.MemAlloc[float32](dev, *n)), must(nccl.MemAlloc[float32](dev, *n))
		r.sw = must(r.c.RegisterWindow(nccl.BufferOf(r.send), nccl.WindowCollSymmetric))
		r.rw = must(r.c.RegisterWindow(nccl.BufferOf(r.recv), nccl.WindowCollSymmetric))
		r.dc = must(r.c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(blocks)}))
		if err := devapi.RequireLSA(r.c); err != nil {
			return err
		}
		code, err := devapi.Compile(kernel, devapi.Options{Device: dev})
		if err != nil {
			return err
		}
		r.f = must(must(dev.LoadModule(code)).Function("allreduce"))
		return nil
	})
	launch := func(r *rank) error {
		return r.f.Launch(r.s, cuda.LaunchConfig{Grid: cuda.Dim(blocks), Block: cuda.Dim(threads)}, r.sw, r.rw, uint64(*n), r.dc)
	}
	ncclAllReduce := func() error {
		return nccl.Group(func() error {
			for _, r := range rs {
				if err := r.c.AllReduce(nccl.BufferOf(r.send), nccl.BufferOf(r.recv), nccl.Sum, r.s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	want := make([]float32, *n)
	for i, r := range rs {
		in := make([]float32, *n)
		for j := range in {
			in[j] = float32(i*1000 + j%1000)
			want[j] += in[j]
		}
		check(r.send.CopyFromHost(in))
	}
	run := func(what string, step func() error) {
		for _, r := range rs {
			check(r.recv.Memset(0))
		}
		check(step())
		for i, r := range rs {
			check(r.s.Synchronize())
			got := must(r.recv.ToHost())
			for j := range got {
				if got[j] != want[j] {
					log.Fatalf("%s: rank %d element %d = %v, want %v", what, i, j, got[j], want[j])
				}
			}
		}
		fmt.Printf("%-32s exact on %d ranks\n", what, len(rs))
	}
	run("device all-reduce", func() error { return forEach(rs, launch) })
	run("Communicator.AllReduce", ncclAllReduce)
	run(fmt.Sprintf("device all-reduce, graph x%d", *iters), func() error {
		execs := make([]*cuda.GraphExec, len(rs))
		for i, r := range rs {
			execs[i] = must(must(r.s.Capture(cuda.CaptureThreadLocal, func() error { return launch(r) })).Instantiate())
		}
		// Replay the ranks' graphs in turn: a rank's kernel waits in its
		// barrier for the others' (the launch queue is deep, not endless).
		for range *iters {
			for i, r := range rs {
				check(execs[i].Launch(r.s))
			}
		}
		return nil
	})
	timeIt := func(step func() error) time.Duration {
		t0 := time.Now()
		for range *iters {
			check(step())
		}
		for _, r := range rs {
			check(r.s.Synchronize())
		}
		return time.Since(t0) / time.Duration(*iters)
	}
	dev := timeIt(func() error { return forEach(rs, launch) })
	host := timeIt(ncclAllReduce)
	fmt.Printf("%d bytes: device all-reduce %v, Communicator.AllReduce %v per iteration\n", *n*4, dev, host)
}

func each(rs []*rank, f func(i int, r *rank) error) {
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); check(f(i, r)) }()
	}
	wg.Wait()
}

func forEach(rs []*rank, f func(r *rank) error) error {
	for _, r := range rs {
		if err := f(r); err != nil {
			return err
		}
	}
	return nil
}

func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

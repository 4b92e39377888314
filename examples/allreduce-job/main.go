// Allreduce-job is one program that runs unchanged under every launcher:
// it finds its rank in the environment, meets the other ranks through
// rendezvous.Init, all-reduces a buffer of (rank+1)s and checks the sum.
//
//	go build -o allreduce-job ./examples/allreduce-job
//	nccl4go run -n 2 ./allreduce-job
//	mpirun -np 2 -x MASTER_ADDR=$(hostname) ./allreduce-job   (one node: no -x needed)
//	srun -n 2 --gpus-per-task=1 ./allreduce-job
//	torchrun --no-python --nproc-per-node 2 ./allreduce-job
//
// Several ranks on one GPU (tests): -hostid-per-rank gives each rank its own
// NCCL_HOSTID (and NCCL_NVLS_ENABLE=0), which NCCL needs to accept them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/rendezvous"
)

func main() {
	count := flag.Int("count", 1<<20, "float32 elements to all-reduce")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound of the rendezvous and of NCCL's init")
	hostid := flag.Bool("hostid-per-rank", false, "set NCCL_HOSTID per rank (several ranks on one GPU)")
	flag.Parse()

	job, err := rendezvous.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if *hostid { // before NCCL reads it
		host, _ := os.Hostname()
		os.Setenv("NCCL_HOSTID", fmt.Sprintf("%s-rank%d", host, job.Rank))
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	comm, _, err := rendezvous.Init(ctx, &rendezvous.Options{Job: job})
	if err != nil {
		log.Fatalf("rank %d: %v", job.Rank, err)
	}
	defer comm.Destroy()
	dev, _ := comm.Device()

	host := make([]float32, *count)
	for i := range host {
		host[i] = float32(job.Rank + 1)
	}
	buf, err := cuda.AllocFrom(dev, host)
	if err != nil {
		log.Fatalf("rank %d: %v", job.Rank, err)
	}
	defer buf.Free()
	start := time.Now()
	if err := comm.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), nccl.Sum, cuda.Stream{}); err != nil {
		log.Fatalf("rank %d: %v", job.Rank, err)
	}
	if err := comm.Wait(ctx); err != nil { // the communicator is non-blocking
		log.Fatalf("rank %d: %v", job.Rank, err)
	}
	if err := buf.CopyToHost(host); err != nil { // synchronous with the default stream
		log.Fatalf("rank %d: %v", job.Rank, err)
	}
	want := float32(job.WorldSize * (job.WorldSize + 1) / 2)
	for i, v := range host {
		if v != want {
			log.Fatalf("rank %d: element %d is %v, want %v", job.Rank, i, v, want)
		}
	}
	fmt.Printf("rank %d of %d (%s, %v): all-reduce of %d floats ok, sum %v, %v\n", job.Rank, job.WorldSize,
		job.Launcher, dev, *count, want, time.Since(start).Round(time.Microsecond))
}

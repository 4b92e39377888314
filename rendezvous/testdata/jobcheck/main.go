// Jobcheck is the CI's rank program: it reads its rank from the launcher's
// environment (nccl4go run, mpirun, srun, torchrun), meets the other ranks
// through the job's store (check-in, all-gather of every rank's identity,
// barrier), then creates the communicator with rendezvous and, with
// -allreduce, all-reduces one value per rank.
//
// The fake NCCL of the CI creates communicators of several ranks without
// moving data between processes: there, -expect is left out and the value
// is not checked. On GPUs, -expect checks the sum.
//
// Exit codes: 0 ok, 1 failure, and -fail-code for the rank -fail-rank (it
// exits before checking in, to test how the others react).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/rendezvous"
)

func main() {
	timeout := flag.Duration("timeout", time.Minute, "bound of every wait")
	comm := flag.Bool("comm", true, "create the communicator after the store-level checks")
	allreduce := flag.Bool("allreduce", false, "all-reduce (rank+1) over the communicator")
	expect := flag.Bool("expect", false, "check the all-reduce's sum (real NCCL only)")
	failRank := flag.Int("fail-rank", -1, "this rank exits with -fail-code before checking in")
	failCode := flag.Int("fail-code", 3, "exit code of -fail-rank")
	flag.Parse()

	job, err := rendezvous.FromEnv()
	if err != nil {
		fail("-", err)
	}
	who := fmt.Sprintf("rank %d of %d", job.Rank, job.WorldSize)
	if job.Rank == *failRank {
		fmt.Fprintf(os.Stderr, "%s: exiting with %d before checking in, as asked\n", who, *failCode)
		os.Exit(*failCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s, err := rendezvous.Open(ctx, &rendezvous.Options{Job: job})
	if err != nil {
		fail(who, err)
	}
	defer s.Close()
	session = s

	// Every rank says who it is; every rank checks the list.
	host, _ := os.Hostname()
	me := fmt.Sprintf("%d/%d/%d/%s", job.Rank, job.LocalRank, job.LocalWorldSize, host)
	all, err := s.AllGather(ctx, []byte(me))
	if err != nil {
		fail(who, err)
	}
	for r, v := range all {
		if !strings.HasPrefix(string(v), strconv.Itoa(r)+"/") {
			fail(who, fmt.Errorf("all-gather: rank %d says %q", r, v))
		}
	}
	if err := s.Barrier(ctx); err != nil {
		fail(who, err)
	}
	msg := fmt.Sprintf("%s (%s, local %d of %d): store ok, %d ranks", who, job.Launcher, job.LocalRank,
		job.LocalWorldSize, len(all))
	if *comm {
		c, err := s.Communicator(ctx, nil)
		if err != nil {
			fail(who, err)
		}
		defer c.Destroy()
		n, _ := c.NRanks()
		r, _ := c.Rank()
		dev, _ := c.Device()
		if n != job.WorldSize || r != job.Rank {
			fail(who, fmt.Errorf("communicator says rank %d of %d", r, n))
		}
		msg += fmt.Sprintf(", communicator ok on GPU %d", int(dev))
		if *allreduce {
			sum, err := allReduce(ctx, c, dev, float32(job.Rank+1))
			if err != nil {
				fail(who, err)
			}
			want := float32(job.WorldSize * (job.WorldSize + 1) / 2)
			if *expect && sum != want {
				fail(who, fmt.Errorf("all-reduce: sum %v, want %v", sum, want))
			}
			msg += fmt.Sprintf(", all-reduce %v", sum)
		}
	}
	fmt.Println(msg)
}

func allReduce(ctx context.Context, c *nccl.Communicator, dev cuda.Device, v float32) (float32, error) {
	buf, err := cuda.AllocFrom(dev, []float32{v})
	if err != nil {
		return 0, err
	}
	defer buf.Free()
	if err := c.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), nccl.Sum, cuda.Stream{}); err != nil {
		return 0, err
	}
	if err := c.Wait(ctx); err != nil { // a non-blocking communicator: the call is enqueued
		return 0, err
	}
	out := make([]float32, 1)
	if err := buf.CopyToHost(out); err != nil { // synchronous with the default stream
		return 0, err
	}
	return out[0], nil
}

// session is closed before a failing exit: on the rank that hosts the
// store, Close waits for the others to close theirs, so that they can still
// read it while finding out what failed.
var session *rendezvous.Session

func fail(who string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
	if session != nil {
		session.Close()
	}
	os.Exit(1)
}

// Recover shows the watchdog catching a rank that stops, and the other
// ranks shrinking it out and carrying on. Every rank all-reduces ones in a
// loop under a watchdog; at step -at, rank -fault-rank stops (-fault hang:
// it stalls; -fault kill: SIGKILL). The others' watchdog fires after
// -timeout with an error naming the all-reduce and its sequence number, and
// dumps the flight recorder into -dumps; they Shrink the communicator
// without that rank (ShrinkAbort cancels the hung all-reduce) and finish
// their steps on it.
//
//	go build -o recover ./examples/recover
//	nccl4go run -n 3 -hostid-per-rank ./recover -dumps /tmp/dumps
//	nccl4go trace analyze /tmp/dumps
//
// (nccl4go run stops every rank once one fails, so under it use -fault
// hang, the default; -fault kill needs a launcher that lets the others go
// on.) A real job learns which ranks are gone from its launcher or store.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/rendezvous"
	"github.com/nccl4go/nccl/watchdog"
)

func main() {
	steps := flag.Int("steps", 40, "all-reduces per rank")
	at := flag.Int("at", 10, "the step at which the faulty rank stops")
	faultRank := flag.Int("fault-rank", -1, "the rank that stops (-1: the last)")
	fault := flag.String("fault", "hang", "how it stops: hang or kill")
	timeout := flag.Duration("timeout", 10*time.Second, "the watchdog's timeout")
	dumps := flag.String("dumps", os.TempDir(), "where the flight recorder is dumped")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	job, err := rendezvous.FromEnv()
	check(err)
	if *faultRank < 0 {
		*faultRank = job.WorldSize - 1
	}
	boot, _, err := rendezvous.Init(ctx, &rendezvous.Options{Job: job}) // non-blocking
	check(err)
	comm, err := boot.SplitContext(ctx, 0, job.Rank, &nccl.Config{CommName: "world", Blocking: nccl.Ptr(true)})
	check(err)
	check(boot.Destroy())
	watch := func(c *nccl.Communicator) *watchdog.Watchdog {
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: *timeout, DumpDir: *dumps, Action: watchdog.ActionNone})
		check(err)
		return w
	}
	w := watch(comm)

	dev, _ := comm.Device()
	s, err := dev.NewStream()
	check(err)
	ones := make([]float32, 1<<20)
	for i := range ones {
		ones[i] = 1
	}
	buf, err := cuda.AllocFrom(dev, ones)
	check(err)
	nranks := job.WorldSize
	for step := 0; step < *steps; step++ {
		if job.Rank == *faultRank && step == *at {
			fmt.Printf("rank %d: stopping at step %d (%s)\n", job.Rank, step, *fault)
			if *fault == "kill" {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			time.Sleep(*timeout + 30*time.Second) // stalled; the others go on without it
			w.Stop()
			comm.Abort()
			return
		}
		check(buf.CopyFromHostAsync(ones, s))
		err := comm.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), nccl.Sum, s)
		if err == nil {
			err = w.Synchronize(ctx, s) // a hang cannot hold it: it returns the watchdog's error
		}
		if err != nil { // *watchdog.TimeoutError or *watchdog.AsyncError, naming the all-reduce
			fmt.Printf("rank %d: step %d: %v\n", job.Rank, step, err)
			shrunk, err := comm.ShrinkContext(ctx, []int{*faultRank}, nil, nccl.ShrinkAbort)
			check(err)
			w.Stop()
			comm.Abort()
			comm, nranks, w = shrunk, nranks-1, watch(shrunk)
			fmt.Printf("rank %d: recovered on %v\n", job.Rank, comm)
			step-- // redo this step on the shrunk communicator
			continue
		}
		host, err := buf.ToHost()
		check(err)
		if host[0] != float32(nranks) {
			log.Fatalf("rank %d: step %d: sum %v, want %d", job.Rank, step, host[0], nranks)
		}
	}
	w.Stop()
	check(comm.Destroy())
	fmt.Printf("rank %d: %d steps done, the last on %d ranks\n", job.Rank, *steps, nranks)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

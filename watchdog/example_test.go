package watchdog_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/watchdog"
)

// A training loop whose collectives cannot hang it: the watchdog dumps the
// flight recorder, aborts the communicator and fails the wait that a
// dead or diverged rank would otherwise hold forever. (Needs a GPU and the
// job's other ranks: no Output.)
func ExampleWatch() {
	var comm *nccl.Communicator // from nccl.Init or rendezvous.Init
	var buf nccl.Buffer
	var s cuda.Stream
	w, err := watchdog.Watch(comm, &watchdog.Options{Timeout: 5 * time.Minute, DumpDir: "/shared/dumps"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()
	ctx := context.Background()
	for step := 0; step < 1000; step++ {
		if err := comm.AllReduce(buf, buf, nccl.Sum, s); err != nil {
			fmt.Println(err) // after a timeout: wraps the *watchdog.TimeoutError
			return
		}
		if err := w.Synchronize(ctx, s); err != nil {
			var te *watchdog.TimeoutError
			if errors.As(err, &te) {
				fmt.Printf("%s #%d hung; dump in %s\n", te.Op.Op, te.Op.Seq, te.Dump)
			}
			return
		}
	}
}

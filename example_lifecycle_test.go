package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Splitting a job into two halves: even ranks form one communicator, odd
// ranks another, and rank 0 sits out (NoColor) with a null communicator.
// Every rank of the parent calls Split. (Runs on a GPU with the job's
// ranks; shown here for one rank.)
func ExampleCommunicator_Split() {
	id, err := nccl.NewUniqueID() // rank 0 sends it to the others
	if err != nil {
		log.Fatal(err)
	}
	world, err := nccl.Init(1, 0, id, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer world.Destroy()
	rank, _ := world.Rank()

	color := rank % 2
	if rank == 0 {
		color = nccl.NoColor
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	half, err := world.SplitContext(ctx, color, rank, nil) // key: keep the world's order
	if err != nil {
		log.Fatal(err) // if ctx ended, world was aborted too
	}
	defer half.Destroy() // a no-op on a null communicator
	if !half.IsValid() {
		fmt.Println("rank", rank, "is in no half")
		return
	}
	n, _ := half.NRanks()
	r, _ := half.Rank()
	fmt.Printf("world rank %d is rank %d of %d in half %d\n", rank, r, n, color)
}

// A window over memory from NCCL's allocator, collective over the ranks;
// where the ranks cannot share memory NCCL makes no window, which the
// error says (ErrNoWindow). The window's device pointers are for kernels.
func ExampleCommunicator_RegisterWindow() {
	id, err := nccl.NewUniqueID()
	if err != nil {
		log.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Destroy() // also closes the window

	buf, err := nccl.MemAlloc[float32](cuda.Device(0), 1<<20) // cuMem memory, as windows need
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Free() // runs after w.Close below: deferred calls run last first

	w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
	if errors.Is(err, nccl.ErrNoWindow) {
		fmt.Println("no symmetric memory here:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	peer, err := w.PeerPointer(0, 0) // NCCL 2.29.2
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank 0's window is at %#x for this rank's kernels\n", peer)
}

package nccl_test

import (
	"fmt"
	"log"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Sum a vector across all ranks, in place, on a stream of the rank's GPU.
// Here one rank; every rank of a real job makes the same call.
func ExampleCommunicator_AllReduce() {
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		log.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()

	dev, err := c.Device()
	if err != nil {
		log.Fatal(err)
	}
	stream, err := dev.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Destroy()

	grads, err := cuda.AllocFrom(dev, []float32{0.5, 1.5, 2.5, 3.5})
	if err != nil {
		log.Fatal(err)
	}
	defer grads.Free()

	// The average over the ranks, in place: send and recv are the same buffer.
	buf := nccl.BufferOf(grads)
	if err := c.AllReduce(buf, buf, nccl.Avg, stream); err != nil {
		log.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		log.Fatal(err)
	}
	host, err := grads.ToHost()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(host)
}

// One goroutine drives every GPU of the machine: the calls of all
// communicators go into one group, which NCCL launches when it ends.
func ExampleGroup() {
	comms, err := nccl.InitAll(nil) // one rank per visible GPU
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Destroy()
		}
	}()

	bufs := make([]cuda.Slice[float64], len(comms))
	for i := range comms {
		if bufs[i], err = cuda.AllocFrom(cuda.Device(i), []float64{float64(i + 1)}); err != nil {
			log.Fatal(err)
		}
		defer bufs[i].Free()
	}

	// Without the group, the first AllReduce would wait for ranks that
	// this goroutine has not reached yet.
	err = nccl.Group(func() error {
		for i, c := range comms {
			b := nccl.BufferOf(bufs[i])
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range comms {
		if err := cuda.Device(i).Synchronize(); err != nil {
			log.Fatal(err)
		}
		v, err := bufs[i].ToHost()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rank %d: %v\n", i, v) // n(n+1)/2 on every rank
	}
}

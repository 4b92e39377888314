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
	defer nccl.DestroyAll(comms...)

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

// Scale while summing: a PreMulSum operator multiplies every rank's input
// by a scalar (here 1/nranks, as a mean would) before the sum. The
// operator belongs to its communicator; Close frees it early, Destroy
// frees it anyway.
func ExamplePreMulSum() {
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		log.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()
	n, err := c.NRanks()
	if err != nil {
		log.Fatal(err)
	}
	scale, err := nccl.PreMulSum(c, 1/float32(n))
	if err != nil {
		log.Fatal(err)
	}
	defer scale.Close()

	x, err := cuda.AllocFrom(0, []float32{2, 4, 6})
	if err != nil {
		log.Fatal(err)
	}
	defer x.Free()
	b := nccl.BufferOf(x)
	if err := c.AllReduce(b, b, scale.Op(), cuda.Stream{}); err != nil {
		log.Fatal(err)
	}
	if err := cuda.Device(0).Synchronize(); err != nil {
		log.Fatal(err)
	}
	v, err := x.ToHost()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
}

// Pass data around a ring: each rank sends to the next and receives from
// the previous. The pair goes into one group, or every rank would wait in
// its Send for a Recv that is never posted.
func ExampleCommunicator_Send() {
	comms, err := nccl.InitAll(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nccl.DestroyAll(comms...)
	n := len(comms)
	send := make([]cuda.Slice[int32], n)
	recv := make([]cuda.Slice[int32], n)
	for i := range n {
		if send[i], err = cuda.AllocFrom(cuda.Device(i), []int32{int32(i), int32(10 * i)}); err != nil {
			log.Fatal(err)
		}
		defer send[i].Free()
		if recv[i], err = cuda.Alloc[int32](cuda.Device(i), 2); err != nil {
			log.Fatal(err)
		}
		defer recv[i].Free()
	}
	err = nccl.Group(func() error {
		for i, c := range comms {
			if err := c.Send(nccl.BufferOf(send[i]), (i+1)%n, cuda.Stream{}); err != nil {
				return err
			}
			if err := c.Recv(nccl.BufferOf(recv[i]), (i+n-1)%n, cuda.Stream{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range n {
		if err := cuda.Device(i).Synchronize(); err != nil {
			log.Fatal(err)
		}
		v, err := recv[i].ToHost()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rank %d got %v from rank %d\n", i, v, (i+n-1)%n)
	}
}

// Ask NCCL how long a collective would take, without running it. NCCL
// simulates groups of blocking communicators of several ranks.
func ExampleGroupSimulate() {
	comms, err := nccl.InitAll(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nccl.DestroyAll(comms...)
	bufs := make([]cuda.Slice[float32], len(comms))
	for i := range comms {
		if bufs[i], err = cuda.Alloc[float32](cuda.Device(i), 1<<20); err != nil {
			log.Fatal(err)
		}
		defer bufs[i].Free()
	}
	est, err := nccl.GroupSimulate(func() error {
		for i, c := range comms {
			b := nccl.BufferOf(bufs[i])
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err) // e.g. ErrUnsupported on a one-GPU machine
	}
	fmt.Printf("a 4 MiB all-reduce over %d GPUs: about %v\n", len(comms), est)
}

// Memory from another library (here a raw device pointer, as a PyTorch
// tensor's data_ptr would be) goes to NCCL through RawBuffer, which says
// what it holds: the count, the element type and the device.
func ExampleRawBuffer() {
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		log.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()
	mem, err := cuda.AllocFrom(0, []float64{1, 2, 3, 4})
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Free()
	ptr := mem.Ptr() // from elsewhere, in a real program

	b := nccl.RawBuffer(ptr, 4, nccl.Float64, 0)
	if err := c.AllReduce(b, b, nccl.Max, cuda.Stream{}); err != nil {
		log.Fatal(err)
	}
	// A wrong description is refused before NCCL sees it.
	bad := nccl.RawBuffer(ptr, 4, nccl.Float64, 1)
	fmt.Println(c.AllReduce(bad, bad, nccl.Max, cuda.Stream{}))
}

package nccl_test

import (
	"fmt"
	"log"
	"sync/atomic"

	"github.com/nccl4go/nccl"
)

// opCounter is a Hook that counts a communicator's operations (for a
// metrics exporter, say). It does not follow them to completion, so it
// leaves their flight-recorder entries unwatched.
type opCounter struct{ queued, groups atomic.Int64 }

func (o *opCounter) Queued(op nccl.QueuedOp) { o.queued.Add(1) }
func (o *opCounter) GroupEnded()             { o.groups.Add(1) }

// Counting a communicator's operations with a hook of one's own, beside
// any other (the watchdog's, say). (Runs on a GPU.)
func ExampleCommunicator_AddHook() {
	id, err := nccl.NewUniqueID()
	if err != nil {
		log.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Destroy()
	counter := &opCounter{}
	remove, err := c.AddHook(counter)
	if err != nil {
		log.Fatal(err)
	}
	defer remove()
	// ... collectives on c ...
	fmt.Println("operations so far:", counter.queued.Load())
}

package nccl_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nccl4go/nccl"
)

// Rank 0 creates the id and sends its text form (256 hex digits) to the
// other ranks, which parse it and pass it to Init.
func ExampleNewUniqueID() {
	id, err := nccl.NewUniqueID() // on rank 0 only
	if err != nil {
		log.Fatal(err) // e.g. NCCL not installed: the error says how to fix it
	}
	text, err := id.MarshalText()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("send %d hex digits to the other ranks\n", len(text))

	// On another rank:
	received, err := nccl.ParseUniqueID(string(text))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(received == id)
}

// A communicator of one rank on device 0: the smallest complete program.
func ExampleInit() {
	id, err := nccl.NewUniqueID()
	if err != nil {
		log.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, &nccl.Config{Device: nccl.Ptr(0)})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Destroy()

	nranks, err := c.NRanks()
	if err != nil {
		log.Fatal(err)
	}
	rank, err := c.Rank()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d\n", rank, nranks)
}

// One process driving every GPU of the machine: one communicator per GPU,
// created within a minute or not at all.
func ExampleInitAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms, err := nccl.InitAllContext(ctx, nil, nil) // nil: every visible GPU
	if err != nil {
		log.Fatal(err)
	}
	defer nccl.DestroyAll(comms...) // together: see DestroyAll
	for _, c := range comms {
		rank, err := c.Rank()
		if err != nil {
			log.Fatal(err)
		}
		dev, err := c.Device()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("rank %d of %d on %v\n", rank, len(comms), dev) // rank 0 of 8 on cuda:0
	}
}

// What a communicator can do with NCCL's device API. Properties need NCCL
// 2.29.2; the last three fields need 2.29.7 and are nil before.
func ExampleCommunicator_Properties() {
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		log.Fatal(err)
	}
	c := comms[0]
	defer c.Destroy()

	p, err := c.Properties()
	if errors.Is(err, nccl.ErrUnsupported) {
		fmt.Println(err) // nccl: ncclCommQueryProperties: requires NCCL 2.29.2, loaded 2.28.3
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("device API %v, multimem %v, GIN %v\n", p.DeviceAPISupport, p.MultimemSupport, p.GINType)
	if p.NumLSATeams != nil {
		fmt.Printf("LSA teams %d, host RMA %v, railed GIN %v\n", *p.NumLSATeams, *p.HostRMASupport, *p.RailedGINType)
	}
}

// Releases compare as numbers, so a feature check is one comparison.
func ExampleParseRelease() {
	r, err := nccl.ParseRelease("2.28.3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r, int(r), r.Major(), r.Minor(), r.Patch())
	fmt.Println("has properties:", r >= 22902)

	_, err = nccl.ParseRelease("2.28")
	fmt.Println(err)
	// Output:
	// 2.28.3 22803 2 28 3
	// has properties: false
	// nccl: "2.28" is not a release number like 2.28.3
}

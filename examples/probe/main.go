// Probe creates one communicator over every GPU of this machine, driven
// from this one process, and prints what each rank can do with NCCL's
// device API.
//
// Run it on a machine with NVIDIA GPUs and NCCL installed:
//
//	go run ./examples/probe
//
// Set NCCL_LIBRARY=/path/to/libnccl.so.2 to pick the NCCL library. The
// properties need NCCL 2.29.2 (the last three columns 2.29.7); on an older
// NCCL the program says so. `nccl4go probe` is the full-featured version.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nccl4go/nccl"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// nil devices: every visible GPU. Non-blocking, so that the timeout can
	// end an init that never completes (a blocking one waits inside NCCL).
	comms, err := nccl.InitAllContext(ctx, nil, &nccl.Config{Blocking: nccl.Ptr(false)})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		// Together: a Destroy per rank from one goroutine can deadlock
		// where finalize waits for the other ranks.
		if err := nccl.DestroyAll(comms...); err != nil {
			log.Print(err)
		}
	}()

	var note error // why properties are missing, if they are
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tDEVICE\tDEVICE API\tMULTIMEM\tGIN\tLSA TEAMS\tHOST RMA\tRAILED GIN")
	for _, c := range comms {
		rank, err := c.Rank()
		if err != nil {
			log.Fatal(err)
		}
		dev, err := c.Device()
		if err != nil {
			log.Fatal(err)
		}
		p, err := c.Properties()
		if errors.Is(err, nccl.ErrUnsupported) {
			fmt.Fprintf(tw, "%d\t%v\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\n", rank, dev)
			note = err
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		teams, rma, railed := "n/a", "n/a", "n/a" // before NCCL 2.29.7
		if p.NumLSATeams != nil {
			teams, rma, railed = strconv.Itoa(*p.NumLSATeams), strconv.FormatBool(*p.HostRMASupport), p.RailedGINType.String()
		}
		fmt.Fprintf(tw, "%d\t%v\t%v\t%v\t%v\t%s\t%s\t%s\n",
			rank, dev, p.DeviceAPISupport, p.MultimemSupport, p.GINType, teams, rma, railed)
	}
	tw.Flush()
	if note != nil {
		fmt.Println(note) // nccl: ncclCommQueryProperties: requires NCCL 2.29.2, loaded 2.28.3
	}
}

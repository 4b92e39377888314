// Uniqueid-exchange shows how the ranks of a job, one process each, agree on
// a communicator: rank 0 creates the unique id and writes it to a file that
// every rank can read (a shared directory); the other ranks wait for the
// file, read it, and all of them call Init.
//
// Run two ranks on a machine with two GPUs (rank r uses GPU r by default):
//
//	go build -o /tmp/uidx ./examples/uniqueid-exchange
//	/tmp/uidx -rank 0 -nranks 2 -file /tmp/nccl-id &
//	/tmp/uidx -rank 1 -nranks 2 -file /tmp/nccl-id
//
// Give each run a fresh -file path: rank 0 removes the file once the
// communicator exists, but a stale file from a crashed run would be read.
// Across machines the file must be on a shared file system; real jobs use a
// network store or their launcher instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"time"

	"github.com/nccl4go/nccl"
)

func main() {
	rank := flag.Int("rank", 0, "this process's rank, 0 to nranks-1")
	nranks := flag.Int("nranks", 1, "number of ranks")
	file := flag.String("file", "", "path of the file that carries the unique id (required)")
	device := flag.Int("device", -1, "CUDA device of this rank; -1: the device numbered like the rank")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()
	if *file == "" || *rank < 0 || *rank >= *nranks {
		flag.Usage()
		os.Exit(2)
	}
	if *device < 0 {
		*device = *rank
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var id nccl.UniqueID
	var err error
	if *rank == 0 {
		id, err = publish(*file)
	} else {
		id, err = await(ctx, *file)
	}
	if err != nil {
		log.Fatalf("rank %d: %v", *rank, err)
	}

	// Non-blocking, so that -timeout can end an init whose peers never come
	// (a blocking init waits inside NCCL, where a context cannot reach).
	c, err := nccl.InitContext(ctx, *nranks, *rank, id, &nccl.Config{Device: device, Blocking: nccl.Ptr(false)})
	if err != nil {
		log.Fatalf("rank %d: %v", *rank, err)
	}
	defer c.Destroy()
	if *rank == 0 {
		os.Remove(*file) // every rank has joined, so every rank has read it
	}
	n, err := c.NRanks()
	if err != nil {
		log.Fatalf("rank %d: %v", *rank, err)
	}
	dev, err := c.Device()
	if err != nil {
		log.Fatalf("rank %d: %v", *rank, err)
	}
	fmt.Printf("rank %d: joined a communicator of %d ranks on %v\n", *rank, n, dev)
}

// publish creates the id and writes its text form atomically: the others
// never see half a file.
func publish(path string) (nccl.UniqueID, error) {
	id, err := nccl.NewUniqueID()
	if err != nil {
		return id, err
	}
	text, _ := id.MarshalText()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, text, 0o600); err != nil {
		return id, err
	}
	return id, os.Rename(tmp, path)
}

// await polls until the file exists, then reads the id.
func await(ctx context.Context, path string) (nccl.UniqueID, error) {
	for {
		text, err := os.ReadFile(path)
		if err == nil {
			return nccl.ParseUniqueID(string(text))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nccl.UniqueID{}, err
		}
		select {
		case <-ctx.Done():
			return nccl.UniqueID{}, fmt.Errorf("waiting for rank 0 to write %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

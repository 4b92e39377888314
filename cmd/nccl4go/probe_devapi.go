package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/devapi"
	"github.com/nccl4go/nccl/nvrtc"
)

// probePath is one device-API path and whether this machine can run it.
type probePath struct {
	Path   string `json:"path"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// devicePaths says which device-API paths the probe's communicators
// (comms, one per rank) and this machine's compilers can run: kernels using
// LSA memory (the properties allow it and a device communicator was
// created, within timeout), multimem and GIN (the properties of rank 0),
// and what compiling them needs (NCCL device headers matching the library,
// NVRTC or nvcc, nvJitLink for LTO).
func devicePaths(ctx context.Context, comms []*nccl.Communicator, timeout time.Duration) []probePath {
	c := comms[0]
	var out []probePath
	add := func(path string, detail string, err error) {
		if err != nil {
			out = append(out, probePath{Path: path, Detail: err.Error()})
			return
		}
		out = append(out, probePath{Path: path, OK: true, Detail: detail})
	}
	lsa := devapi.RequireLSA(c)
	if lsa == nil {
		lsa = tryDevComm(ctx, comms, timeout)
	}
	add("LSA kernels", "device communicators and load/store-accessible windows (a device communicator was created)", lsa)
	add("multimem kernels", "NVLink multicast pointers", devapi.RequireMultimem(c))
	add("GIN kernels", "GPU-initiated networking", devapi.RequireGIN(c))
	h, err := devapi.FindHeaders("")
	if err == nil {
		add("NCCL device headers", fmt.Sprintf("%s (NCCL %s)", h.Dir, h.Release), nil)
	} else {
		add("NCCL device headers", "", err)
	}
	if path, err := nvrtc.LibraryPath(); err == nil {
		major, minor, _ := nvrtc.Version()
		add("NVRTC", fmt.Sprintf("%s (%d.%d)", path, major, minor), nil)
	} else {
		add("NVRTC", "", err)
	}
	p, err := devapi.NVCCPath()
	add("nvcc", p, err)
	p, err = nvrtc.LinkLibraryPath()
	add("nvJitLink (LTO)", p, err)
	return out
}

// printPaths writes the device-API paths, one a line.
func printPaths(w io.Writer, paths []probePath) {
	if len(paths) == 0 {
		return
	}
	fmt.Fprintf(w, "\ndevice-API paths:\n")
	for _, p := range paths {
		mark := "no "
		if p.OK {
			mark = "yes"
		}
		fmt.Fprintf(w, "  %-20s %s  %s\n", p.Path, mark, p.Detail)
	}
}

// tryDevComm creates a device communicator on every rank at once
// (ncclDevCommCreate is collective), within timeout, and closes them: the
// proof that LSA kernels can run, where the properties cannot tell (NCCL
// before 2.29.2) or could be wrong. It returns the first refusal.
func tryDevComm(ctx context.Context, comms []*nccl.Communicator, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.CreateDevCommContext(ctx, nil)
			if err == nil {
				err = d.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

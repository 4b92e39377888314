package main

import (
	"fmt"
	"io"

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

// devicePaths says which device-API paths the communicator c (rank 0 of
// the probe) and this machine's compilers can run: kernels using LSA
// memory, multimem and GIN (the communicator's properties), and what
// compiling them needs (NCCL device headers matching the library, NVRTC or
// nvcc, nvJitLink for LTO).
func devicePaths(c *nccl.Communicator) []probePath {
	var out []probePath
	add := func(path string, detail string, err error) {
		if err != nil {
			out = append(out, probePath{Path: path, Detail: err.Error()})
			return
		}
		out = append(out, probePath{Path: path, OK: true, Detail: detail})
	}
	add("LSA kernels", "device communicators and load/store-accessible windows", devapi.RequireLSA(c))
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

//go:build linux && cgo

package main

// loadsCLibraries says whether this build can load NCCL and the CUDA
// driver at all: internal/capi has its cgo shim only on Linux with cgo.
const loadsCLibraries = true

//go:build !linux || !cgo

package main

// loadsCLibraries says whether this build can load NCCL and the CUDA
// driver at all: internal/capi's stub (not Linux, or CGO_ENABLED=0) fails
// every load, and installing a library would not help.
const loadsCLibraries = false

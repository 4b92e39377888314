//go:build !linux || !cgo

package faketest

// loadable reports whether this build can load the fakes: the binding
// loads C libraries only when built with cgo on Linux.
const loadable = false

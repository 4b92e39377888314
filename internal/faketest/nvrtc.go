package faketest

import "testing"

// NVRTCLibrary builds (or finds in the cache) the fake NVRTC
// (testdata/fakenvrtc.c) and returns its path. Point the binding at it
// with NCCL4GO_NVRTC_LIBRARY in Env.Extra.
func NVRTCLibrary(t testing.TB) string {
	t.Helper()
	p, err := library("nvrtc")
	if err != nil {
		t.Fatalf("faketest: building the fake NVRTC: %v", err)
	}
	return p
}

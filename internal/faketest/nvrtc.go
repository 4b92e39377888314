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

// NvJitLinkLibrary builds (or finds in the cache) the fake nvJitLink
// (testdata/fakenvjitlink.c) and returns its path. Point the binding at
// it with NCCL4GO_NVJITLINK_LIBRARY in Env.Extra.
func NvJitLinkLibrary(t testing.TB) string {
	t.Helper()
	p, err := library("nvjitlink")
	if err != nil {
		t.Fatalf("faketest: building the fake nvJitLink: %v", err)
	}
	return p
}

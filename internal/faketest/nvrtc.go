package faketest

import "testing"

// NVRTCLibrary builds (or finds in the cache) the fake NVRTC
// (testdata/fakenvrtc.c) and returns its path. Point the binding at it
// with NCCL4GO_NVRTC_LIBRARY in Env.Extra.
func NVRTCLibrary(t testing.TB) string {
	t.Helper()
	return mustLibrary(t, "nvrtc", "NVRTC")
}

// NvJitLinkLibrary builds (or finds in the cache) the fake nvJitLink
// (testdata/fakenvjitlink.c) and returns its path. Point the binding at
// it with NCCL4GO_NVJITLINK_LIBRARY in Env.Extra.
func NvJitLinkLibrary(t testing.TB) string {
	t.Helper()
	return mustLibrary(t, "nvjitlink", "nvJitLink")
}

// mustLibrary is library(variant), ending the test when the fake (what
// names it in the message) cannot be built.
func mustLibrary(t testing.TB, variant, what string) string {
	t.Helper()
	p, err := library(variant)
	if err != nil {
		t.Fatalf("faketest: building the fake %s: %v", what, err)
	}
	return p
}

package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Versions reports the binding's version, its ABI release and the loaded
// library; without a library it still reports the binding's half.
func TestVersions(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		v, err := nccl.Versions()
		if err != nil {
			t.Fatal(err)
		}
		if v.Library != 22803 || v.ABI != nccl.ABIRelease || v.Binding == "" || !strings.Contains(v.Path, ".so") {
			t.Errorf("%+v", v)
		}
		if want := "nccl4go " + v.Binding + ", NCCL ABI " + nccl.ABIRelease.String() + ", library 2.28.3 at " + v.Path; v.String() != want {
			t.Errorf("String() = %q, want %q", v, want)
		}
	})
	faketest.Run(t, faketest.Env{NoNCCL: true}, func(t *testing.T) {
		v, err := nccl.Versions()
		if !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Errorf("without NCCL: %v", err)
		}
		if v.Library != 0 || v.Path != "" || v.ABI != nccl.ABIRelease || v.Binding == "" {
			t.Errorf("without NCCL: %+v", v)
		}
		if !strings.HasSuffix(v.String(), ", library not loaded") {
			t.Errorf("String() = %q", v)
		}
	})
}

package nccl_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/versions"
)

// A library that reports a new release but lacks functions (a build without
// them, or a fake): the function's presence decides, and the error names
// the missing function, not another that the release number implied.
func TestFakeMissingFunctionsOfNewRelease(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22602, Version: 23007, Extra: []string{"FAKE_NCCL_HOST_RMA=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 1024)
		_, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
		wantUnsupported(t, "RegisterWindow", err, "ncclCommWindowRegister", 22703)
		_, err = c.CreateDevComm(nil)
		wantUnsupported(t, "CreateDevComm", err, "ncclDevCommCreate", 22803)
		var s cuda.Stream
		wantUnsupported(t, "Signal", c.Signal(1, s), "ncclSignal", 22902)
		wantUnsupported(t, "PutSignal", c.PutSignal(nccl.BufferOf(buf), 1, nil, 0, s), "ncclPutSignal", 22902)
	})
}

// Every property field of the version table is filled where the loaded
// release has it and nil where it does not: a new row whose field the
// binding never decodes fails here.
func TestFakePropertiesFieldsOfTable(t *testing.T) {
	for _, r := range []int{22902, faketest.DefaultRelease} {
		faketest.Run(t, faketest.Env{Release: r}, func(t *testing.T) {
			p, err := collComm(t, 1, 0, 1).Properties()
			if err != nil {
				t.Fatal(err)
			}
			v := reflect.ValueOf(p)
			for _, f := range versions.Fields("ncclCommProperties_t") {
				if got, want := !v.FieldByName(f.Field()).IsNil(), f.In(r); got != want {
					t.Errorf("NCCL %s: Properties.%s filled %v, want %v (%s)", nccl.Release(r), f.Field(), got, want, f.Name())
				}
			}
		})
	}
}

// Two ranks of one process on one GPU: refused before the release that
// allows it (named from the version table), and without the variable after.
func TestFakeMultiRankGPURefusal(t *testing.T) {
	for _, tc := range []struct {
		r    int
		want string
	}{
		{22907, "NCCL 2.29.7 allows one rank per GPU (several need NCCL 2.30.3 and NCCL_MULTI_RANK_GPU_ENABLE=1)"},
		{23007, "set NCCL_MULTI_RANK_GPU_ENABLE=1"},
	} {
		faketest.Run(t, faketest.Env{Release: tc.r}, func(t *testing.T) {
			t.Setenv("NCCL_MULTI_RANK_GPU_ENABLE", "")
			comms, err := nccl.InitAll([]int{0, 0})
			if !errors.Is(err, nccl.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) || comms != nil {
				t.Errorf("InitAll(0, 0) on %s: %v, %v; want an ArgError saying %q", nccl.Release(tc.r), comms, err, tc.want)
			}
		})
	}
}

package nccl_test

import (
	"reflect"
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
		buf, err := nccl.MemAlloc[float32](0, 1024)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		_, err = c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
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
			p, err := propsComm(t).Properties()
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

package faketest_test

import (
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The shim's capi_coll_config against the fake's ncclParseCollConfig
// rules, with configs the binding would not send: a size past the
// library's struct declaring its own version (real NCCL overruns its stack
// copy; the fake fails), a version newer than the library (read for the
// library's size), and input the shim itself refuses before calling.
func TestShimCollConfig(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		comm := rawComm(t, 1)
		ctx, _ := capi.CuDevicePrimaryCtxRetain(0)
		buf, r := capi.CuMemAlloc(ctx, 4)
		if r != 0 {
			t.Fatalf("cuMemAlloc: %d", r)
		}
		defer capi.CuMemFree(ctx, buf)
		call := func(in capi.CollIn, ext []capi.ExtIn, strs string) capi.Status {
			in.AlgLen = -1
			return capi.CollConfigCall(capi.CollAllReduce, buf, buf, 1, 7, 0, 0, comm, 0, &in, ext, []byte(strs))
		}
		for _, tc := range []struct {
			in     capi.CollIn
			code   int32
			detail string
		}{
			{capi.CollIn{Size: 64, Version: 23102}, 0, ""},
			{capi.CollIn{Size: 40, Version: 23100}, 0, ""},
			{capi.CollIn{Size: 72, Version: 23203}, 0, ""},          // newer than the library: its own 64 bytes are read
			{capi.CollIn{Size: 72, Version: 23102}, 3, "overflows"}, // real NCCL: a 72-byte memcpy into its 64 bytes
			{capi.CollIn{Size: 39, Version: 23102}, 4, "out of bounds"},
			{capi.CollIn{Size: 80, Version: 23300}, 4, "out of bounds"}, // larger than any layout the shim knows
			{capi.CollIn{Size: 64, Version: 23102, NExt: 65}, 4, "out of bounds"},
		} {
			st := call(tc.in, make([]capi.ExtIn, 65), "")
			if st.Code != tc.code || !strings.Contains(st.Detail, tc.detail) {
				t.Errorf("%+v: result %d %q, want %d %q", tc.in, st.Code, st.Detail, tc.code, tc.detail)
			}
		}
		// Strings and ext entries are bounds-checked against the block.
		in := capi.CollIn{Size: 64, Version: 23102}
		in.AlgOff, in.AlgLen = 2, 5
		if st := capi.CollConfigCall(capi.CollAllReduce, buf, buf, 1, 7, 0, 0, comm, 0, &in, nil, []byte("abc")); st.Code != 4 {
			t.Errorf("algSelection past the string block: %+v", st)
		}
		bad := []capi.ExtIn{{Kind: capi.ExtStr, StrOff: 0, StrLen: 9}}
		if st := call(capi.CollIn{Size: 64, Version: 23102, NExt: 1}, bad, "abc"); st.Code != 4 {
			t.Errorf("an ext string past the block: %+v", st)
		}
		if st := call(capi.CollIn{Size: 64, Version: 23102, NExt: 1}, []capi.ExtIn{{Kind: 7}}, ""); st.Code != 4 {
			t.Errorf("an ext of unknown kind: %+v", st)
		}
		if st := capi.CollConfigCall(capi.CollKindMax, 0, 0, 1, 7, 0, 0, comm, 0, &in, nil, nil); st.Code != 4 {
			t.Errorf("an unknown collective: %+v", st)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		comm := rawComm(t, 1)
		in := capi.CollIn{Size: 40, Version: 23100, AlgLen: -1}
		if st := capi.CollConfigCall(capi.CollAllReduce, 0x1000, 0x1000, 1, 7, 0, 0, comm, 0, &in, nil, nil); st.Code != capi.Missing {
			t.Errorf("2.30.7: %+v, want Missing", st)
		}
	})
}

package versions

import (
	"strings"
	"testing"
)

// The declared version of each struct, per release: the rules the root
// package encodes by and nccl4go info reports by.
func TestDeclared(t *testing.T) {
	for _, tc := range []struct {
		r                             int
		config, coll, props, reqs, rt int // rt: the requirements version with useRuntimeVersion
		collSize, reqsSize            int
		runtimeSize                   bool
	}{
		{21901, 21901, 21901, 21901, 21901, 21901, 40, 24, false},
		{22803, 22803, 22803, 22803, 22803, 22803, 40, 24, false},
		{23007, 23007, 23007, 23007, 23007, 23007, 40, 96, false},
		{23100, 23100, 23100, 23100, 23100, 23100, 40, 112, true},
		{23102, 23102, 23102, 23102, 23102, 23102, 64, 120, true},
		// A future 2.31 release: the properties in its own version (the
		// 144-byte layout, with the ncclDevComm_t size), the requirements
		// in 2.30.7's unless useRuntimeVersion.
		{23105, 23105, 23102, 23105, 23007, 23102, 64, 96, true},
		// 2.32.3 and later: neither 2.32 layout of the properties nor of
		// the requirements is established.
		{23203, 23203, 23203, 23007, 23007, 23102, 72, 96, false},
		{23300, 23203, 23203, 23007, 23007, 23102, 72, 96, false},
	} {
		if got := ConfigVersion(tc.r); got != tc.config {
			t.Errorf("ConfigVersion(%d) = %d, want %d", tc.r, got, tc.config)
		}
		if l, got := CollConfigDeclared(tc.r); got != tc.coll || l.Size != tc.collSize {
			t.Errorf("CollConfigDeclared(%d) = %+v, %d; want %d bytes, %d", tc.r, l, got, tc.collSize, tc.coll)
		}
		if got := PropsVersion(tc.r); got != tc.props {
			t.Errorf("PropsVersion(%d) = %d, want %d", tc.r, got, tc.props)
		}
		if l, got := DevCommDeclared(tc.r, false); got != tc.reqs || l.ReqsSize != tc.reqsSize {
			t.Errorf("DevCommDeclared(%d, false) = %+v, %d; want %d bytes, %d", tc.r, l, got, tc.reqsSize, tc.reqs)
		}
		if l, got := DevCommDeclared(tc.r, true); got != tc.rt || (got >= 23100) != (l.DevComm == 0) {
			t.Errorf("DevCommDeclared(%d, true) = %+v, %d; want %d", tc.r, l, got, tc.rt)
		}
		if got := RuntimeSizeKnown(tc.r); got != tc.runtimeSize {
			t.Errorf("RuntimeSizeKnown(%d) = %v", tc.r, got)
		}
	}
	if l, v := PropsDeclared(23203); v != 23007 || l.Size != 56 {
		t.Errorf("PropsDeclared(2.32.3) = %+v, %d", l, v)
	}
	if v := SimInfoVersion(23203); v != 23007 {
		t.Errorf("SimInfoVersion(2.32.3) = %d", v)
	}
}

// UseWith: a feature is used only where the release has it; a feature
// the release has and the binding does not use says why; a row that is no
// struct field is used wherever the release has it, but for the
// CUSTOM_STRIDE connection, which follows its stride's field.
func TestUseWith(t *testing.T) {
	for r := 21901; r <= 23300; r++ {
		if r%100 > 20 {
			r += 100 - r%100 - 1
			continue
		}
		for f := range NumFeatures {
			u := f.UseWith(r)
			switch {
			case u.Has != f.In(r), u.Used && !u.Has, (u.Why != "") != (u.Has && !u.Used):
				t.Fatalf("%s on %d: %+v", f.Name(), r, u)
			case Table[f].Struct() == "" && u.Used != u.Has && f != GINConnectionCustomStride:
				t.Fatalf("%s on %d: %+v", f.Name(), r, u)
			}
		}
	}
	for _, tc := range []struct {
		f    Feature
		r    int
		used bool
		why  string
	}{
		{PropsCommHash, 23102, true, ""},
		{PropsCommHash, 23203, false, "its ncclCommProperties_t layout is not established, so the binding asks it in the 2.30.7 layout"},
		{PropsNumLSATeams, 23203, true, ""},
		{ReqsGINType, 23102, true, ""},
		{ReqsGINType, 23105, false, "sent only with DevCommRequirements.UseRuntimeVersion set"},
		{ReqsUseRuntimeVersion, 23105, true, ""},
		{ReqsUseRuntimeVersion, 23203, false, "nor is the ncclCommProperties_t layout that would report its own size, so the binding declares 2.30.7"},
		{ReqsGINStrongSignalsRequired, 23300, true, ""},
		{ConfigNVLSHostMode, 23300, true, ""},
		{CollLaunchCompletionEvent, 23300, true, ""},
		{GINConnectionCustomStride, 23100, true, ""},
		{GINConnectionCustomStride, 23105, false, "its stride (ncclDevCommRequirements_t.ginCustomStride) is not sent to it: sent only with"},
		{GINConnectionCustomStride, 23203, false, "its stride (ncclDevCommRequirements_t.ginCustomStride) is not sent to it: the ncclDevComm_t"},
		{GINTypeEFAGDA, 23203, true, ""},
	} {
		u := tc.f.UseWith(tc.r)
		if u.Used != tc.used || !strings.Contains(u.Why, tc.why) || (tc.why == "") != (u.Why == "") {
			t.Errorf("%s on %d: %+v, want used %v, why %q", tc.f.Name(), tc.r, u, tc.used, tc.why)
		}
	}
}

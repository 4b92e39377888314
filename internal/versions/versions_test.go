package versions

import "testing"

func TestRows(t *testing.T) {
	for f := range NumFeatures {
		row := Table[f]
		if row.Name == "" || row.Since < 20000 || row.Since > 99999 {
			t.Errorf("feature %d: %+v", f, row)
		}
		if s := row.Struct(); (s != "") != (row.Field != "") {
			t.Errorf("%s: struct %q for field %q", row.Name, s, row.Field)
		}
	}
	if got := Fields("ncclConfig_t"); len(got) == 0 || got[0] != ConfigTrafficClass {
		t.Errorf("Fields(ncclConfig_t) = %v", got)
	}
	if !ConfigMaxP2PPeers.In(23003) || ConfigMaxP2PPeers.In(23002) {
		t.Error("In is not since-inclusive")
	}
}

func TestLayoutFor(t *testing.T) {
	for _, tc := range []struct{ r, from int }{{22802, 0}, {22803, 22803}, {22806, 22803}, {22807, 22807},
		{22904, 22902}, {22905, 22905}, {22999, 22905}, {23000, 23000}, {23099, 23000}, {23100, 23100}, {23101, 23100}, {23102, 23102}, {23203, 23102}} {
		l, ok := DevCommLayoutFor(tc.r)
		if ok != (tc.from != 0) || l.From != tc.from {
			t.Errorf("DevCommLayoutFor(%d) = %+v, %v; want from %d", tc.r, l, ok, tc.from)
		}
	}
	for _, tc := range []struct{ v, from int }{{22901, 0}, {22902, 22902}, {22906, 22902}, {22907, 22907}, {23007, 22907}} {
		l, ok := PropsLayoutFor(tc.v)
		if ok != (tc.from != 0) || l.From != tc.from {
			t.Errorf("PropsLayoutFor(%d) = %+v, %v; want from %d", tc.v, l, ok, tc.from)
		}
	}
}

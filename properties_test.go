package nccl_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Communicator properties (ncclCommQueryProperties) against the fake NCCL,
// which fills ncclCommProperties_t as each release does
// (ncclCommProperties_t of NCCL's nccl.h, 2.29.2 through 2.30.7, and the
// version rules of src/init.cc).

// propsAccessors calls every property accessor.
func propsAccessors(c *nccl.Communicator) map[string]error {
	errs := map[string]error{}
	_, errs["CUDADevice"] = c.CUDADevice()
	_, errs["NVMLDevice"] = c.NVMLDevice()
	_, errs["DeviceAPISupport"] = c.DeviceAPISupport()
	_, errs["MultimemSupport"] = c.MultimemSupport()
	_, errs["GINType"] = c.GINType()
	_, errs["NumLSATeams"] = c.NumLSATeams()
	_, errs["HostRMASupport"] = c.HostRMASupport()
	_, errs["RailedGINType"] = c.RailedGINType()
	_, errs["Properties"] = c.Properties()
	_, errs["CommHash"] = c.CommHash()
	_, errs["GINMinStride"] = c.GINMinStride()
	_, errs["GINConnectionType"] = c.GINConnectionType()
	_, errs["GINSupport"] = c.GINSupport()
	_, errs["DevCommRuntimeVersionSize"] = c.DevCommRuntimeVersionSize()
	return errs
}

func TestPropertiesBefore2292(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		c := collComm(t, 1, 0, 1)
		for round := 0; round < 2; round++ {
			for name, err := range propsAccessors(c) {
				wantUnsupportedLoaded(t, name, err, "ncclCommQueryProperties", 22902, 22803)
			}
		}
		// The identity does not need the properties.
		if r, err := c.Rank(); err != nil || r != 0 {
			t.Errorf("Rank = %d, %v", r, err)
		}
		if n := faketest.Calls(t, "ncclCommQueryProperties"); n != 0 {
			t.Errorf("the missing function was called %d times", n)
		}
	})
}

// 2.29.2: the 40-byte layout, ginType in one byte at offset 34; the later
// fields are unsupported.
func TestProperties2292(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22902, Extra: []string{"FAKE_NCCL_GIN_TYPE=3"}}, func(t *testing.T) {
		c := collComm(t, 1, 0, 1)
		p, err := c.Properties()
		if err != nil {
			t.Fatalf("Properties: %v", err)
		}
		want := nccl.Properties{Rank: 0, NRanks: 1, CUDADevice: 1, NVMLDevice: 2, DeviceAPISupport: true,
			MultimemSupport: false, GINType: nccl.GINGDAKI, Declared: 22902}
		if p != want {
			t.Errorf("Properties = %+v, want %+v", p, want)
		}
		if g, err := c.GINType(); err != nil || g != nccl.GINGDAKI {
			t.Errorf("GINType = %s, %v; want GDAKI from the 1-byte field", g, err)
		}
		if d, err := c.CUDADevice(); err != nil || d != 1 {
			t.Errorf("CUDADevice = %d, %v", d, err)
		}
		if d, err := c.NVMLDevice(); err != nil || d != 2 {
			t.Errorf("NVMLDevice = %d, %v", d, err)
		}
		if ok, err := c.DeviceAPISupport(); err != nil || !ok {
			t.Errorf("DeviceAPISupport = %v, %v", ok, err)
		}
		if ok, err := c.MultimemSupport(); err != nil || ok {
			t.Errorf("MultimemSupport = %v, %v", ok, err)
		}
		_, err = c.NumLSATeams()
		wantUnsupportedLoaded(t, "NumLSATeams", err, "ncclCommProperties_t.nLsaTeams", 22907, 22902)
		_, err = c.HostRMASupport()
		wantUnsupportedLoaded(t, "HostRMASupport", err, "ncclCommProperties_t.hostRmaSupport", 22907, 22902)
		_, err = c.RailedGINType()
		wantUnsupportedLoaded(t, "RailedGINType", err, "ncclCommProperties_t.railedGinType", 22907, 22902)
		// JSON shows the unknown fields as null.
		b, err := json.Marshal(p)
		if err != nil || !strings.Contains(string(b), `"num_lsa_teams":null`) || !strings.Contains(string(b), `"gin_type":"NCCL_GIN_TYPE_GDAKI"`) {
			t.Errorf("JSON: %s, %v", b, err)
		}
	})
}

// Every field, on 2.29.7, 2.30.x, 2.31 (the 144-byte layout, declaring
// the library's own release), 2.32.3 (whose layout is not established:
// asked in the 2.30 layout, the 2.31 fields not reported) and a future 2.31
// release the binding does not know.
func TestPropertiesAllFields(t *testing.T) {
	extra := []string{"FAKE_NCCL_GIN_TYPE=2", "FAKE_NCCL_RAILED_GIN_TYPE=3", "FAKE_NCCL_HOST_RMA=1",
		"FAKE_NCCL_NVML_DEV=7", "FAKE_NCCL_MULTIMEM=1", "FAKE_NCCL_GIN_CONNECTION=1"}
	for _, tc := range []struct {
		name             string
		release, version int
		declared         nccl.Release
		v231             bool // the 2.31 fields are reported
	}{
		{"2.29.7", 22907, 0, 22907, false},
		{"2.30.3", 23003, 0, 23003, false},
		{"2.30.7", 23007, 0, 23007, false},
		{"2.31.0a16", 23100, 0, 23100, true},
		{"2.31.2", 23102, 0, 23102, true},
		{"future 2.31.5", 23007, 23105, 23105, true},
		{"2.32.3", 23203, 0, 23007, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faketest.Run(t, faketest.Env{Release: tc.release, Version: tc.version, Extra: extra}, func(t *testing.T) {
				c := collComm(t, 1, 0, 1)
				p, err := c.Properties()
				if err != nil {
					t.Fatalf("Properties: %v", err)
				}
				if p.NumLSATeams == nil || p.HostRMASupport == nil || p.RailedGINType == nil {
					t.Fatalf("Properties = %+v: the 2.29.7 fields are missing", p)
				}
				if tc.v231 != (p.CommHash != nil) || tc.v231 != (p.GINMinStride != nil) || tc.v231 != (p.GINConnectionType != nil) ||
					tc.v231 != (p.GINSupport != nil) || tc.v231 != (p.DevCommRuntimeVersionSize != nil) {
					t.Fatalf("Properties = %+v: the 2.31 fields reported: %v, want %v", p, p.CommHash != nil, tc.v231)
				}
				if tc.v231 {
					// The fake: a FULL connection has stride 1; GIN type 2
					// (PROXY) is the one supported; its devComm is 256 bytes.
					if *p.CommHash == 0 || *p.GINMinStride != 1 || *p.GINConnectionType != nccl.GINConnectionFull ||
						*p.GINSupport != 1<<nccl.GINProxy || !p.GINSupport.Has(nccl.GINProxy) || p.GINSupport.Has(nccl.GINEFAGDA) ||
						*p.DevCommRuntimeVersionSize != 256 {
						t.Errorf("2.31 fields: hash %#x, stride %d, connection %s, support %s, devComm %d",
							*p.CommHash, *p.GINMinStride, *p.GINConnectionType, *p.GINSupport, *p.DevCommRuntimeVersionSize)
					}
					b, err := json.Marshal(p)
					if err != nil || !strings.Contains(string(b), `"gin_support":["NCCL_GIN_TYPE_PROXY"]`) ||
						!strings.Contains(string(b), `"gin_connection_type":1`) {
						t.Errorf("JSON: %s, %v", b, err)
					}
				}
				got := p
				got.NumLSATeams, got.HostRMASupport, got.RailedGINType = nil, nil, nil
				got.CommHash, got.GINMinStride, got.GINConnectionType, got.GINSupport, got.DevCommRuntimeVersionSize = nil, nil, nil, nil, nil
				want := nccl.Properties{Rank: 0, NRanks: 1, CUDADevice: 1, NVMLDevice: 7, DeviceAPISupport: true,
					MultimemSupport: true, GINType: nccl.GINProxy, Declared: tc.declared}
				if got != want || *p.NumLSATeams != 1 || !*p.HostRMASupport || *p.RailedGINType != nccl.GINGDAKI {
					t.Errorf("Properties = %+v (nLsaTeams %d, hostRma %v, railed %s), want %+v, 1, true, GDAKI",
						got, *p.NumLSATeams, *p.HostRMASupport, *p.RailedGINType, want)
				}
				if n, err := c.NumLSATeams(); err != nil || n != 1 {
					t.Errorf("NumLSATeams = %d, %v", n, err)
				}
				if ok, err := c.HostRMASupport(); err != nil || !ok {
					t.Errorf("HostRMASupport = %v, %v", ok, err)
				}
				if g, err := c.RailedGINType(); err != nil || g != nccl.GINGDAKI {
					t.Errorf("RailedGINType = %s, %v", g, err)
				}
				if g, err := c.GINType(); err != nil || g != nccl.GINProxy {
					t.Errorf("GINType = %s, %v", g, err)
				}
				// The caller's copy is its own.
				*p.NumLSATeams = 99
				if again, _ := c.Properties(); *again.NumLSATeams != 1 {
					t.Error("changing a returned Properties changed the cached one")
				}
				// The accessors: the same values, or the refusal.
				hash, err1 := c.CommHash()
				stride, err2 := c.GINMinStride()
				conn, err3 := c.GINConnectionType()
				set, err4 := c.GINSupport()
				size, err5 := c.DevCommRuntimeVersionSize()
				for i, err := range []error{err1, err2, err3, err4, err5} {
					switch {
					case tc.v231 && err != nil:
						t.Errorf("accessor %d: %v", i, err)
					case !tc.v231 && !errors.Is(err, nccl.ErrUnsupported):
						t.Errorf("accessor %d on %s: %v, want ErrUnsupported", i, tc.name, err)
					case !tc.v231 && tc.release >= 23200 && !strings.Contains(err.Error(), "not established"):
						t.Errorf("accessor %d on %s: %q does not say why", i, tc.name, err)
					}
				}
				if tc.v231 && (hash != *p.CommHash || stride != 1 || conn != nccl.GINConnectionFull || set != *p.GINSupport || size != 256) {
					t.Errorf("accessors: %#x %d %s %s %d", hash, stride, conn, set, size)
				}
				if tc.release < 23100 && tc.version == 0 {
					wantUnsupportedLoaded(t, "CommHash", err1, "ncclCommProperties_t.commHash", 23100, nccl.Release(tc.release))
				}
				if tc.v231 {
					*p.CommHash, *p.GINSupport = 0, 0
					if again, _ := c.Properties(); *again.CommHash == 0 || *again.GINSupport == 0 {
						t.Error("changing a returned Properties' 2.31 fields changed the cached one")
					}
				}
			})
		})
	}
}

// The query runs once per communicator, however many accessors are called
// (on 2.31.2, where every accessor has its field).
func TestPropertiesQueriedOnce(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		c := collComm(t, 1, 0, 1)
		for range 3 {
			for name, err := range propsAccessors(c) {
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
		if n := faketest.Calls(t, "ncclCommQueryProperties"); n != 1 {
			t.Errorf("ncclCommQueryProperties called %d times for one communicator, want 1", n)
		}
		other := collComm(t, 1, 0, 1)
		if _, err := other.GINType(); err != nil {
			t.Fatal(err)
		}
		if n := faketest.Calls(t, "ncclCommQueryProperties"); n != 2 {
			t.Errorf("ncclCommQueryProperties called %d times for two communicators, want 2", n)
		}
	})
	// A failed query is not cached as an answer: it is asked again.
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FAIL=ncclCommQueryProperties=3@1"}}, func(t *testing.T) {
		c := collComm(t, 1, 0, 1)
		_, err := c.GINType()
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InternalError || !strings.Contains(ne.Detail, "ncclCommQueryProperties") {
			t.Fatalf("GINType with a failing query: %v", err)
		}
		if g, err := c.GINType(); err != nil || g != nccl.GINNone {
			t.Errorf("GINType after the failure = %s, %v", g, err)
		}
		if n := faketest.Calls(t, "ncclCommQueryProperties"); n != 2 {
			t.Errorf("ncclCommQueryProperties called %d times, want 2", n)
		}
	})
}

package faketest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Each release variant of the fake NCCL exports exactly the functions of
// the shim's list whose first release it has.
func TestVariantsExportTheirReleasesSymbols(t *testing.T) {
	for _, r := range []int{21901, 22203, 22304, 22703, 22803, 22807, 22902, 22907, 23007, 23100, 23102, 23203} {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			faketest.Run(t, faketest.Env{Release: r}, func(t *testing.T) {
				if msg, ok := capi.LoadNCCL(os.Getenv("NCCL_LIBRARY")); !ok {
					t.Fatalf("LoadNCCL: %s", msg)
				}
				v, st := capi.GetVersion()
				if st.Code != 0 || v != r {
					t.Fatalf("GetVersion = %d, %+v; want %d", v, st, r)
				}
				syms := capi.NCCLSymbols()
				if len(syms) < 50 {
					t.Fatalf("only %d symbols in the shim's list", len(syms))
				}
				for _, s := range syms {
					if want := s.Since <= r; s.Present != want {
						t.Errorf("%s (since %d): present %v in the %d variant, want %v", s.Name, s.Since, s.Present, r, want)
					}
				}
			})
		})
	}
}

// The notnccl variant is rejected by the loader for lacking ncclGetVersion.
func TestNotNCCL(t *testing.T) {
	faketest.Run(t, faketest.Env{NotNCCL: true}, func(t *testing.T) {
		msg, ok := capi.LoadNCCL(os.Getenv("NCCL_LIBRARY"))
		if ok || !strings.Contains(msg, "ncclGetVersion") {
			t.Fatalf("LoadNCCL = %q, %v; want a failure naming ncclGetVersion", msg, ok)
		}
	})
}

// Run runs only the scenario of the calling test, also when a test runs
// several scenarios and subtests; the environment reaches the child, and
// the log records the calls.
func TestRunSelectsOneScenario(t *testing.T) {
	faketest.Run(t, faketest.Env{Version: 22905, Extra: []string{"FAKETEST_PROBE=first"}}, func(t *testing.T) {
		if got := os.Getenv("FAKETEST_PROBE"); got != "first" {
			t.Fatalf("FAKETEST_PROBE = %q in the first scenario", got)
		}
		if msg, ok := capi.LoadNCCL(os.Getenv("NCCL_LIBRARY")); !ok {
			t.Fatal(msg)
		}
		if v, _ := capi.GetVersion(); v != 22905 {
			t.Fatalf("version %d, want the FAKE_NCCL_VERSION 22905", v)
		}
		capi.GetVersion()
		if n := faketest.Calls(t, "ncclGetVersion"); n != 2 {
			t.Fatalf("%d ncclGetVersion calls logged, want 2: %q", n, faketest.LogLines(t))
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKETEST_PROBE=second"}}, func(t *testing.T) {
		if got := os.Getenv("FAKETEST_PROBE"); got != "second" {
			t.Fatalf("FAKETEST_PROBE = %q in the second scenario", got)
		}
		if faketest.LogLines(t) != nil {
			t.Fatalf("a fresh child has a log: %q", faketest.LogLines(t))
		}
	})
	t.Run("sub test", func(t *testing.T) {
		faketest.Run(t, faketest.Env{Extra: []string{"FAKETEST_PROBE=sub"}}, func(t *testing.T) {
			if got := os.Getenv("FAKETEST_PROBE"); got != "sub" {
				t.Fatalf("FAKETEST_PROBE = %q in the subtest", got)
			}
			if !strings.HasSuffix(t.Name(), "/sub_test") {
				t.Fatalf("running %s", t.Name())
			}
		})
	})
	if !faketest.InChild() && len(faketest.LogLines(t)) != 0 {
		t.Fatalf("the second scenario's log is not empty: %q", faketest.LogLines(t))
	}
}

func TestRunPattern(t *testing.T) {
	if got, want := faketest.RunPattern("TestA/b.c/[d]"), `^TestA$/^b\.c$/^\[d\]$`; got != want {
		t.Fatalf("RunPattern = %q, want %q", got, want)
	}
}

package faketest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The fake NCCL's per-collective configuration (ncclCollConfig_t and the
// eight nccl*Config collectives, 2.31), driven from C
// (testdata/collconfig_probe.c) with structs the binding never sends
// (sizes and versions that do not match, bad magic). The
// rules are those of STyGIANet/nccl 2.31.0a16 src/config/collconfig.cc;
// the layouts those of nccl4py's bindings of 2.31.2 (64 bytes) and of the
// 2.32.3 documentation (72 bytes, launchCompletionEvent).
func TestFakeCollConfig(t *testing.T) {
	if !loadable {
		t.Skip("faketest: the fakes are built only with cgo on Linux")
	}
	_, file, _, _ := runtime.Caller(0)
	probe := filepath.Join(t.TempDir(), "probe")
	cc := compiler()
	args := append(append([]string{}, cc[1:]...), "-std=gnu11", "-o", probe,
		filepath.Join(filepath.Dir(file), "testdata", "collconfig_probe.c"), "-ldl")
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	run := func(t *testing.T, release int, cases ...string) string {
		t.Helper()
		ncclPath, cudaPath := Libraries(t, Env{Release: release})
		cmd := exec.Command(probe, cases...)
		cmd.Env = append(os.Environ(), "NCCL_LIBRARY="+ncclPath, "NCCL4GO_CUDA_LIBRARY="+cudaPath, "FAKE_NCCL_LOG=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe %v on %d: %v\n%s", cases, release, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Run("symbols", func(t *testing.T) {
		for release, want := range map[int]string{23007: "00000000", 23100: "11111111", 23102: "11111111", 23203: "11111111"} {
			if got := run(t, release, "syms"); got != want {
				t.Errorf("%d: entry points %s, want %s", release, got, want)
			}
		}
	})
	// Results: 0 success, 4 ncclInvalidArgument, 3 the fake's report of a
	// config NCCL would copy past its own struct.
	for _, c := range []struct {
		release int
		cases   []string
		want    string
	}{
		// 2.31.0a16: the 40-byte struct.
		{23100, []string{"null", "39:23100:cafebeef", "40:23100:cafebeef", "40:23100:cafebee0", "64:23100:cafebeef", "64:23102:cafebeef", "72:23203:cafebeef", "count"}, "0 4 0 4 3 0 0 4"},
		// 2.31.2: 64 bytes; 2.32.3's 72-byte struct declaring 23203 is read for 64.
		{23102, []string{"null", "40:23102:cafebeef", "64:23102:cafebeef", "72:23102:cafebeef", "72:23203:cafebeef", "8:23102:cafebeef"}, "0 0 0 3 0 4"},
		// 2.32.3: 72 bytes.
		{23203, []string{"72:23203:cafebeef", "64:23102:cafebeef", "80:23203:cafebeef", "80:23300:cafebeef"}, "0 0 3 0"},
		// ncclConfig_t's 2.31 fields (src/init.cc parseCommConfig of
		// 2.31.0a16): launchOrderImplicit 0 or 1, numRmaSig >= 0, checked
		// from config version 2.31.0; a 2.30.7 library reads 96 bytes only.
		{23100, []string{"config:112:23100:1:4", "config:112:23100:2:1", "config:112:23100:0:-1", "config:112:23007:2:-1"}, "0 4 4 0"},
		{23007, []string{"config:112:23100:2:-1"}, "0"},
		// nvlsHostMode (2.32.3, at 112): unset, any OR of 1 and 2, or
		// INT_MAX; read only from a 120-byte struct by a 2.32.3 library.
		{23203, []string{"nvls:120:23203:3", "nvls:120:23203:2147483647", "nvls:120:23203:0", "nvls:120:23203:-2147483648",
			"nvls:120:23203:4", "nvls:120:23203:-1", "nvls:120:23203:2147483646", "nvls:112:23102:4"}, "0 0 0 0 4 4 4 0"},
		{23102, []string{"nvls:120:23203:4", "nvls:120:23102:4"}, "0 0"},
	} {
		if got := run(t, c.release, c.cases...); got != c.want {
			t.Errorf("%d: %v gave %q, want %q", c.release, c.cases, got, c.want)
		}
	}
}

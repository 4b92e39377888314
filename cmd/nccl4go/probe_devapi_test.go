package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// TestFakeProbeDevicePaths: probe lists which device-API paths this
// machine can run, each with its reason.
func TestFakeProbeDevicePaths(t *testing.T) {
	var headers, nvrtcLib string
	if !faketest.InChild() {
		headers = t.TempDir()
		os.WriteFile(filepath.Join(headers, "nccl.h"), []byte("#define NCCL_MAJOR 2\n#define NCCL_MINOR 30\n#define NCCL_PATCH 7\n"), 0o644)
		os.WriteFile(filepath.Join(headers, "nccl_device.h"), nil, 0o644)
		nvrtcLib = faketest.NVRTCLibrary(t)
	}
	env := faketest.Env{Devices: 2, Extra: []string{"FAKE_NCCL_MULTIMEM=0", "FAKE_NCCL_GIN_TYPE=0",
		"NCCL4GO_NCCL_INCLUDE=" + headers, "NCCL4GO_NVRTC_LIBRARY=" + nvrtcLib,
		"NCCL4GO_NVCC=", "PATH=/nowhere", "CUDA_HOME=/nowhere", "NCCL4GO_NVJITLINK_LIBRARY=/nowhere/libnvJitLink.so.13"}}
	faketest.Run(t, env, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`(?m)^device-API paths:$`,
			`(?m)^  LSA kernels +yes  device communicators`,
			`(?m)^  multimem kernels +no   devapi: multimem kernels cannot run on this communicator: the communicator reports no multimem support`,
			`(?m)^  GIN kernels +no   .*GIN type NCCL_GIN_TYPE_NONE`,
			`(?m)^  NCCL device headers +yes  ` + regexp.QuoteMeta(os.Getenv("NCCL4GO_NCCL_INCLUDE")) + ` \(NCCL 2\.30\.7\)$`,
			`(?m)^  NVRTC +yes  .*\(13\.0\)$`,
			`(?m)^  nvcc +no   devapi: no nvcc`,
			`(?m)^  nvJitLink \(LTO\) +no   nvrtc: nvJitLink not found: tried /nowhere/libnvJitLink.so.13`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("probe output lacks %s", want)
			}
		}
		out, _, err = runCLI(t, "probe", "-json")
		if err != nil || !strings.Contains(out, `"device_api_paths": [`) || !strings.Contains(out, `"path": "LSA kernels"`) {
			t.Errorf("probe -json: %v; no device_api_paths", err)
		}
	})
}

// TestFakeProbeLSATried: probe says LSA kernels can run only when a device
// communicator was created. On the H200, NCCL 2.28.3 printed "yes" for a
// one-rank communicator whose ncclDevCommCreate it refuses.
func TestFakeProbeLSATried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     faketest.Env
		want    string
		creates int // ncclDevCommCreate calls
	}{
		{"one rank on 2.28.3", faketest.Env{Release: 22803, Devices: 1},
			`(?m)^  LSA kernels +no   devapi: LSA kernels cannot run on this communicator: NCCL 2\.28\.3 gives symmetric memory.* at least 2 ranks on the node, and this one has 1 rank \(NCCL 2\.28\.7 lifts this\)$`, 0},
		{"two ranks on 2.28.3", faketest.Env{Release: 22803, Devices: 2},
			`(?m)^  LSA kernels +yes  device communicators and load/store-accessible windows \(a device communicator was created\)$`, 2},
		{"no symmetric memory on 2.28.7", faketest.Env{Release: 22807, Devices: 2, Extra: []string{"FAKE_NCCL_NO_SYMMETRIC=1"}},
			`(?m)^  LSA kernels +no   nccl: CreateDevComm: no symmetric memory on this communicator.*Communicator does not support symmetric memory!`, 2},
		{"one rank on 2.30.7", faketest.Env{Release: 23007, Devices: 1},
			`(?m)^  LSA kernels +yes  device communicators .*\(a device communicator was created\)$`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faketest.Run(t, tc.env, func(t *testing.T) {
				out, _, err := runCLI(t, "probe")
				if err != nil {
					t.Fatal(err)
				}
				if !regexp.MustCompile(tc.want).MatchString(out) {
					t.Errorf("probe output lacks %s:\n%s", tc.want, out)
				}
				if n := faketest.Calls(t, "ncclDevCommCreate"); n != tc.creates {
					t.Errorf("%d ncclDevCommCreate calls, want %d (one per rank, when the properties allow)", n, tc.creates)
				}
				if n, m := faketest.Calls(t, "ncclDevCommCreate"), faketest.Calls(t, "ncclDevCommDestroy"); tc.creates > 0 && m != n && !strings.Contains(out, "no symmetric") {
					t.Errorf("%d device communicators created, %d destroyed", n, m)
				}
			})
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childArgsEnv, when set in a re-run of the test binary, makes it run the
// command line it holds (a JSON array) instead of the tests, and exit with
// the command's status: a fresh process, so that libraries load as the
// environment says.
const childArgsEnv = "NCCL4GO_CLI_TEST_ARGS"

func TestMain(m *testing.M) {
	maybeSupervise() // the launcher's tests start this binary as the ranks' supervisor
	if s, ok := os.LookupEnv(childArgsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			os.Stderr.WriteString("bad " + childArgsEnv + ": " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(mainExit(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runChild runs `nccl4go args...` in a child process with env added.
func runChild(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	a, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("running %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// skipWithoutCgo skips a test in a build that cannot load C libraries at
// all (CGO_ENABLED=0, or not Linux).
func skipWithoutCgo(t *testing.T) {
	t.Helper()
	if !loadsCLibraries {
		t.Skip("built without cgo or not for Linux: no library can be loaded")
	}
}

// missingLibs points both libraries at files that do not exist.
var missingLibs = []string{
	ncclLibraryEnv + "=/nonexistent/nccl4go-test/libnccl.so.2",
	cudaLibraryEnv + "=/nonexistent/nccl4go-test/libcuda.so.1",
}

// Usage errors are found before any library loads, so they run in-process.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{nil, "no command given"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"-json"}, `unknown command "-json"`},
		{[]string{"info", "-x"}, "info: unknown shorthand flag: 'x' in -x"},
		{[]string{"info", "-bogus"}, "info: unknown flag: --bogus"},
		{[]string{"info", "extra"}, `unexpected argument "extra"`},
		{[]string{"probe", "-devices", "a"}, `"a" is not a device ordinal`},
		{[]string{"probe", "-devices", "0,,1"}, `"" is not a device ordinal`},
		{[]string{"probe", "-devices", "-1"}, `"-1" is not a device ordinal`},
		{[]string{"probe", "-timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"probe", "-timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"probe", "0"}, `unexpected argument "0"`},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errb)
		var uerr *usageError
		if !errors.As(err, &uerr) {
			t.Errorf("run(%q) = %v, want a usage error", tc.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %q, want it to contain %q", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("run(%q) wrote to stdout: %q", tc.args, out.String())
		}
		errb.Reset()
		if code := mainExit(tc.args, &out, &errb); code != 2 {
			t.Errorf("mainExit(%q) = %d, want 2", tc.args, code)
		}
		// The error, then the usage: all of it for no command (the list of
		// commands), else a line saying where to read it.
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		switch {
		case len(tc.args) == 0:
			if !strings.Contains(errb.String(), "Usage: nccl4go <command>") {
				t.Errorf("mainExit(%q) printed no usage on stderr:\n%s", tc.args, errb.String())
			}
		case len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'nccl4go ") || !strings.HasSuffix(lines[1], " -h' for usage."):
			t.Errorf("mainExit(%q) printed not one line and a hint on stderr:\n%s", tc.args, errb.String())
		}
	}
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"Usage: nccl4go <command>", "info", "probe", ncclLibraryEnv}},
		{[]string{"help"}, []string{"info", "probe"}},
		{[]string{"info", "-h"}, []string{"Usage: nccl4go info", "-json"}},
		{[]string{"probe", "-h"}, []string{"Usage: nccl4go probe", "-json", "-devices", "-timeout"}},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), tc.args, &out, &errb); !errors.Is(err, errHelp) {
			t.Errorf("run(%q) = %v, want errHelp", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("run(%q) stdout lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		if code := mainExit(tc.args, &out, &errb); code != 0 {
			t.Errorf("mainExit(%q) = %d, want 0", tc.args, code)
		}
	}
}

func TestInfoWithoutLibraries(t *testing.T) {
	stdout, stderr, code := runChild(t, missingLibs, "info")
	skipWithoutCgo(t)
	if code != 0 {
		t.Fatalf("info exited %d, want 0 (a diagnosis)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"NCCL", "not found", "/nonexistent/nccl4go-test/libnccl.so.2", "set NCCL_LIBRARY=/path/to/libnccl.so.2",
		"CUDA driver", "/nonexistent/nccl4go-test/libcuda.so.1", "set NCCL4GO_CUDA_LIBRARY=/path/to/libcuda.so.1",
		"no GPU",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("info output lacks %q:\n%s", want, stdout)
		}
	}
	if stderr != "" {
		t.Errorf("info wrote to stderr: %s", stderr)
	}
}

func TestInfoJSONWithoutLibraries(t *testing.T) {
	stdout, stderr, code := runChild(t, missingLibs, "info", "-json")
	skipWithoutCgo(t)
	if code != 0 {
		t.Fatalf("info -json exited %d\nstderr:\n%s", code, stderr)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("info -json output does not parse: %v\n%s", err, stdout)
	}
	if p := rep.NCCL.Problem; p == nil || !strings.Contains(p.Reason, "/nonexistent/nccl4go-test/libnccl.so.2") || !strings.Contains(p.Fix, ncclLibraryEnv) {
		t.Errorf("nccl.problem = %+v", p)
	}
	if rep.NCCL.Version != "" || rep.NCCL.Path != "" {
		t.Errorf("nccl = %+v, want no version or path", rep.NCCL)
	}
	if p := rep.CUDA.Problem; p == nil || !strings.Contains(p.Reason, "/nonexistent/nccl4go-test/libcuda.so.1") || !strings.Contains(p.Fix, cudaLibraryEnv) {
		t.Errorf("cuda_driver.problem = %+v", p)
	}
	if rep.GPUs == nil || len(rep.GPUs) != 0 || rep.GPUProblem == nil || !strings.Contains(rep.GPUProblem.Reason, "no GPU") {
		t.Errorf("gpus = %v, gpu_problem = %+v; want [] and a no-GPU problem", rep.GPUs, rep.GPUProblem)
	}
	if !strings.Contains(stdout, `"gpus": []`) {
		t.Errorf("gpus is not an empty array:\n%s", stdout)
	}
}

func TestProbeWithoutLibraries(t *testing.T) {
	for _, args := range [][]string{{"probe"}, {"probe", "-json"}, {"probe", "-devices", "0"}} {
		stdout, stderr, code := runChild(t, missingLibs, args...)
		skipWithoutCgo(t)
		if code != 1 {
			t.Errorf("%q exited %d, want 1\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
		if stdout != "" {
			t.Errorf("%q wrote to stdout: %s", args, stdout)
		}
		for _, want := range []string{
			"cannot probe", "NCCL: not found", "/nonexistent/nccl4go-test/libnccl.so.2",
			"set NCCL_LIBRARY=/path/to/libnccl.so.2", "no GPU", "set NCCL4GO_CUDA_LIBRARY=",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%q stderr lacks %q:\n%s", args, want, stderr)
			}
		}
	}
}

// probeDoc is `probe -json` as a client reads it, GIN types as strings.
type probeDoc struct {
	NCCL  probeNCCL `json:"nccl"`
	Ranks []struct {
		Rank       int    `json:"rank"`
		NRanks     int    `json:"nranks"`
		Device     int    `json:"cuda_device"`
		GPU        string `json:"gpu"`
		PCIBusID   string `json:"pci_bus_id"`
		Properties *struct {
			Rank             int     `json:"rank"`
			NRanks           int     `json:"nranks"`
			CUDADevice       int     `json:"cuda_device"`
			NVMLDevice       int     `json:"nvml_device"`
			DeviceAPISupport bool    `json:"device_api_support"`
			MultimemSupport  bool    `json:"multimem_support"`
			GINType          string  `json:"gin_type"`
			NumLSATeams      *int    `json:"num_lsa_teams"`
			HostRMASupport   *bool   `json:"host_rma_support"`
			RailedGINType    *string `json:"railed_gin_type"`
		} `json:"properties"`
		PropertiesError string `json:"properties_error"`
	} `json:"ranks"`
	Notes []string `json:"notes"`
}

// decodeProbe parses `probe -json`.
func decodeProbe(t *testing.T, out string) probeDoc {
	t.Helper()
	var doc probeDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("probe -json does not parse: %v\n%s", err, out)
	}
	return doc
}

package devapi_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/devapi"
	"github.com/nccl4go/nccl/internal/faketest"
)

func TestMain(m *testing.M) { os.Exit(faketest.Main(m)) }

// headerDir writes an include directory with an nccl.h of release r and,
// when device, an nccl_device.h (the fake NVRTC only checks it exists).
func headerDir(t *testing.T, r nccl.Release, device bool) string {
	t.Helper()
	dir := t.TempDir()
	major, minor, patch := int(r)/10000, int(r)/100%100, int(r)%100
	h := "#define NCCL_MAJOR " + itoa(major) + "\n#define NCCL_MINOR " + itoa(minor) + "\n#define NCCL_PATCH " + itoa(patch) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "nccl.h"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	if device {
		os.WriteFile(filepath.Join(dir, "nccl_device.h"), []byte("#include \"nccl.h\"\n"), 0o644)
	}
	return dir
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		if n /= 10; n == 0 {
			return s
		}
	}
}

func TestFindHeaders(t *testing.T) {
	var good, old, noDevice string
	if !faketest.InChild() {
		good, old, noDevice = headerDir(t, 23007, true), headerDir(t, 22803, true), headerDir(t, 23007, false)
	}
	faketest.Run(t, faketest.Env{Extra: []string{devapi.HeadersEnv + "=" + good}}, func(t *testing.T) {
		h, err := devapi.FindHeaders("")
		if err != nil || h.Dir != os.Getenv(devapi.HeadersEnv) || h.Release != 23007 {
			t.Fatalf("FindHeaders from %s = %+v, %v", devapi.HeadersEnv, h, err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"TEST_OLD=" + old, "TEST_NODEVICE=" + noDevice}}, func(t *testing.T) {
		for _, c := range []struct{ dir, want string }{
			{os.Getenv("TEST_OLD"), "NCCL 2.28.3 headers, the loaded library is 2.30.7"},
			{os.Getenv("TEST_NODEVICE"), "nccl.h without nccl_device.h"},
			{"/nowhere", "no nccl_device.h"},
		} {
			_, err := devapi.FindHeaders(c.dir)
			var he *devapi.HeadersError
			if !errors.As(err, &he) || !errors.Is(err, devapi.ErrNoHeaders) || !errors.Is(err, nccl.ErrUnsupported) ||
				!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), devapi.HeadersEnv) {
				t.Errorf("FindHeaders(%s) = %v; want a *HeadersError saying %q", c.dir, err, c.want)
			}
		}
	})
}

// fakeNVCC is a script standing in for nvcc: it writes a fake CUBIN with
// the ready kernels and logs its arguments.
func fakeNVCC(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvcc")
	script := `#!/bin/sh
[ "$1" = --version ] && { echo "fake nvcc 13.0"; exit 0; }
echo "$@" >> "$0.log"
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
grep -q '#error' "$(ls $(dirname $out)/*.cu)" && { echo "kernel.cu(1): error: boom" >&2; exit 1; }
printf 'FAKECUBIN nvcc\nkernel nccl4go_lsa_allreduce_sum_f32\nkernel nccl4go_lsa_allgather_f32\nkernel nccl4go_devcomm_probe\n' > "$out"
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// readyKernelsEnv is the environment in which devapi.Load finds NCCL
// 2.30.7's headers, the fake NVRTC, a fake nvcc and an empty kernel cache
// (nothing in the child, which inherits it).
func readyKernelsEnv(t *testing.T) faketest.Env {
	t.Helper()
	if faketest.InChild() {
		return faketest.Env{}
	}
	return faketest.Env{Extra: []string{devapi.HeadersEnv + "=" + headerDir(t, 23007, true),
		"NCCL4GO_NVRTC_LIBRARY=" + faketest.NVRTCLibrary(t),
		devapi.NVCCEnv + "=" + fakeNVCC(t), "NCCL4GO_KERNEL_CACHE=" + t.TempDir()}}
}

func TestLoadReadyKernels(t *testing.T) {
	env := readyKernelsEnv(t)
	faketest.Run(t, env, func(t *testing.T) {
		k, err := devapi.Load(devapi.Options{Compiler: devapi.NVRTC})
		if err != nil {
			t.Fatalf("Load with NVRTC: %v", err)
		}
		defer k.Close()
		c := fakeComm(t)
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(4)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		send, recv := window(t, c), window(t, c)
		if err := k.AllReduceSum(cuda.Stream{}, send, 0, recv, 0, 1024, d, 4, 256); err != nil {
			t.Errorf("AllReduceSum: %v", err)
		}
		if err := k.AllGather(cuda.Stream{}, send, 0, recv, 0, 512, d, 4, 256); err != nil {
			t.Errorf("AllGather: %v", err)
		}
		if err := k.AllGather(cuda.Stream{}, send, 0, recv, 0, -1, d, 4, 256); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("AllGather of -1 elements: %v", err)
		}
		if err := k.AllReduceSum(cuda.Stream{}, send, 0, recv, 0, 1024, d, 0, 256); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("AllReduceSum on 0 blocks: %v", err)
		}
		d.Close()
		if err := k.AllReduceSum(cuda.Stream{}, send, 0, recv, 0, 1024, d, 4, 256); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("AllReduceSum with a closed DevComm: %v", err)
		}
		// nvcc, asked for by name.
		k2, err := devapi.Load(devapi.Options{Compiler: devapi.NVCC, NoCache: true})
		if err != nil {
			t.Fatalf("Load with nvcc: %v", err)
		}
		k2.Close()
		args, _ := os.ReadFile(os.Getenv(devapi.NVCCEnv) + ".log")
		if !strings.Contains(string(args), "-cubin -arch=sm_90") || !strings.Contains(string(args), "-I"+os.Getenv(devapi.HeadersEnv)) {
			t.Errorf("nvcc ran with %q", args)
		}
		_, err = devapi.Compile("#error boom\n", devapi.Options{Compiler: devapi.NVCC, NoCache: true})
		var ne *devapi.NVCCError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), "kernel.cu(1): error: boom") {
			t.Errorf("a failing nvcc: %v, want an *NVCCError with its output", err)
		}
	})
	// Without NVRTC, Auto falls back to nvcc; without either, the error
	// names both.
	if !faketest.InChild() {
		env.Extra = append(env.Extra, "NCCL4GO_NVRTC_LIBRARY=/nowhere/libnvrtc.so")
	}
	faketest.Run(t, env, func(t *testing.T) {
		if _, err := devapi.Compile(devapi.Source(), devapi.Options{NoCache: true}); err != nil {
			t.Errorf("Auto without NVRTC: %v, want nvcc's CUBIN", err)
		}
		os.Setenv(devapi.NVCCEnv, "/nowhere/nvcc")
		_, err := devapi.Compile(devapi.Source(), devapi.Options{NoCache: true})
		if err == nil || !strings.Contains(err.Error(), "NVRTC not found") || !strings.Contains(err.Error(), "/nowhere/nvcc") {
			t.Errorf("neither compiler: %v", err)
		}
	})
}

func fakeComm(t *testing.T) *nccl.Communicator {
	t.Helper()
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		t.Fatalf("InitAll: %v", err)
	}
	t.Cleanup(func() { comms[0].Destroy() })
	return comms[0]
}

func window(t *testing.T, c *nccl.Communicator) *nccl.Window {
	t.Helper()
	buf, err := nccl.MemAlloc[float32](0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Free() })
	w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestCapabilityGates(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_MULTIMEM=0", "FAKE_NCCL_GIN_TYPE=0"}}, func(t *testing.T) {
		c := fakeComm(t)
		if err := devapi.RequireLSA(c); err != nil {
			t.Errorf("RequireLSA: %v", err)
		}
		for name, err := range map[string]error{"multimem": devapi.RequireMultimem(c), "GIN": devapi.RequireGIN(c)} {
			var ce *devapi.CapabilityError
			if !errors.As(err, &ce) || ce.Path != name || !errors.Is(err, nccl.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("Require%s = %v, want a *CapabilityError", name, err)
			}
		}
		if err := devapi.RequireGIN(c); !strings.Contains(err.Error(), "GIN type NCCL_GIN_TYPE_NONE") {
			t.Errorf("RequireGIN says %q", err)
		}
		if err := devapi.RequireMultimem(c); !strings.Contains(err.Error(), "no multimem support") {
			t.Errorf("RequireMultimem says %q", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_MULTIMEM=1", "FAKE_NCCL_GIN_TYPE=3"}}, func(t *testing.T) {
		c := fakeComm(t)
		if err := devapi.RequireMultimem(c); err != nil {
			t.Errorf("RequireMultimem with multimem: %v", err)
		}
		if err := devapi.RequireGIN(c); err != nil {
			t.Errorf("RequireGIN with GDAKI: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_NO_SYMMETRIC=1"}}, func(t *testing.T) {
		if err := devapi.RequireLSA(fakeComm(t)); !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "no device-API support") {
			t.Errorf("RequireLSA without device-API support: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		c := fakeComm(t)
		var ce *devapi.CapabilityError
		if err := devapi.RequireLSA(c); !errors.As(err, &ce) || ce.Path != "LSA" || !strings.Contains(err.Error(), "at least 2 ranks") {
			t.Errorf("RequireLSA on one rank of 2.28.3 (never symmetric memory): %v, want a *CapabilityError", err)
		}
		if _, err := c.CreateDevComm(nil); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("CreateDevComm where RequireLSA refuses: %v", err)
		}
		if err := devapi.RequireGIN(c); !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "NCCL 2.28.3 cannot say") {
			t.Errorf("RequireGIN on 2.28.3: %v", err)
		}
	})
	for _, r := range []int{22803, 22807} {
		faketest.Run(t, faketest.Env{Release: r, Devices: 2}, func(t *testing.T) {
			devs := []int{0, 1} // two ranks on 2.28.3, one on 2.28.7: both get symmetric memory
			if r >= 22807 {
				devs = devs[:1]
			}
			comms, err := nccl.InitAll(devs)
			if err != nil {
				t.Fatal(err)
			}
			defer nccl.DestroyAll(comms...)
			if err := devapi.RequireLSA(comms[0]); err != nil {
				t.Errorf("RequireLSA on %d rank(s) of NCCL %d (cannot tell; creating the DevComm decides): %v", len(devs), r, err)
			}
		})
	}
}

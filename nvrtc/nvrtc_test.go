package nvrtc_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/nvrtc"
)

func TestMain(m *testing.M) { os.Exit(faketest.Main(m)) }

func fakeEnv(t *testing.T, extra ...string) faketest.Env {
	t.Helper()
	if faketest.InChild() {
		return faketest.Env{}
	}
	return faketest.Env{Extra: append([]string{"NCCL4GO_NVRTC_LIBRARY=" + faketest.NVRTCLibrary(t)}, extra...)}
}

const saxpySrc = `// fake-kernel: saxpy 4,8,8,4 saxpy
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}
`

func TestCompileAndLaunch(t *testing.T) {
	faketest.Run(t, fakeEnv(t, "FAKE_CUDA_CC=80"), func(t *testing.T) {
		if major, _, err := nvrtc.Version(); err != nil || major != 13 {
			t.Fatalf("Version = %d, %v", major, err)
		}
		r, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Device: 1, Defines: map[string]string{"B": "2", "A": ""}})
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		code := string(r.Code)
		if r.Arch != "sm_80" || !strings.HasPrefix(code, "FAKECUBIN arch=sm_80\n") {
			t.Errorf("arch %q, code %q: want a CUBIN for the device's sm_80", r.Arch, code)
		}
		if !strings.Contains(code, "define A\ndefine B=2\n") {
			t.Errorf("defines not passed in name order: %q", code)
		}
		if got := runSaxpy(t, cuda.Device(1), r.Code, 2, []float32{1, 2, 3}, []float32{10, 20, 30}, 32); got[0] != 12 || got[1] != 24 || got[2] != 36 {
			t.Errorf("saxpy compiled from a Go string: %v, want [12 24 36]", got)
		}
		p, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Arch: "compute_90", Output: nvrtc.PTX})
		if err != nil || !strings.HasPrefix(string(p.Code), "FAKEPTX arch=compute_90") {
			t.Errorf("PTX for compute_90: %v, %q", err, p.Code)
		}
		l, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Arch: "sm_90", Output: nvrtc.LTOIR})
		if err != nil || len(l.Code) == 0 {
			t.Errorf("LTO-IR: %v", err)
		}
	})
}

func TestCompileErrors(t *testing.T) {
	faketest.Run(t, fakeEnv(t), func(t *testing.T) {
		_, err := nvrtc.Compile("int x;\n#error not today\n", nvrtc.Options{Name: "bad.cu"})
		var ce *nvrtc.CompileError
		if !errors.As(err, &ce) || ce.Result != "NVRTC_ERROR_COMPILATION" || !strings.Contains(ce.Log, "bad.cu(2): error: #error directive") {
			t.Fatalf("Compile(#error) = %v; want a *CompileError with the log", err)
		}
		if !strings.Contains(err.Error(), "bad.cu(2)") {
			t.Errorf("the error does not show the log: %v", err)
		}
		src := "#include <mine.h>\n" + saxpySrc
		if _, err := nvrtc.Compile(src, nvrtc.Options{}); !errors.As(err, &ce) || !strings.Contains(ce.Log, `cannot open source file "mine.h"`) {
			t.Errorf("missing include: %v", err)
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "mine.h"), []byte("#pragma once\n"), 0o644)
		if _, err := nvrtc.Compile(src, nvrtc.Options{IncludePaths: []string{dir}}); err != nil {
			t.Errorf("with the include path: %v", err)
		}
		if _, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Extra: []string{"lineinfo"}}); !errors.As(err, &ce) || ce.Result != "NVRTC_ERROR_INVALID_OPTION" {
			t.Errorf("an option without a dash: %v", err)
		}
		var oe *nvrtc.OptionError
		if _, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Arch: "compute_90"}); !errors.As(err, &oe) {
			t.Errorf("CUBIN for a virtual architecture: %v, want *OptionError", err)
		}
		if _, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Defines: map[string]string{"A B": "1"}}); !errors.As(err, &oe) {
			t.Errorf("a macro name with a space: %v, want *OptionError", err)
		}
	})
}

func TestLibraryMissing(t *testing.T) {
	env := faketest.Env{Extra: []string{"NCCL4GO_NVRTC_LIBRARY=/nowhere/libnvrtc.so.13", "NCCL4GO_NVJITLINK_LIBRARY=/nowhere/libnvJitLink.so.13"}}
	faketest.Run(t, env, func(t *testing.T) {
		_, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Arch: "sm_90"})
		var le *nvrtc.LoadError
		if !errors.As(err, &le) || !errors.Is(err, nvrtc.ErrLibraryNotFound) {
			t.Fatalf("Compile without NVRTC = %v, want a *LoadError", err)
		}
		for _, want := range []string{"NVRTC not found", "/nowhere/libnvrtc.so.13", nvrtc.LibraryEnv, "nvidia-cuda-nvrtc"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		_, err = nvrtc.Link("sm_90", []nvrtc.LinkInput{{Type: nvrtc.InputLTOIR, Data: []byte("x")}})
		if !errors.As(err, &le) || le.Library != "nvJitLink" || !strings.Contains(err.Error(), "/nowhere/libnvJitLink.so.13") {
			t.Errorf("Link without nvJitLink = %v", err)
		}
	})
}

func TestCache(t *testing.T) {
	var xdg, count string
	if !faketest.InChild() {
		xdg, count = t.TempDir(), filepath.Join(t.TempDir(), "count")
	}
	compiles := func(t *testing.T) int {
		b, _ := os.ReadFile(os.Getenv("FAKE_NVRTC_COUNT_FILE"))
		return bytes.Count(b, []byte("compile "))
	}
	faketest.Run(t, fakeEnv(t, "XDG_CACHE_HOME="+xdg, "FAKE_NVRTC_COUNT_FILE="+count), func(t *testing.T) {
		c := nvrtc.DefaultCache()
		if want := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "nccl4go", "kernels"); c == nil || c.Dir != want {
			t.Fatalf("DefaultCache = %+v, want the directory %s", c, want)
		}
		opts := nvrtc.Options{Defines: map[string]string{"N": "1"}}
		r1, cached, err := c.Compile(saxpySrc, opts, "nccl 2.30.7")
		if err != nil || cached {
			t.Fatalf("first Compile: cached %v, %v", cached, err)
		}
		r2, cached, err := c.Compile(saxpySrc, opts, "nccl 2.30.7")
		if err != nil || !cached || !bytes.Equal(r1.Code, r2.Code) || compiles(t) != 1 {
			t.Fatalf("second Compile: cached %v, %v, %d compilations; want it from the cache", cached, err, compiles(t))
		}
		// Each part of the key misses.
		for _, k := range []struct {
			name string
			src  string
			opts nvrtc.Options
			key  string
		}{
			{"source", saxpySrc + "\n", opts, "nccl 2.30.7"},
			{"define", saxpySrc, nvrtc.Options{Defines: map[string]string{"N": "2"}}, "nccl 2.30.7"},
			{"arch", saxpySrc, nvrtc.Options{Arch: "sm_80", Defines: opts.Defines}, "nccl 2.30.7"},
			{"output", saxpySrc, nvrtc.Options{Output: nvrtc.PTX, Defines: opts.Defines}, "nccl 2.30.7"},
			{"key", saxpySrc, opts, "nccl 2.28.3"},
		} {
			before := compiles(t)
			if _, cached, err := c.Compile(k.src, k.opts, k.key); err != nil || cached || compiles(t) != before+1 {
				t.Errorf("a different %s: cached %v, %v", k.name, cached, err)
			}
		}
		// Concurrent compilations of one new entry: each gets whole code,
		// and no temporary file stays behind.
		var wg sync.WaitGroup
		codes := make([][]byte, 8)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, _, err := c.Compile(saxpySrc, nvrtc.Options{Defines: map[string]string{"N": "9"}})
				if err != nil {
					t.Error(err)
					return
				}
				codes[i] = r.Code
			}()
		}
		wg.Wait()
		for i := range codes {
			if !bytes.Equal(codes[i], codes[0]) || len(codes[0]) == 0 {
				t.Errorf("concurrent compile %d: %q vs %q", i, codes[i], codes[0])
			}
		}
		ents, _ := os.ReadDir(c.Dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".tmp-") {
				t.Errorf("temporary file left: %s", e.Name())
			}
		}
	})
	// A different NVRTC version misses (the same directory, a new child).
	faketest.Run(t, fakeEnv(t, "XDG_CACHE_HOME="+xdg, "FAKE_NVRTC_COUNT_FILE="+count, "FAKE_NVRTC_VERSION=12090"), func(t *testing.T) {
		before := compiles(t)
		_, cached, err := nvrtc.DefaultCache().Compile(saxpySrc, nvrtc.Options{Defines: map[string]string{"N": "1"}}, "nccl 2.30.7")
		if err != nil || cached || compiles(t) != before+1 {
			t.Errorf("another NVRTC version: cached %v, %v", cached, err)
		}
	})
	faketest.Run(t, fakeEnv(t, "NCCL4GO_KERNEL_CACHE=off"), func(t *testing.T) {
		if c := nvrtc.DefaultCache(); c != nil {
			t.Errorf("DefaultCache with %s=off: %+v, want nil", nvrtc.CacheDirEnv, c)
		}
	})
}

// TestLink: LTO-IR from Compile cannot be loaded as it is; Link makes a
// CUBIN of it that runs.
func TestLink(t *testing.T) {
	env := fakeEnv(t)
	if !faketest.InChild() {
		env.Extra = append(env.Extra, "NCCL4GO_NVJITLINK_LIBRARY="+faketest.NvJitLinkLibrary(t))
	}
	faketest.Run(t, env, func(t *testing.T) {
		ir, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Output: nvrtc.LTOIR})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cuda.Device(0).LoadModule(ir.Code); err == nil {
			t.Error("the driver loaded LTO-IR")
		}
		cubin, err := nvrtc.Link(ir.Arch, []nvrtc.LinkInput{{Type: nvrtc.InputLTOIR, Data: ir.Code}})
		if err != nil {
			t.Fatalf("Link: %v", err)
		}
		if p, err := nvrtc.LinkLibraryPath(); err != nil || !strings.Contains(p, "nvjitlink") {
			t.Errorf("LinkLibraryPath = %q, %v", p, err)
		}
		m, err := cuda.Device(0).LoadModule(cubin)
		if err != nil {
			t.Fatalf("loading the linked CUBIN: %v", err)
		}
		defer m.Unload()
		f, err := m.Function("saxpy")
		if err != nil {
			t.Fatal(err)
		}
		x, _ := cuda.AllocFrom(0, []float32{1, 2})
		y, _ := cuda.AllocFrom(0, []float32{1, 1})
		defer x.Free()
		defer y.Free()
		if err := f.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(2)}, float32(3), x, y, int32(2)); err != nil {
			t.Fatal(err)
		}
		if got, _ := y.ToHost(); got[0] != 4 || got[1] != 7 {
			t.Errorf("linked saxpy: %v, want [4 7]", got)
		}
		// A bad input: a *LinkError with nvJitLink's log.
		_, err = nvrtc.Link("sm_90", []nvrtc.LinkInput{{Type: nvrtc.InputLTOIR, Data: []byte("garbage")}})
		var le *nvrtc.LinkError
		if !errors.As(err, &le) || le.Stage != "add input" || !strings.Contains(le.Log, "not a fake module") {
			t.Errorf("Link(garbage) = %v, want a *LinkError with the log", err)
		}
		if _, err := nvrtc.Link("sm_90", nil); err == nil {
			t.Error("Link of nothing succeeded")
		}
	})
}

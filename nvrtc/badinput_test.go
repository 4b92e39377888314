package nvrtc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/nvrtc"
)

// TestCompileRefusesNUL: C strings end at a NUL byte, so a source, name or
// option holding one would be compiled cut short; it is refused instead.
func TestCompileRefusesNUL(t *testing.T) {
	faketest.Run(t, fakeEnv(t), func(t *testing.T) {
		var oe *nvrtc.OptionError
		for name, c := range map[string]struct {
			src  string
			opts nvrtc.Options
		}{
			"source": {saxpySrc + "\x00#error cut\n", nvrtc.Options{Arch: "sm_90"}},
			"name":   {saxpySrc, nvrtc.Options{Arch: "sm_90", Name: "a\x00.cu"}},
			"extra":  {saxpySrc, nvrtc.Options{Arch: "sm_90", Extra: []string{"-lineinfo\x00"}}},
			"define": {saxpySrc, nvrtc.Options{Arch: "sm_90", Defines: map[string]string{"A": "1\x00"}}},
			"arch":   {saxpySrc, nvrtc.Options{Arch: "sm_90\x00"}},
		} {
			if _, err := nvrtc.Compile(c.src, c.opts); !errors.As(err, &oe) {
				t.Errorf("a NUL in the %s: Compile = %v, want *OptionError", name, err)
			}
		}
		if _, err := nvrtc.Link("sm_90\x00", []nvrtc.LinkInput{{Type: nvrtc.InputLTOIR, Data: []byte("x")}}); !errors.As(err, &oe) {
			t.Errorf("a NUL in Link's arch: %v, want *OptionError", err)
		}
	})
}

// TestZeroCacheWritesNothingInTheWorkingDirectory: a Cache whose Dir is
// empty is refused, not a cache in the current directory.
func TestZeroCacheWritesNothingInTheWorkingDirectory(t *testing.T) {
	faketest.Run(t, fakeEnv(t), func(t *testing.T) {
		wd, _ := os.Getwd()
		before, _ := os.ReadDir(wd)
		var oe *nvrtc.OptionError
		if _, _, err := new(nvrtc.Cache).Compile(saxpySrc, nvrtc.Options{Arch: "sm_90"}); !errors.As(err, &oe) {
			t.Errorf("Cache{}.Compile = %v, want *OptionError", err)
		}
		if _, _, err := new(nvrtc.Cache).Get(".bin", func() ([]byte, error) { return []byte("x"), nil }, "k"); !errors.As(err, &oe) {
			t.Errorf("Cache{}.Get = %v, want *OptionError", err)
		}
		c := &nvrtc.Cache{Dir: t.TempDir()}
		if _, _, err := c.Get("/../../escape", func() ([]byte, error) { return []byte("x"), nil }, "k"); !errors.As(err, &oe) {
			t.Errorf("Get with an extension holding a path separator = %v, want *OptionError", err)
		}
		if _, _, err := c.Get(".bin", nil, "k"); !errors.As(err, &oe) {
			t.Errorf("Get with a nil build = %v, want *OptionError", err)
		}
		after, _ := os.ReadDir(wd)
		if len(after) != len(before) {
			var names []string
			for _, e := range after {
				names = append(names, e.Name())
			}
			t.Errorf("the working directory %s changed: %d entries, then %d: %v", wd, len(before), len(after), names)
			for _, e := range after {
				if filepath.Ext(e.Name()) == ".cubin" {
					os.Remove(filepath.Join(wd, e.Name()))
				}
			}
		}
	})
}

// TestLinkTooManyInputs: more inputs than the shim's arrays hold are
// refused, not a panic in the binding.
func TestLinkTooManyInputs(t *testing.T) {
	env := fakeEnv(t)
	if !faketest.InChild() {
		env.Extra = append(env.Extra, "NCCL4GO_NVJITLINK_LIBRARY="+faketest.NvJitLinkLibrary(t))
	}
	faketest.Run(t, env, func(t *testing.T) {
		in := make([]nvrtc.LinkInput, 1<<20)
		var oe *nvrtc.OptionError
		if _, err := nvrtc.Link("sm_90", in); !errors.As(err, &oe) {
			t.Errorf("Link of %d inputs = %v, want *OptionError", len(in), err)
		}
	})
}

// TestLibraryMissingListsEveryPath: with no NCCL4GO_NVRTC_LIBRARY, the
// error of a machine where no NVRTC loads names every path tried: both
// sonames, the toolkit's lib64 (CUDA_HOME) and pip's wheel directory
// (VIRTUAL_ENV), each with why it failed (README: "the error lists every
// path tried").
func TestLibraryMissingListsEveryPath(t *testing.T) {
	var venv, cudaHome string
	if !faketest.InChild() {
		venv, cudaHome = t.TempDir(), t.TempDir()
		pip := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cuda_nvrtc", "lib")
		for _, d := range []string{pip, filepath.Join(cudaHome, "lib64")} {
			os.MkdirAll(d, 0o755)
		}
		os.WriteFile(filepath.Join(pip, "libnvrtc.so.13"), []byte("not a library"), 0o644)
		os.WriteFile(filepath.Join(cudaHome, "lib64", "libnvrtc.so.12"), []byte("not a library"), 0o644)
	}
	env := faketest.Env{Extra: []string{"NCCL4GO_NVRTC_LIBRARY=", "VIRTUAL_ENV=" + venv, "CUDA_HOME=" + cudaHome, "CUDA_PATH="}}
	faketest.Run(t, env, func(t *testing.T) {
		_, err := nvrtc.Compile(saxpySrc, nvrtc.Options{Arch: "sm_90"})
		if err == nil {
			t.Skip("an NVRTC loads on this machine from the loader's path: the error cannot be seen here")
		}
		var le *nvrtc.LoadError
		if !errors.As(err, &le) {
			t.Fatalf("Compile = %v, want a *LoadError", err)
		}
		msg := err.Error()
		for _, want := range []string{"libnvrtc.so.13 (", "libnvrtc.so.12 (",
			filepath.Join(os.Getenv("CUDA_HOME"), "lib64", "libnvrtc.so.12"),
			filepath.Join(os.Getenv("VIRTUAL_ENV"), "lib", "python3.12", "site-packages", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.13")} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not name %q:\n%s", want, msg)
			}
		}
	})
}

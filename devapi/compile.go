package devapi

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/nvrtc"
)

// Compiler picks what compiles device-API kernels.
type Compiler int

const (
	// Auto tries [NVRTC], and nvcc when NVRTC is missing or cannot compile
	// the NCCL headers (which include C++ standard headers NVRTC may not
	// ship).
	Auto Compiler = iota
	// NVRTC only (package nvrtc).
	NVRTC
	// NVCC only: the CUDA toolkit's compiler, run as a command.
	NVCC
)

// String names the compiler.
func (c Compiler) String() string {
	if c < Auto || c > NVCC {
		return fmt.Sprintf("Compiler(%d)", int(c))
	}
	return [...]string{"auto", "NVRTC", "nvcc"}[c]
}

// NVCCEnv names the environment variable that points at nvcc.
const NVCCEnv = "NCCL4GO_NVCC"

// Options are how [Compile] compiles a device-API kernel.
type Options struct {
	// Device is the device to compile for (its sm_XY).
	Device cuda.Device
	// Headers are the NCCL device headers; nil: FindHeaders("").
	Headers *Headers
	// Compiler picks [NVRTC] or nvcc (default [Auto]).
	Compiler Compiler
	// IncludePaths are more #include directories.
	IncludePaths []string
	// Defines are macros (-DNAME=VALUE).
	Defines map[string]string
	// Cache keeps the CUBIN; nil: nvrtc.DefaultCache(). Set NoCache to
	// compile every time.
	Cache   *nvrtc.Cache
	NoCache bool
}

// cudaIncludes are the toolkit's include directories (cuda_runtime.h,
// cuda/atomic), which nccl.h and the device headers include.
func cudaIncludes() []string {
	var out []string
	for _, h := range []string{os.Getenv("CUDA_HOME"), os.Getenv("CUDA_PATH"), "/usr/local/cuda"} {
		if h == "" {
			continue
		}
		inc := filepath.Join(h, "include")
		if _, err := os.Stat(filepath.Join(inc, "cuda_runtime.h")); err == nil {
			out = append(out, inc)
			if _, err := os.Stat(filepath.Join(inc, "cccl")); err == nil {
				out = append(out, filepath.Join(inc, "cccl"))
			}
			break
		}
	}
	return out
}

// Compile compiles src, CUDA C++ that may #include <nccl_device.h>, to a
// CUBIN for opts.Device, against headers matching the loaded NCCL. The
// result is cached under the source, the options, the architecture, the
// compiler and its version, and the headers' directory and release.
func Compile(src string, opts Options) ([]byte, error) {
	if opts.Compiler < Auto || opts.Compiler > NVCC {
		return nil, &nvrtc.OptionError{Option: "Compiler", Reason: opts.Compiler.String() + ": want Auto, NVRTC or NVCC"}
	}
	h := opts.Headers
	if h == nil {
		var err error
		if h, err = FindHeaders(""); err != nil {
			return nil, err
		}
	}
	arch, err := nvrtc.Arch(opts.Device)
	if err != nil {
		return nil, err
	}
	includes := append(append([]string{h.Dir}, opts.IncludePaths...), cudaIncludes()...)
	var cache *nvrtc.Cache // nil: compile every time
	if !opts.NoCache {
		if cache = opts.Cache; cache == nil {
			cache = nvrtc.DefaultCache()
		}
	}
	var firstErr error
	if opts.Compiler != NVCC {
		ropts := nvrtc.Options{Name: "nccl4go_kernel.cu", Arch: arch, IncludePaths: includes, Defines: opts.Defines,
			Extra: []string{"-std=c++17"}}
		r, _, err := cache.Compile(src, ropts, "headers "+h.Dir, "nccl "+h.Release.String())
		if err == nil {
			return r.Code, nil
		}
		if opts.Compiler == NVRTC {
			return nil, err
		}
		firstErr = err
	}
	nvcc, err := findNVCC()
	if err != nil {
		if firstErr != nil {
			return nil, errors.Join(firstErr, err)
		}
		return nil, err
	}
	version, _ := exec.Command(nvcc, "--version").Output()
	args := []string{"-cubin", "-arch=" + arch, "-std=c++17"}
	for _, d := range includes {
		args = append(args, "-I"+d)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Defines)) {
		if v := opts.Defines[k]; v == "" {
			args = append(args, "-D"+k)
		} else {
			args = append(args, "-D"+k+"="+v)
		}
	}
	code, _, err := cache.Get(".cubin", func() ([]byte, error) { return runNVCC(nvcc, src, args) },
		append([]string{"nvcc", string(version), src, "headers " + h.Dir, "nccl " + h.Release.String()}, args...)...)
	if err != nil && firstErr != nil {
		return nil, errors.Join(firstErr, err)
	}
	return code, err
}

// NVCCError is a failed nvcc run: the command and its output.
type NVCCError struct {
	Command string
	Output  string
	Err     error
}

// Error reads "devapi: nvcc ...: exit status 1:\n<output>".
func (e *NVCCError) Error() string {
	return fmt.Sprintf("devapi: %s: %v:\n%s", e.Command, e.Err, strings.TrimRight(e.Output, "\n"))
}

// Unwrap returns the command's error.
func (e *NVCCError) Unwrap() error { return e.Err }

// ErrNoNVCC: nvcc was not found. It wraps errors.ErrUnsupported.
var ErrNoNVCC = fmt.Errorf("devapi: nvcc not found: %w", errors.ErrUnsupported)

type noNVCCError struct{ tried []string }

func (e *noNVCCError) Error() string {
	return fmt.Sprintf("devapi: no nvcc: looked in %s; install the CUDA toolkit or set %s to nvcc's path",
		strings.Join(e.tried, ", "), NVCCEnv)
}

func (e *noNVCCError) Is(target error) bool {
	return target == ErrNoNVCC || target == errors.ErrUnsupported
}

func findNVCC() (string, error) {
	if p := os.Getenv(NVCCEnv); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p, nil
	}
	var tried []string
	for _, h := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if h == "" {
			continue
		}
		p := filepath.Join(h, "bin", "nvcc")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", &noNVCCError{tried: append([]string{"PATH"}, tried...)}
}

func runNVCC(nvcc, src string, args []string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "nccl4go-nvcc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "kernel.cu"), filepath.Join(dir, "kernel.cubin")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		return nil, err
	}
	args = append(args, "-o", out, in)
	cmd := exec.Command(nvcc, args...)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		return nil, &NVCCError{Command: nvcc + " " + strings.Join(args, " "), Output: string(msg), Err: err}
	}
	return os.ReadFile(out)
}

// NVCCPath is the nvcc [Compile] would run (NCCL4GO_NVCC, PATH,
// $CUDA_HOME/bin, /usr/local/cuda/bin), or an error saying where it looked.
func NVCCPath() (string, error) { return findNVCC() }

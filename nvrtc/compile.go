package nvrtc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// Output is the kind of code [Compile] returns.
type Output int

const (
	// CUBIN is machine code for one architecture (sm_XY): the default.
	CUBIN Output = iota
	// PTX is virtual assembly, compiled by the driver when loaded.
	PTX
	// LTOIR is link-time-optimization IR (-dlto), to link with [Link].
	LTOIR
)

// String names the output kind.
func (o Output) String() string {
	switch o {
	case CUBIN:
		return "CUBIN"
	case PTX:
		return "PTX"
	case LTOIR:
		return "LTO-IR"
	}
	return fmt.Sprintf("Output(%d)", int(o))
}

// capi is the shim's numbering of o: 0 [PTX], 1 [CUBIN], 2 LTO-IR.
func (o Output) capi() int { return [...]int{1, 0, 2}[o] }

// Options are how [Compile] compiles.
type Options struct {
	// Name is the program's file name in the log (default "kernel.cu").
	Name string
	// Arch is the target architecture: "sm_90" ([CUBIN], or [PTX] for it),
	// "compute_90" (PTX). Empty: the Device's.
	Arch string
	// Device picks the architecture when Arch is empty (default device 0).
	Device cuda.Device
	// Output is what to return (default [CUBIN]).
	Output Output
	// IncludePaths are directories searched by #include (-I).
	IncludePaths []string
	// Defines are macros (-DNAME=VALUE; an empty value: -DNAME), passed
	// in the order of their names.
	Defines map[string]string
	// Extra are more NVRTC options, passed last (for example "-std=c++17",
	// "-lineinfo").
	Extra []string
}

// Arch returns dev's architecture name, "sm_XY", from its compute
// capability.
func Arch(dev cuda.Device) (string, error) {
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}

// args resolves the architecture and returns the options NVRTC gets.
func (o *Options) args() ([]string, string, error) {
	arch := o.Arch
	if arch == "" {
		a, err := Arch(o.Device)
		if err != nil {
			return nil, "", fmt.Errorf("nvrtc: the target architecture: %w", err)
		}
		arch = a
	}
	if o.Output == CUBIN && !strings.HasPrefix(arch, "sm_") {
		return nil, "", &OptionError{Option: "Arch", Reason: fmt.Sprintf("CUBIN needs a real architecture (sm_XY), not %q", arch)}
	}
	if o.Output < CUBIN || o.Output > LTOIR {
		return nil, "", &OptionError{Option: "Output", Reason: o.Output.String()}
	}
	if err := checkNUL("Arch", arch); err != nil {
		return nil, "", err
	}
	if err := checkNUL("Name", o.Name); err != nil {
		return nil, "", err
	}
	args := []string{"-arch=" + arch}
	if o.Output == LTOIR {
		args = append(args, "-dlto")
	}
	for _, p := range o.IncludePaths {
		if p == "" {
			return nil, "", &OptionError{Option: "IncludePaths", Reason: "an empty path"}
		}
		if err := checkNUL("IncludePaths", p); err != nil {
			return nil, "", err
		}
		args = append(args, "-I"+p)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Defines)) {
		if k == "" || strings.ContainsAny(k, " =\t\n") {
			return nil, "", &OptionError{Option: "Defines", Reason: fmt.Sprintf("%q is not a macro name", k)}
		}
		if err := checkNUL("Defines", o.Defines[k]); err != nil {
			return nil, "", err
		}
		if v := o.Defines[k]; v != "" {
			args = append(args, "-D"+k+"="+v)
		} else {
			args = append(args, "-D"+k)
		}
	}
	for _, e := range o.Extra {
		if err := checkNUL("Extra", e); err != nil {
			return nil, "", err
		}
	}
	return append(args, o.Extra...), arch, nil
}

// checkNUL refuses a string holding a NUL byte: NVRTC reads C strings, so
// what follows the NUL would be silently dropped.
func checkNUL(option, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return &OptionError{Option: option, Reason: fmt.Sprintf("a NUL byte at offset %d (NVRTC would read only what comes before it)", i)}
	}
	return nil
}

func (o *Options) name() string {
	if o.Name == "" {
		return "kernel.cu"
	}
	return o.Name
}

// OptionError is an option [Compile] refuses before calling NVRTC.
type OptionError struct {
	Option, Reason string
}

// Error reads "nvrtc: option Arch: ...".
func (e *OptionError) Error() string { return "nvrtc: option " + e.Option + ": " + e.Reason }

// CompileError is a failed compilation: NVRTC's result and its log, which
// holds the compiler's messages (file, line, error).
type CompileError struct {
	// Name is the program's name, Options what NVRTC was given.
	Name    string
	Options []string
	// Code is the nvrtcResult, Result its name.
	Code   int
	Result string
	// Log is NVRTC's program log.
	Log string
}

// Error reads "nvrtc: compiling kernel.cu: NVRTC_ERROR_COMPILATION:\n<log>".
func (e *CompileError) Error() string {
	msg := fmt.Sprintf("nvrtc: compiling %s: %s", e.Name, e.Result)
	if e.Log != "" {
		msg += ":\n" + strings.TrimRight(e.Log, "\n")
	}
	return msg
}

// Result is compiled code.
type Result struct {
	// Code is the [CUBIN], [PTX] or LTO-IR.
	Code []byte
	// Output is its kind, Arch the architecture it was compiled for.
	Output Output
	Arch   string
	// Log is NVRTC's log (warnings), often empty.
	Log string
}

// Compile compiles src (CUDA C++) with NVRTC (nvrtcCreateProgram,
// nvrtcCompileProgram, then nvrtcGetCUBIN, nvrtcGetPTX or nvrtcGetLTOIR).
// Kernels meant for [cuda.Module].Function should be declared extern "C".
// A failed compilation returns a *[CompileError] with the log; a missing
// NVRTC a *[LoadError].
func Compile(src string, opts Options) (*Result, error) {
	args, arch, err := opts.args()
	if err != nil {
		return nil, err
	}
	if err := checkNUL("source", src); err != nil {
		return nil, err
	}
	return compileArgs(src, opts.name(), args, arch, opts.Output)
}

func compileArgs(src, name string, args []string, arch string, out Output) (*Result, error) {
	if err := ensureNVRTC(); err != nil {
		return nil, err
	}
	c := capi.NVRTCCompile(src, name, args, out.capi())
	switch {
	case c.Code == -1:
		return nil, fmt.Errorf("nvrtc: compiling %s: the loaded NVRTC (%s) lacks %s: %w", name, capi.NVRTCPath(), c.Missing, ErrUnsupported)
	case c.Code != 0:
		return nil, &CompileError{Name: name, Options: args, Code: c.Code, Result: resultString(c.Code), Log: c.Log}
	}
	return &Result{Code: c.Out, Output: out, Arch: arch, Log: c.Log}, nil
}

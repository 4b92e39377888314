package nvrtc

import (
	"errors"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// ErrUnsupported: the loaded library lacks what a call needs. It wraps
// errors.ErrUnsupported.
var ErrUnsupported = fmt.Errorf("nvrtc: not supported by the loaded library: %w", errors.ErrUnsupported)

// InputType is the kind of a [Link] input (nvJitLinkInputType).
type InputType int32

// [Link] input kinds, with nvJitLink's numbers.
const (
	InputCUBIN  InputType = 1
	InputPTX    InputType = 2
	InputLTOIR  InputType = 3
	InputFatbin InputType = 4
	InputObject InputType = 5
	InputLib    InputType = 6
)

// LinkInput is one input of [Link].
type LinkInput struct {
	Type InputType
	Data []byte
}

// LinkError is a failed link: nvJitLink's result and error log.
type LinkError struct {
	Code  int
	Stage string
	Log   string
}

// Error reads "nvrtc: nvJitLink complete: result 4:\n<log>".
func (e *LinkError) Error() string {
	msg := fmt.Sprintf("nvrtc: nvJitLink %s: result %d", e.Stage, e.Code)
	if e.Log != "" {
		msg += ":\n" + e.Log
	}
	return msg
}

// maxLinkInputs bounds [Link]'s inputs (the shim's arrays hold fewer than
// 1<<20).
const maxLinkInputs = 1 << 20

// Link links inputs (typically LTO-IR from [Compile] with [Output] [LTOIR], and
// a library's LTO-IR such as NCCL's libnccl_device.ltoir) into a [CUBIN] for
// arch ("sm_90") with nvJitLink, which is loaded on first use
// ([LinkLibraryEnv], libnvJitLink.so.13 / .12). Where no nvJitLink loads the
// error is a *[LoadError]: LTO is then unavailable, and Compile's CUBIN or
// [PTX] output is the way.
func Link(arch string, inputs []LinkInput, extra ...string) ([]byte, error) {
	if len(inputs) == 0 {
		return nil, &OptionError{Option: "inputs", Reason: "nothing to link"}
	}
	if len(inputs) >= maxLinkInputs {
		return nil, &OptionError{Option: "inputs", Reason: fmt.Sprintf("%d inputs: at most %d", len(inputs), maxLinkInputs-1)}
	}
	if err := checkNUL("arch", arch); err != nil {
		return nil, err
	}
	for _, e := range extra {
		if err := checkNUL("extra", e); err != nil {
			return nil, err
		}
	}
	if err := ensureLink(); err != nil {
		return nil, err
	}
	opts := append([]string{"-arch=" + arch, "-lto"}, extra...)
	types := make([]int32, len(inputs))
	datas := make([][]byte, len(inputs))
	for i, in := range inputs {
		types[i], datas[i] = int32(in.Type), in.Data
	}
	c := capi.NvJitLink(opts, types, datas)
	if c.Code == -1 {
		return nil, fmt.Errorf("nvrtc: Link: %s is not loaded: %w", c.Missing, ErrUnsupported)
	}
	if c.Code != 0 {
		stage := [...]string{"", "create", "add input", "complete", "get CUBIN"}[min(c.Stage, 4)]
		return nil, &LinkError{Code: c.Code, Stage: stage, Log: c.Log}
	}
	return c.Out, nil
}

// LinkLibraryPath is the file nvJitLink was loaded from, loading it first:
// a *[LoadError] says LTO is unavailable on this machine.
func LinkLibraryPath() (string, error) {
	if err := ensureLink(); err != nil {
		return "", err
	}
	return capi.NvJitLinkPath(), nil
}

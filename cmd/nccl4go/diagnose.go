package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Environment variables that point the binding at its libraries.
const (
	ncclLibraryEnv = nccl.LibraryEnv
	cudaLibraryEnv = cuda.LibraryEnv
)

// problem is something missing or broken, in plain words, with the fix.
type problem struct {
	Reason string `json:"reason"`        // e.g. "not found: tried libnccl.so.2 (...)"
	Fix    string `json:"fix,omitempty"` // e.g. "install NCCL ..., or set NCCL_LIBRARY=..."
}

// ncclState is what loading NCCL gave.
type ncclState struct {
	path    string
	release nccl.Release
	problem *problem
}

// loadNCCL loads NCCL (once per process) and reports its file and release,
// or what is wrong.
func loadNCCL() ncclState {
	r, err := nccl.Version()
	if err != nil {
		return ncclState{problem: explainNCCL(err)}
	}
	p, err := nccl.LibraryPath()
	if err != nil {
		return ncclState{release: r, problem: explainNCCL(err)}
	}
	return ncclState{path: p, release: r}
}

// driverState is what loading the CUDA driver gave.
type driverState struct {
	path    string
	version int // e.g. 13000; 0 if unknown
	problem *problem
}

// loadDriver loads the CUDA driver library and reads its version, or
// reports what is wrong. A driver that loads but sees no GPU is not a
// driver problem: countGPUs reports it.
func loadDriver() driverState {
	var s driverState
	p, err := cuda.LibraryPath()
	if err != nil {
		s.problem = explainCUDA(err)
		return s
	}
	s.path = p
	v, err := cuda.DriverVersion()
	if err != nil {
		s.problem = explainCUDA(err)
		return s
	}
	s.version = v
	return s
}

// countGPUs returns the number of visible GPUs, or why there is none.
func countGPUs() (int, *problem) {
	n, err := cuda.Count()
	switch {
	case err != nil:
		return 0, explainGPUs(err)
	case n == 0:
		return 0, explainGPUs(cuda.ErrNoDevice)
	}
	return n, nil
}

// rebuild is the fix when this binary cannot load C libraries at all.
const rebuild = "rebuild nccl4go with cgo on Linux: CGO_ENABLED=1 and a C compiler (gcc or clang)"

// cannotLoadC is true in a build that cannot load C libraries (no cgo, or
// not Linux), where the fix of every load failure is a rebuild; known from
// the build (cgo_linux.go, cgo_other.go), never from an error's text. A
// variable so that tests take the other build's path.
var cannotLoadC = !loadsCLibraries

// explainNCCL turns a failure to load NCCL into a problem.
func explainNCCL(err error) *problem {
	var ue *nccl.UnsupportedError
	switch {
	case cannotLoadC:
		return &problem{Reason: "cannot be loaded: " + tried(err), Fix: rebuild}
	case errors.Is(err, nccl.ErrLibraryNotFound):
		return &problem{
			Reason: "not found: " + tried(err),
			Fix: fmt.Sprintf("install NCCL %s or later (apt install libnccl2, or pip install nvidia-nccl-cu12 "+
				"or nvidia-nccl-cu13), or set %s=/path/to/libnccl.so.2", nccl.MinRelease, ncclLibraryEnv),
		}
	case errors.As(err, &ue):
		return &problem{
			Reason: fmt.Sprintf("NCCL %s is too old: nccl4go needs %s or later", ue.Loaded, ue.Since),
			Fix:    fmt.Sprintf("install a newer NCCL, or set %s=/path/to/a/newer/libnccl.so.2", ncclLibraryEnv),
		}
	}
	return &problem{Reason: err.Error()}
}

// explainCUDA turns a failure to load the CUDA driver into a problem.
func explainCUDA(err error) *problem {
	if cannotLoadC {
		return &problem{Reason: "cannot be loaded: " + tried(err), Fix: rebuild}
	}
	if errors.Is(err, cuda.ErrLibraryNotFound) {
		return &problem{
			Reason: "not found: " + tried(err),
			Fix:    fmt.Sprintf("install the NVIDIA driver, or set %s=/path/to/libcuda.so.1", cudaLibraryEnv),
		}
	}
	return &problem{Reason: err.Error(), Fix: "check the driver with nvidia-smi"}
}

// explainGPUs says why no GPU can be used.
func explainGPUs(err error) *problem {
	switch {
	case cannotLoadC:
		return &problem{Reason: "no GPU: the CUDA driver cannot be loaded: " + tried(err), Fix: rebuild}
	case errors.Is(err, cuda.ErrLibraryNotFound):
		return &problem{Reason: "no GPU: the CUDA driver was not found: " + tried(err), Fix: explainCUDA(err).Fix}
	case errors.Is(err, cuda.ErrNoDevice):
		p := &problem{Reason: "no GPU: the CUDA driver reports no device", Fix: "check that nvidia-smi lists a GPU"}
		if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
			p.Fix += fmt.Sprintf(", and that CUDA_VISIBLE_DEVICES=%q names one", v)
		}
		return p
	}
	return &problem{Reason: "no usable GPU: " + err.Error(), Fix: "check the driver with nvidia-smi"}
}

// tried is "tried <file> (<why>)" of a library-not-found error, falling
// back to the whole message.
func tried(err error) string {
	var ne *nccl.LoadError
	var ce *cuda.LoadError
	switch {
	case errors.As(err, &ne):
		return "tried " + strings.Join(ne.Tried, "; ")
	case errors.As(err, &ce):
		return "tried " + strings.Join(ce.Tried, "; ")
	}
	msg := err.Error()
	i := strings.Index(msg, "tried ")
	if i < 0 {
		return msg
	}
	msg = msg[i:]
	if j := strings.Index(msg, "; install"); j >= 0 {
		msg = msg[:j]
	}
	return msg
}

// missingError is a command that cannot run because something is missing.
type missingError struct {
	what     string // e.g. "probe"
	problems []labeled
}

// labeled is a problem with the name of what it is about.
type labeled struct {
	label string // "NCCL", "CUDA driver", "GPU"
	*problem
}

// Error lists each problem and its fix, one a line.
func (e *missingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot %s:", e.what)
	for _, p := range e.problems {
		fmt.Fprintf(&b, "\n  %s: %s", p.label, p.Reason)
		if p.Fix != "" {
			fmt.Fprintf(&b, "\n  %*s  fix: %s", len(p.label), "", p.Fix)
		}
	}
	return b.String()
}

// condensed is an error whose message repeats nothing: errors joined from
// several communicators often say the same thing once per rank.
type condensed struct {
	err error
	msg string
}

// Error is the condensed message.
func (c *condensed) Error() string { return c.msg }

// Unwrap is the original error.
func (c *condensed) Unwrap() error { return c.err }

// condense drops the lines of err's message that repeat another line or
// end one (a bare "context deadline exceeded" next to a line ending with
// it), and joins the rest with "; ". errors.Is and errors.As still see err.
func condense(err error) error {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) == 1 {
		return err
	}
	var keep []string
	for i, l := range lines {
		redundant := l == "" || slices.Contains(keep, l)
		for j, o := range lines {
			if j != i && o != l && strings.HasSuffix(o, l) {
				redundant = true
			}
		}
		if !redundant {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		keep = lines[:1]
	}
	return &condensed{err: err, msg: strings.Join(keep, "; ")}
}

package devapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nccl4go/nccl"
)

// HeadersEnv names the environment variable that points at a directory
// holding nccl.h and nccl_device.h (an NCCL build tree's build/include).
const HeadersEnv = "NCCL4GO_NCCL_INCLUDE"

// Headers is a directory of NCCL headers with the device API.
type Headers struct {
	// Dir holds nccl.h, nccl_device.h and nccl_device/.
	Dir string
	// Release is the version nccl.h declares.
	Release nccl.Release
}

// ErrNoHeaders: no NCCL device headers matching the loaded library were
// found. It wraps [nccl.ErrUnsupported]: the device API cannot be compiled.
var ErrNoHeaders = fmt.Errorf("devapi: no matching NCCL device headers: %w", nccl.ErrUnsupported)

// HeadersError says where headers were looked for and what was found.
type HeadersError struct {
	// Want is the loaded NCCL release.
	Want nccl.Release
	// Tried lists each directory and what it held.
	Tried []string
}

// Error lists what was tried and how to point at the headers.
func (e *HeadersError) Error() string {
	return fmt.Sprintf("devapi: no NCCL %s device headers (nccl.h and nccl_device.h of that release): tried %s; "+
		"set %s to the include directory of the NCCL the program loads (an NCCL build's build/include)",
		e.Want, strings.Join(e.Tried, "; "), HeadersEnv)
}

// Is matches [ErrNoHeaders] and [nccl.ErrUnsupported].
func (e *HeadersError) Is(target error) bool {
	return target == ErrNoHeaders || errors.Is(nccl.ErrUnsupported, target)
}

// FindHeaders finds the NCCL device headers matching the loaded NCCL (its
// release, as [nccl.Version] reports it). It looks in dir when given, else
// in the directory [HeadersEnv] names, then beside the loaded library
// (../include, as an install or an NCCL build tree lays them out), then
// in /usr/include, /usr/local/include, $CUDA_HOME/include and
// /usr/local/cuda/include. A directory counts when it has nccl_device.h
// and an nccl.h whose NCCL_MAJOR, NCCL_MINOR and NCCL_PATCH equal the
// loaded release; the error otherwise lists every directory and what it
// held.
func FindHeaders(dir string) (*Headers, error) {
	want, err := nccl.Version()
	if err != nil {
		return nil, err
	}
	var dirs []string
	switch {
	case dir != "":
		dirs = []string{dir}
	case os.Getenv(HeadersEnv) != "":
		dirs = []string{os.Getenv(HeadersEnv)}
	default:
		if lib, err := nccl.LibraryPath(); err == nil && lib != "" {
			if real, err := filepath.EvalSymlinks(lib); err == nil {
				lib = real
			}
			d := filepath.Dir(lib)
			dirs = append(dirs, filepath.Join(d, "..", "include"), filepath.Join(d, "include"))
		}
		dirs = append(dirs, "/usr/include", "/usr/local/include")
		if h := os.Getenv("CUDA_HOME"); h != "" {
			dirs = append(dirs, filepath.Join(h, "include"))
		}
		dirs = append(dirs, "/usr/local/cuda/include")
	}
	e := &HeadersError{Want: want}
	for _, d := range dirs {
		d = filepath.Clean(d)
		got, why := headersIn(d)
		switch {
		case why != "":
			e.Tried = append(e.Tried, d+" ("+why+")")
		case got != want:
			e.Tried = append(e.Tried, fmt.Sprintf("%s (NCCL %s headers, the loaded library is %s)", d, got, want))
		default:
			return &Headers{Dir: d, Release: got}, nil
		}
	}
	return nil, e
}

// headersIn reads the release of the headers in dir, or says why there
// are none.
func headersIn(dir string) (nccl.Release, string) {
	if _, err := os.Stat(filepath.Join(dir, "nccl_device.h")); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, "nccl.h")); err2 == nil {
			return 0, "nccl.h without nccl_device.h: NCCL before 2.28, or a package without the device API"
		}
		return 0, "no nccl_device.h"
	}
	b, err := os.ReadFile(filepath.Join(dir, "nccl.h"))
	if err != nil {
		return 0, "nccl_device.h but no readable nccl.h"
	}
	v := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "#define" {
			switch f[1] {
			case "NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH":
				if n, err := strconv.Atoi(f[2]); err == nil {
					v[f[1]] = n
				}
			}
		}
	}
	if len(v) != 3 {
		return 0, "nccl.h without NCCL_MAJOR, NCCL_MINOR and NCCL_PATCH"
	}
	return nccl.Release(v["NCCL_MAJOR"]*10000 + v["NCCL_MINOR"]*100 + v["NCCL_PATCH"]), ""
}

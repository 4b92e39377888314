package nccl

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// Release is an NCCL release number as NCCL_VERSION_CODE writes it from 2.9
// on: major*10000 + minor*100 + patch, so 2.28.3 is 22803.
type Release int

// Releases the binding refers to.
const (
	// ABIRelease is the newest NCCL release whose ABI the binding declares:
	// versioned structs are stamped with min(ABIRelease, loaded release).
	ABIRelease Release = 23007
	// MinRelease is the oldest NCCL release the binding loads.
	MinRelease Release = 21901
)

// Major is the first part of the release number: 2 in 2.28.3.
func (r Release) Major() int { return int(r) / 10000 }

// Minor is the second part: 28 in 2.28.3.
func (r Release) Minor() int { return int(r) / 100 % 100 }

// Patch is the third part: 3 in 2.28.3.
func (r Release) Patch() int { return int(r) % 100 }

// String is "2.28.3".
func (r Release) String() string { return fmt.Sprintf("%d.%d.%d", r.Major(), r.Minor(), r.Patch()) }

// releaseFromCode reads ncclGetVersion's value: X*1000+Y*100+Z up to 2.8,
// X*10000+Y*100+Z from 2.9.
func releaseFromCode(code int) Release {
	if code < 10000 {
		return Release(code/1000*10000 + code%1000/100*100 + code%100)
	}
	return Release(code)
}

// ParseRelease reads "2.28.3".
func ParseRelease(s string) (Release, error) {
	var a, b, c int
	if n, err := fmt.Sscanf(s, "%d.%d.%d", &a, &b, &c); err != nil || n != 3 || b > 99 || c > 99 || a < 0 || b < 0 || c < 0 {
		return 0, fmt.Errorf("nccl: %q is not a release number like 2.28.3", s)
	}
	return Release(a*10000 + b*100 + c), nil
}

// LibraryEnv is the environment variable naming the NCCL library to load
// when Load was not called.
const LibraryEnv = "NCCL_LIBRARY"

// DefaultLibrary is the name the dynamic loader is asked for last.
const DefaultLibrary = "libnccl.so.2"

var lib struct {
	sync.Mutex
	loaded  bool
	release Release
	err     error // the default load's failure, kept until Load succeeds
}

// Load opens the NCCL library at path (dlopen), resolves every function the
// binding calls and reads its version (ncclGetVersion, NCCL 2.3.5); a function the library lacks makes its calls return
// ErrUnsupported. Without Load, the first call that needs NCCL loads the
// library named by $NCCL_LIBRARY (and only that one, when it is set), else
// libnccl.so.2 through the dynamic loader's search. Load after a successful load succeeds only for the same
// file. Nothing is loaded at import time.
func Load(path string) error {
	lib.Lock()
	defer lib.Unlock()
	if lib.loaded {
		if p := capi.NCCLPath(); path == p || strings.HasSuffix(p, "/"+path) {
			return nil
		}
		return fmt.Errorf("nccl: Load %s: NCCL %s is already loaded from %s", path, lib.release, capi.NCCLPath())
	}
	return loadLocked([]string{path})
}

func loadLocked(candidates []string) error {
	var tried []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		msg, ok := capi.LoadNCCL(p)
		if !ok {
			tried = append(tried, fmt.Sprintf("%s (%s)", p, msg))
			continue
		}
		code, st := capi.GetVersion()
		if st.Code != 0 || code <= 0 {
			capi.UnloadNCCL()
			tried = append(tried, fmt.Sprintf("%s (ncclGetVersion returned result %d, version %d)", p, st.Code, code))
			continue
		}
		r := releaseFromCode(code)
		if r < MinRelease {
			capi.UnloadNCCL()
			return &UnsupportedError{Func: "NCCL " + r.String() + " at " + p, Since: MinRelease, Loaded: r}
		}
		lib.loaded, lib.release, lib.err = true, r, nil
		return nil
	}
	return &LoadError{Tried: tried}
}

// LoadError is a failure to find a usable NCCL library. errors.Is matches
// ErrLibraryNotFound.
type LoadError struct {
	// Tried lists each file tried and why it failed: "path (reason)".
	Tried []string
}

// Error says what was tried and how to point at a library.
func (e *LoadError) Error() string {
	return fmt.Sprintf("%v: tried %s; install NCCL (libnccl2, or pip nvidia-nccl-cu12/cu13), "+
		"then set %s to its libnccl.so.2 or call nccl.Load(path)", ErrLibraryNotFound, strings.Join(e.Tried, "; "), LibraryEnv)
}

// Is matches ErrLibraryNotFound.
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

// loaded returns the loaded release, loading the default library on first use.
func loaded() (Release, error) {
	lib.Lock()
	defer lib.Unlock()
	if lib.loaded {
		return lib.release, nil
	}
	if lib.err != nil {
		return 0, lib.err
	}
	// An explicit $NCCL_LIBRARY that fails is reported, not replaced by
	// whatever the loader would find.
	candidate := DefaultLibrary
	if p := os.Getenv(LibraryEnv); p != "" {
		candidate = p
	}
	err := loadLocked([]string{candidate})
	lib.err = err
	return lib.release, err
}

// Version is the release of the loaded NCCL (ncclGetVersion, read once at
// load), loading the library if needed. Not collective. NCCL 2.3.5.
func Version() (Release, error) { return loaded() }

// LibraryPath is the file the loaded NCCL came from.
func LibraryPath() (string, error) {
	if _, err := loaded(); err != nil {
		return "", err
	}
	return capi.NCCLPath(), nil
}

// unsupported is the error for a function the loaded library lacks.
func unsupported(fn string) error {
	r, _ := loaded()
	since := Release(0)
	for _, s := range capi.NCCLSymbols() {
		if s.Name == fn {
			since = releaseFromCode(s.Since)
		}
	}
	return &UnsupportedError{Func: fn, Since: since, Loaded: r}
}

// deviceAPIVersion is the version the binding declares in device-API
// structs (properties, requirements): min(ABIRelease, loaded).
func deviceAPIVersion(loaded Release) Release { return min(loaded, ABIRelease) }

// ErrorString is ncclGetErrorString: NCCL's own text for a result code.
// Not collective. NCCL 2.3.5.
func ErrorString(r Result) (string, error) {
	if _, err := loaded(); err != nil {
		return "", err
	}
	return capi.GetErrorString(int32(r)), nil
}

// LastError is ncclGetLastError: the last warning NCCL logged in this
// process (one process-wide buffer: it may describe another goroutine's
// failure). Errors returned by this package already carry it in Detail.
// Not collective. NCCL 2.13.4.
func LastError() (string, error) {
	if _, err := loaded(); err != nil {
		return "", err
	}
	return capi.GetLastError(), nil
}

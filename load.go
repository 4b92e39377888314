package nccl

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// Loading the NCCL library: once, on first use or by Load, never at import.

// LibraryEnv is the environment variable naming the NCCL library to load
// when [Load] was not called.
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
// binding calls and reads its version (ncclGetVersion); a function the
// library lacks makes its calls return [ErrUnsupported]. Without Load, the first call that needs NCCL loads the
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
			return &UnsupportedError{Feature: "NCCL " + r.String() + " at " + p, Since: MinRelease, Loaded: r}
		}
		lib.loaded, lib.release, lib.err = true, r, nil
		return nil
	}
	return &LoadError{Tried: tried}
}

// LoadError is a failure to find a usable NCCL library. errors.Is matches
// [ErrLibraryNotFound].
type LoadError struct {
	// Tried lists each file tried and why it failed: "path (reason)".
	Tried []string
}

// Error says what was tried and how to point at a library.
func (e *LoadError) Error() string {
	return fmt.Sprintf("%v: tried %s; install NCCL (libnccl2, or pip nvidia-nccl-cu12/cu13), "+
		"then set %s to its libnccl.so.2 or call nccl.Load(path)", ErrLibraryNotFound, strings.Join(e.Tried, "; "), LibraryEnv)
}

// Is matches [ErrLibraryNotFound].
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

// loadedCtx is loaded for a call bounded by ctx: ctx's error first, when
// it has ended before the call starts.
func loadedCtx(ctx context.Context) (Release, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return loaded()
}

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

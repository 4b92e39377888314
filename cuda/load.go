package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// LibraryEnv names the environment variable that points at a CUDA driver
// library to load instead of the loader's libcuda.so.1.
const LibraryEnv = "NCCL4GO_CUDA_LIBRARY"

// DefaultLibrary is the driver library the dynamic loader is asked for last.
const DefaultLibrary = "libcuda.so.1"

var lib struct {
	sync.Mutex
	done    bool
	err     error // load failure
	initErr error // cuInit failure (for example no device)
}

// Load opens the CUDA driver library at path. Without a call to Load, the
// first use of the package loads the library named by NCCL4GO_CUDA_LIBRARY
// (only that one, when it is set), else libcuda.so.1 through the dynamic
// loader. Load fails if a driver is
// already loaded from another file. Nothing is loaded at import time.
func Load(path string) error {
	lib.Lock()
	defer lib.Unlock()
	if lib.done && lib.err == nil {
		if same(path, capi.CUDAPath()) {
			return nil
		}
		return fmt.Errorf("cuda: Load %s: the driver is already loaded from %s", path, capi.CUDAPath())
	}
	return loadLocked([]string{path})
}

func same(a, b string) bool {
	return a == b || strings.HasSuffix(b, "/"+a)
}

// loadLocked tries each candidate in order.
func loadLocked(candidates []string) error {
	var tried []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		msg, ok := capi.LoadCUDA(p)
		if ok {
			lib.done, lib.err = true, nil
			if r := capi.CuInit(); r != 0 {
				lib.initErr = check("Init", "cuInit", r)
			}
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", p, msg))
	}
	lib.done = true
	lib.err = &LoadError{Tried: tried}
	return lib.err
}

// LoadError is a failure to find a usable CUDA driver library. errors.Is
// matches [ErrLibraryNotFound].
type LoadError struct {
	// Tried lists each file tried and why it failed: "path (reason)".
	Tried []string
}

// Error says what was tried and how to point at a driver.
func (e *LoadError) Error() string {
	return fmt.Sprintf("%v: tried %s; install the NVIDIA driver, or set %s to the path of libcuda.so.1",
		ErrLibraryNotFound, strings.Join(e.Tried, "; "), LibraryEnv)
}

// Is matches [ErrLibraryNotFound].
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

// ensure loads the default library on first use and reports whether the
// driver is usable (loaded and initialized).
func ensure() error {
	loadErr, initErr := ensureLoaded()
	if loadErr != nil {
		return loadErr
	}
	return initErr
}

// ensureLoaded loads the default library on first use; loadErr says why no
// driver library is loaded, initErr why cuInit failed.
func ensureLoaded() (loadErr, initErr error) {
	lib.Lock()
	defer lib.Unlock()
	if !lib.done {
		candidate := DefaultLibrary
		if p := os.Getenv(LibraryEnv); p != "" {
			candidate = p // an explicit path that fails is reported, not replaced
		}
		loadLocked([]string{candidate})
	}
	return lib.err, lib.initErr
}

// Available reports whether a CUDA driver is loaded and initialized, and if
// not, why.
func Available() error { return ensure() }

// LibraryPath is the file of the loaded driver library.
func LibraryPath() (string, error) {
	if err := ensure(); err != nil && !errors.Is(err, ErrNoDevice) {
		return "", err
	}
	return capi.CUDAPath(), nil
}

// DriverVersion is the CUDA version the driver supports, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	if err, _ := ensureLoaded(); err != nil {
		return 0, err
	}
	v, r := capi.CuDriverGetVersion()
	return v, check("DriverVersion", "cuDriverGetVersion", r)
}

// FormatDriverVersion renders 13000 as "13.0".
func FormatDriverVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

package nvrtc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
)

// LibraryEnv names the environment variable that points at the NVRTC
// library to load (only that file, when set).
const LibraryEnv = "NCCL4GO_NVRTC_LIBRARY"

// LinkLibraryEnv names the environment variable that points at the
// nvJitLink library to load (only that file, when set).
const LinkLibraryEnv = "NCCL4GO_NVJITLINK_LIBRARY"

// ErrLibraryNotFound: no NVRTC (or nvJitLink) library could be opened.
var ErrLibraryNotFound = errors.New("nvrtc: library not found")

// LoadError is a failure to find a usable library. errors.Is matches
// [ErrLibraryNotFound].
type LoadError struct {
	// Library is "NVRTC" or "nvJitLink".
	Library string
	// Tried lists each file tried and why it failed: "path (reason)".
	Tried []string
	// Env is the environment variable that points at the library.
	Env string
}

// Error says what was tried and how to point at the library.
func (e *LoadError) Error() string {
	pkg := "nvidia-cuda-nvrtc"
	if e.Library == "nvJitLink" {
		pkg = "nvidia-nvjitlink"
	}
	return fmt.Sprintf("nvrtc: %s not found: tried %s; install the CUDA toolkit or pip's %s, or set %s to the library's path",
		e.Library, strings.Join(e.Tried, "; "), pkg, e.Env)
}

// Is matches [ErrLibraryNotFound].
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

type loader struct {
	mu   sync.Mutex
	done bool
	err  error
}

var rtcLib, linkLib loader

// Load opens the NVRTC library at path. Without it, the first [Compile]
// searches as the package documentation says. Load fails when NVRTC is
// already loaded from another file.
func Load(path string) error {
	rtcLib.mu.Lock()
	defer rtcLib.mu.Unlock()
	if rtcLib.done && rtcLib.err == nil {
		if p := capi.NVRTCPath(); p == path || strings.HasSuffix(p, "/"+path) {
			return nil
		}
		return fmt.Errorf("nvrtc: Load %s: NVRTC is already loaded from %s", path, capi.NVRTCPath())
	}
	rtcLib.done = true
	rtcLib.err = tryLoad("NVRTC", LibraryEnv, []string{path}, capi.LoadNVRTC)
	return rtcLib.err
}

func ensureNVRTC() error {
	return rtcLib.ensure("NVRTC", LibraryEnv, "libnvrtc.so", "cuda_nvrtc", capi.LoadNVRTC)
}

func ensureLink() error {
	return linkLib.ensure("nvJitLink", LinkLibraryEnv, "libnvJitLink.so", "nvjitlink", capi.LoadNvJitLink)
}

// ensure loads library name once (by tryLoad, from the candidates for
// env, the library file base and pip's directory pipDir) and returns the
// outcome of that first attempt, or of [Load].
func (l *loader) ensure(name, env, base, pipDir string, load func(string) (string, bool)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		l.err = tryLoad(name, env, candidates(env, base, pipDir), load)
	}
	return l.err
}

func tryLoad(name, env string, paths []string, load func(string) (string, bool)) error {
	var tried []string
	for _, p := range paths {
		msg, ok := load(p)
		if ok {
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", p, msg))
	}
	return &LoadError{Library: name, Tried: tried, Env: env}
}

// candidates lists where a library is looked for: the environment
// variable alone when set; else the loader's search for the CUDA 13 and
// 12 sonames, the toolkit's lib64, and pip's nvidia/<pipdir>/lib (and
// nvidia/cu13/lib, where CUDA 13's wheels put it).
func candidates(env, base, pipdir string) []string {
	if p := os.Getenv(env); p != "" {
		return []string{p}
	}
	sonames := []string{base + ".13", base + ".12"}
	out := append([]string(nil), sonames...)
	var dirs []string
	if h := os.Getenv("CUDA_HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, "lib64"))
	}
	if h := os.Getenv("CUDA_PATH"); h != "" {
		dirs = append(dirs, filepath.Join(h, "lib64"))
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	var pyroots []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		pyroots = append(pyroots, filepath.Join(v, "lib", "python3*", "site-packages"))
	}
	pyroots = append(pyroots, "/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
		"/usr/local/lib/python3*/site-packages")
	for _, r := range pyroots {
		for _, sub := range []string{pipdir, "cu13", "cu12"} {
			m, _ := filepath.Glob(filepath.Join(r, "nvidia", sub, "lib"))
			dirs = append(dirs, m...)
		}
	}
	for _, d := range dirs {
		for _, s := range sonames {
			p := filepath.Join(d, s)
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// Version returns NVRTC's version (nvrtcVersion), loading it first.
func Version() (major, minor int, err error) {
	if err := ensureNVRTC(); err != nil {
		return 0, 0, err
	}
	major, minor, r := capi.NVRTCVersion()
	if r != 0 {
		return 0, 0, fmt.Errorf("nvrtc: nvrtcVersion: %s", resultString(r))
	}
	return major, minor, nil
}

// LibraryPath is the file NVRTC was loaded from, loading it first.
func LibraryPath() (string, error) {
	if err := ensureNVRTC(); err != nil {
		return "", err
	}
	return capi.NVRTCPath(), nil
}

func resultString(code int) string {
	if s := capi.NVRTCErrorString(code); s != "" {
		return s
	}
	return fmt.Sprintf("result %d", code)
}

// Package faketest runs tests against fake NCCL and CUDA driver libraries,
// so that the binding's loading, argument checks, error paths and
// single-rank data movement are tested on any machine with Go and a C
// compiler, without a GPU.
//
// The fakes are C sources in testdata: fakenccl.c (libnccl.so.2, built once
// per NCCL release variant, each lacking the functions newer than its
// release) and fakecuda.c (libcuda.so.1). They are compiled with `go env CC`
// on first use and cached by content in the user's cache directory.
//
// The cuda and nccl packages load their libraries once per process, so
// every scenario runs in its own child process: Run re-executes the test
// binary for exactly the calling test, with the fakes named by NCCL_LIBRARY
// and NCCL4GO_CUDA_LIBRARY, and the child runs the scenario's function. The
// parent never loads a library.
//
// The knobs of the fakes (FAKE_NCCL_POLLS, FAKE_NCCL_FAIL, ...) are listed at
// the top of each C file; pass them in Env.Extra.
//
// To check the fakes themselves, set NCCL4GO_FAKETEST_SANITIZE=1: they are
// then built with AddressSanitizer and UndefinedBehaviorSanitizer, and the
// children run with those runtimes preloaded.
package faketest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultRelease is the release of the fake NCCL built when Env.Release is
// 0: every function the binding knows.
const DefaultRelease = 23007

// Env describes the fake libraries of one scenario.
type Env struct {
	// Release is the FAKE_RELEASE the fake NCCL is built for: it exports the
	// functions of that release only. 0 means DefaultRelease.
	Release int
	// Version is what ncclGetVersion reports (FAKE_NCCL_VERSION); 0 means
	// Release.
	Version int
	// NotNCCL loads a library that is not NCCL (no ncclGetVersion).
	NotNCCL bool
	// Devices is the number of fake CUDA devices (FAKE_CUDA_DEVICES);
	// 0 means 2, -1 a driver without a device.
	Devices int
	// NoCUDA points NCCL4GO_CUDA_LIBRARY at a file that does not exist.
	NoCUDA bool
	// NoNCCL points NCCL_LIBRARY at a file that does not exist.
	NoNCCL bool
	// Extra holds more KEY=VALUE pairs for the child's environment.
	Extra []string
}

// Environment of a child.
const (
	envChild = "NCCL4GO_FAKE_CHILD"
	envTest  = "NCCL4GO_FAKE_TEST"
	envIndex = "NCCL4GO_FAKE_INDEX"
	envLog   = "FAKE_NCCL_LOG"
	envCC    = "NCCL4GO_FAKE_CC" // the compiler, so that a child need not ask go env
	// envSanitize builds the fakes with sanitizers (read in the parent).
	envSanitize = "NCCL4GO_FAKETEST_SANITIZE"
	// The variables the binding reads (nccl.LibraryEnv, cuda.LibraryEnv).
	envNCCL = "NCCL_LIBRARY"
	envCUDA = "NCCL4GO_CUDA_LIBRARY"
)

// InChild reports whether this process is a child started by Run.
func InChild() bool { return os.Getenv(envChild) == "1" }

// calls counts the Run calls of each test, so that a test running several
// scenarios one after another runs only the right one in each child.
var calls struct {
	sync.Mutex
	n    map[*testing.T]int
	logs map[*testing.T]string
}

func nextIndex(t *testing.T) int {
	calls.Lock()
	defer calls.Unlock()
	if calls.n == nil {
		calls.n = make(map[*testing.T]int)
	}
	i := calls.n[t]
	calls.n[t] = i + 1
	return i
}

// Run runs fn with the fake libraries of env, in a child process of the test
// binary that runs only the calling test (t.Name(), with its subtest path).
// In the parent it waits for the child and fails the test with the child's
// output if the child fails (or skips it if fn skipped); in the child it
// calls fn(t). A test may call Run several times, and from subtests.
//
// Code of the test outside fn also runs in the child when the child's
// scenario belongs to one of its subtests: keep checks inside fn, or guard
// them with InChild.
func Run(t *testing.T, env Env, fn func(t *testing.T)) {
	t.Helper()
	if !loadable {
		t.Skip("faketest: the binding loads the fake libraries only when built with cgo on Linux")
	}
	index := nextIndex(t)
	if InChild() {
		if os.Getenv(envTest) == t.Name() && os.Getenv(envIndex) == strconv.Itoa(index) {
			fmt.Println(marker(t.Name(), index))
			fn(t)
		}
		return
	}
	ncclPath, cudaPath := Libraries(t, env)
	dir := t.TempDir()
	if env.NoNCCL {
		ncclPath = filepath.Join(dir, "missing", "libnccl.so.2")
	}
	if env.NoCUDA {
		cudaPath = filepath.Join(dir, "missing", "libcuda.so.1")
	}
	logPath := filepath.Join(dir, "nccl-calls.log")
	calls.Lock()
	if calls.logs == nil {
		calls.logs = make(map[*testing.T]string)
	}
	calls.logs[t] = logPath
	calls.Unlock()

	timeout := time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d)-5*time.Second, 5*time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	args := []string{"-test.run=" + RunPattern(t.Name()), "-test.v", "-test.count=1",
		"-test.timeout=" + timeout.String()}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = childEnv(env, t.Name(), index, ncclPath, cudaPath, logPath)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	text := string(out)
	ran := strings.Contains(text, marker(t.Name(), index))
	skip := "--- SKIP: " + t.Name() + " "
	switch {
	case err != nil:
		t.Fatalf("fake-library child (%s) failed: %v\n%s", describe(env), err, text)
	case !ran:
		t.Fatalf("fake-library child (%s) did not run the scenario (is Run called the same way in every run "+
			"of the test?):\n%s", describe(env), text)
	case strings.Contains(text, skip):
		t.Skipf("skipped in the fake-library child (%s):\n%s", describe(env), text)
	case testing.Verbose():
		t.Logf("fake-library child (%s):\n%s", describe(env), text)
	}
}

func marker(name string, index int) string {
	return fmt.Sprintf("faketest: running %s, scenario %d", name, index)
}

func describe(env Env) string {
	var parts []string
	switch {
	case env.NotNCCL:
		parts = append(parts, "not NCCL")
	case env.NoNCCL:
		parts = append(parts, "no NCCL")
	default:
		r := env.Release
		if r == 0 {
			r = DefaultRelease
		}
		parts = append(parts, "NCCL "+releaseString(r))
		if env.Version != 0 && env.Version != r {
			parts = append(parts, "reporting "+releaseString(env.Version))
		}
	}
	switch {
	case env.NoCUDA:
		parts = append(parts, "no CUDA")
	case env.Devices < 0:
		parts = append(parts, "CUDA without a device")
	case env.Devices > 0:
		parts = append(parts, fmt.Sprintf("%d devices", env.Devices))
	}
	parts = append(parts, env.Extra...)
	return strings.Join(parts, ", ")
}

func releaseString(r int) string {
	if r < 10000 {
		return strconv.Itoa(r)
	}
	return fmt.Sprintf("%d.%d.%d", r/10000, r/100%100, r%100)
}

// childEnv is the parent's environment without any NCCL, fake or binding
// setting, plus the scenario's.
func childEnv(env Env, name string, index int, ncclPath, cudaPath, logPath string) []string {
	var out []string
	// A -race binary sleeps a second at exit (ThreadSanitizer's
	// atexit_sleep_ms) unless told not to.
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "FAKE_") || strings.HasPrefix(k, "NCCL4GO_") ||
			k == "CUDA_VISIBLE_DEVICES":
			continue
		case k == "GORACE":
			if !strings.Contains(v, "atexit_sleep_ms") {
				gorace = v + " " + gorace
			} else {
				gorace = v
			}
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "GORACE="+gorace)
	out = append(out,
		envChild+"=1", envTest+"="+name, envIndex+"="+strconv.Itoa(index),
		envNCCL+"="+ncclPath, envCUDA+"="+cudaPath, envLog+"="+logPath, envCC+"="+strings.Join(compiler(), " "))
	if sanitize() {
		cc := compiler()
		var preload []string
		for _, lib := range []string{"libasan.so", "libubsan.so"} {
			if p, err := exec.Command(cc[0], append(cc[1:], "-print-file-name="+lib)...).Output(); err == nil {
				preload = append(preload, strings.TrimSpace(string(p)))
			}
		}
		out = append(out, "LD_PRELOAD="+strings.Join(preload, " "),
			"ASAN_OPTIONS=detect_leaks=0:handle_segv=0:allow_user_segv_handler=1:abort_on_error=1",
			"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
	}
	if env.Version != 0 {
		out = append(out, "FAKE_NCCL_VERSION="+strconv.Itoa(env.Version))
	}
	switch {
	case env.Devices < 0:
		out = append(out, "FAKE_CUDA_DEVICES=0")
	case env.Devices > 0:
		out = append(out, "FAKE_CUDA_DEVICES="+strconv.Itoa(env.Devices))
	}
	return append(out, env.Extra...)
}

// RunPattern is a -test.run pattern matching exactly the test name, one
// anchored element per subtest level.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// LogLines returns the calls the fake NCCL logged (FAKE_NCCL_LOG), one
// function name a line. In a child it reads the log of the running
// scenario; in the parent, the log of t's last Run.
func LogLines(t testing.TB) []string {
	t.Helper()
	path := os.Getenv(envLog)
	if !InChild() {
		calls.Lock()
		tt, _ := t.(*testing.T)
		path = calls.logs[tt]
		calls.Unlock()
	}
	if path == "" {
		t.Fatalf("faketest.LogLines: no fake NCCL log for %s", t.Name())
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("faketest.LogLines: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// Calls counts the logged calls of the NCCL function name (see LogLines).
func Calls(t testing.TB, name string) int {
	t.Helper()
	n := 0
	for _, l := range LogLines(t) {
		if l == name {
			n++
		}
	}
	return n
}

// Libraries builds (or finds in the cache) the fake libraries of env and
// returns their paths: the fake NCCL (or the library that is not NCCL) and
// the fake CUDA driver. It does not load them.
func Libraries(t testing.TB, env Env) (ncclPath, cudaPath string) {
	t.Helper()
	variant := "nccl-notnccl"
	if !env.NotNCCL {
		r := env.Release
		if r == 0 {
			r = DefaultRelease
		}
		variant = "nccl-" + strconv.Itoa(r)
	}
	return mustLibrary(t, variant, "NCCL"), mustLibrary(t, "cuda", "CUDA driver")
}

// builds holds one sync.OnceValues per variant.
var builds sync.Map // string -> func() (string, error)

func library(variant string) (string, error) {
	f, _ := builds.LoadOrStore(variant, sync.OnceValues(func() (string, error) { return build(variant) }))
	return f.(func() (string, error))()
}

// build compiles one variant into the cache, keyed by the source, the
// compiler and its flags, unless it is there.
func build(variant string) (string, error) {
	src := "fakenccl.c"
	flags := []string{"-shared", "-fPIC", "-O1", "-std=gnu11"}
	if sanitize() {
		flags = append(flags, "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined")
	}
	switch {
	case variant == "cuda":
		src = "fakecuda.c"
	case variant == "nvrtc":
		src = "fakenvrtc.c"
	case variant == "nvjitlink":
		src = "fakenvjitlink.c"
	case variant == "nccl-notnccl":
		flags = append(flags, "-DFAKE_NOT_NCCL")
	default:
		flags = append(flags, "-DFAKE_RELEASE="+strings.TrimPrefix(variant, "nccl-"))
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the package's sources")
	}
	srcPath := filepath.Join(filepath.Dir(file), "testdata", src)
	code, err := os.ReadFile(srcPath)
	if err != nil {
		return "", err
	}
	cc := compiler()
	libs := []string{"-ldl", "-lpthread", "-lm"}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q\n", cc, flags, libs)
	h.Write(code)
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-%s.so", variant, hex.EncodeToString(h.Sum(nil))[:16]))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.CreateTemp(dir, variant+"-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append(append(append(cc[1:], flags...), "-o", tmp.Name(), srcPath), libs...)
	if msg, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", cc[0], strings.Join(args, " "), err, msg)
	}
	// Concurrent test binaries may build the same file: the rename is atomic.
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}

func sanitize() bool { return os.Getenv(envSanitize) == "1" }

// compiler is `go env CC`, else cc or gcc, split into words. It is asked
// once per process.
var compiler = sync.OnceValue(func() []string {
	if f := strings.Fields(os.Getenv(envCC)); len(f) > 0 {
		return f
	}
	if out, err := exec.Command("go", "env", "CC").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 {
			return f
		}
	}
	for _, c := range []string{"cc", "gcc"} {
		if p, err := exec.LookPath(c); err == nil {
			return []string{p}
		}
	}
	return []string{"cc"}
})

// cacheDir is a private directory for built libraries: under the user's
// cache directory, else under the temporary directory.
func cacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("nccl4go-%d", os.Getuid()))
	}
	dir := filepath.Join(base, "nccl4go-faketest")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// LiveComms is the number of communicators of the fake NCCL that were made
// and not yet destroyed or aborted, as its log last recorded it (0 when the
// fake made none).
func LiveComms(t testing.TB) int {
	t.Helper()
	n := 0
	for _, l := range LogLines(t) {
		if v, ok := strings.CutPrefix(l, "live="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	return n
}

// leaksAllowed is set by AllowLeakedComms in a child.
var leaksAllowed struct {
	sync.Mutex
	reason string
}

// AllowLeakedComms lets the scenario of this child end with communicators
// of the fake alive (a test of leak reporting, or of a thread that ends
// inside a group, whose communicators can never be freed); reason says why.
func AllowLeakedComms(reason string) {
	leaksAllowed.Lock()
	leaksAllowed.reason = reason
	leaksAllowed.Unlock()
}

// Main runs the tests (m.Run) and then checks for leaks, failing the run
// (exit 1) when it finds one: in a fake-library child, communicators of the
// fake still alive (unless AllowLeakedComms was called), and in every
// process, goroutines started by the tests and still running. Call it from
// TestMain: os.Exit(faketest.Main(m)).
func Main(m *testing.M) int {
	before, _ := goroutines()
	code := m.Run()
	if code != 0 {
		return code
	}
	if InChild() {
		if path := os.Getenv(envLog); path != "" {
			if n := liveInLog(path); n > 0 {
				leaksAllowed.Lock()
				reason := leaksAllowed.reason
				leaksAllowed.Unlock()
				if reason == "" {
					fmt.Fprintf(os.Stderr, "faketest: leak check: %d communicator(s) of the fake NCCL still alive after %s (destroy or abort every communicator a test makes)\n", n, os.Getenv(envTest))
					return 1
				}
			}
		}
	}
	// While fuzzing, the engine's own goroutines come and go: no check.
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return 0
	}
	// Goroutines the runtime or a test's cleanup ends a moment later are
	// given half a second.
	n, stacks := goroutines()
	for i := 0; i < 100 && n > before; i++ {
		time.Sleep(5 * time.Millisecond)
		n, stacks = goroutines()
	}
	if n > before {
		fmt.Fprintf(os.Stderr, "faketest: leak check: %d goroutines after the tests, %d before:\n%s\n", n, before, stacks)
		return 1
	}
	return 0
}

// goroutines counts the goroutines that tests start and should end, and
// returns their stacks: not the process-wide ones that live on by design
// (os/signal's loop once a signal is watched, the fuzzing engine's).
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var kept []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "os/signal.signal_recv") || strings.Contains(g, "testing.(*F)") ||
			strings.Contains(g, "internal/fuzz.") {
			continue
		}
		kept = append(kept, g)
	}
	return len(kept), strings.Join(kept, "\n\n")
}

// liveInLog reads the fake NCCL's last count of live communicators from its
// log (0 when it made none).
func liveInLog(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "live="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	return n
}

//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// launcherChild is the launcher (`nccl4go run`) started as a child process
// of the test, through main, so that it can be signalled and killed.
type launcherChild struct {
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	code   int
}

// startLauncher starts `nccl4go args...` in a child process.
func startLauncher(t *testing.T, args ...string) *launcherChild {
	t.Helper()
	a, _ := json.Marshal(args)
	l := &launcherChild{done: make(chan struct{})}
	l.cmd = exec.Command(os.Args[0])
	l.cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	l.cmd.Stdout, l.cmd.Stderr = &l.stdout, &l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := l.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			l.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				l.code = 128 + int(ws.Signal())
			}
		}
		close(l.done)
	}()
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		<-l.done
	})
	return l
}

// wait waits for the launcher to end, at most d, and returns its status.
func (l *launcherChild) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(d):
		t.Fatalf("the launcher did not end within %v\nstdout:\n%s\nstderr:\n%s", d, l.stdout.String(), l.stderr.String())
	}
	t.Logf("launcher exit status %d\nstdout:\n%s\nstderr:\n%s", l.code, l.stdout.String(), l.stderr.String())
	return l.code
}

// waitFiles waits until every one of the files exists and is not empty.
func waitFiles(t *testing.T, d time.Duration, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, p := range paths {
		for {
			if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear within %v", p, d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pidsIn reads the process ids the ranks wrote into dir (one per line in
// files named pids.*), and kills them when the test ends, so that a
// failing test leaves nothing behind.
func pidsIn(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "pids.*"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: %q is not a pid", f, s)
			}
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no pids in %s", dir)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pids
}

// alive reports whether pid is a live process (a zombie is dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		_, noProc := os.Stat("/proc/self")
		return noProc != nil // no /proc: trust kill; else it has just gone
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// survivors returns the pids still alive after waiting at most d for them
// to go.
func survivors(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var live []int
		for _, pid := range pids {
			if alive(pid) {
				live = append(live, pid)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// describePids says what the processes are, for a failure message.
func describePids(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fmt.Fprintf(&b, "\n  pid %d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return b.String()
}

// forwardScript is a rank that dies of the first signal it gets.
const forwardScript = `echo "$RANK" > "$DIR/ready.$RANK"; exec sleep 300`

// One signal to the launcher reaches every rank as that signal, every
// time: it reached them as SIGINT or SIGTERM by a race (main's
// signal.NotifyContext and the launcher's own channel both got it).
func TestRunForwardsTheSignalReceived(t *testing.T) {
	requireSh(t)
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	names := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}
	const rounds = 60
	wrong := 0
	for i := range rounds {
		sig := sigs[i%len(sigs)]
		dir := t.TempDir()
		l := startLauncher(t, "run", "-n", "3", "-grace", "10s", "-env", "DIR="+dir, "sh", "-c", forwardScript)
		waitFiles(t, 10*time.Second, filepath.Join(dir, "ready.0"), filepath.Join(dir, "ready.1"), filepath.Join(dir, "ready.2"))
		time.Sleep(10 * time.Millisecond) // sh has exec'd sleep
		l.cmd.Process.Signal(sig)
		code := l.wait(t, 20*time.Second)
		errs := l.stderr.String()
		got := len(regexp.MustCompile(`(?m)^nccl4go run: +\d+ +killed by `+names[sig]+` `).FindAllString(errs, -1))
		if got != 3 || code != 128+int(sig) {
			wrong++
			t.Errorf("round %d: sent %s: %d of 3 ranks died of it, exit status %d (want %d)\nstderr:\n%s", i, names[sig], got, code, 128+int(sig), errs)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d rounds did not forward the signal received", wrong, rounds)
	}
}

// When the reader of the launcher's stdout goes away, the ranks are
// stopped with SIGTERM and their grace (the launcher died of SIGPIPE and
// the ranks got SIGKILL).
func TestRunStdoutReaderGone(t *testing.T) {
	requireSh(t)
	dir := t.TempDir()
	a, _ := json.Marshal([]string{"run", "-n", "2", "-grace", "10s", "-env", "DIR=" + dir, "sh", "-c",
		`trap 'echo "rank $RANK got TERM" >&2; exit 0' TERM; echo "$RANK" > "$DIR/ready.$RANK"; while :; do echo tick; sleep 0.02; done`})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitFiles(t, 10*time.Second, filepath.Join(dir, "ready.0"), filepath.Join(dir, "ready.1"))
	buf := make([]byte, 10)
	r.Read(buf)
	r.Close() // the reader goes away
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the launcher did not end after its stdout closed\nstderr:\n%s", stderr.String())
	}
	t.Logf("launcher: %v\nstderr:\n%s", err, stderr.String())
	errs := stderr.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 141 {
		t.Errorf("launcher: %v, want exit status 141", err)
	}
	for rank := range 2 {
		if !strings.Contains(errs, fmt.Sprintf("rank %d got TERM", rank)) {
			t.Errorf("rank %d was not given SIGTERM and its grace", rank)
		}
	}
	if strings.Contains(errs, "killed by SIGKILL") {
		t.Errorf("ranks were killed")
	}
}

// A multi-node run without a secret says that its store is open.
func TestRunWarnsWithoutSecret(t *testing.T) {
	requireSh(t)
	t.Setenv("NCCL4GO_STORE_SECRET", "")
	os.Unsetenv("NCCL4GO_STORE_SECRET")
	port := testPort(t, "127.0.0.1")
	storePort := testPort(t, "127.0.0.1")
	for storePort == port {
		storePort = testPort(t, "127.0.0.1")
	}
	_, errs, err := launch(t, context.Background(), "-nnodes", "2", "-node-rank", "0", "-master-port", strconv.Itoa(port),
		"-store-port", strconv.Itoa(storePort), "true")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs, "warning") || !strings.Contains(errs, "NCCL4GO_STORE_SECRET") {
		t.Errorf("no warning about the open store:\n%s", errs)
	}
	// One node makes up its own secret: no warning.
	_, errs, _ = launch(t, context.Background(), "true")
	if strings.Contains(errs, "warning") {
		t.Errorf("a warning on one node:\n%s", errs)
	}
}

// One Ctrl-C that both cancels the context (main's NotifyContext) and
// reaches the launcher's own signal channel gives the ranks their grace:
// no SIGKILL (it did, when the two arrived context first).
func TestRunOneInterruptKeepsGrace(t *testing.T) {
	requireSh(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, func() {
		cancel()
		time.Sleep(20 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	})
	_, errs, _ := launch(t, ctx, "-n", "2", "-grace", "3s", "sh", "-c", `trap 'sleep 1; exit 0' INT TERM; sleep 30 & wait`)
	if strings.Contains(errs, "SIGKILL") {
		t.Errorf("one interrupt killed ranks with SIGKILL:\n%s", errs)
	}
}

// While ranks take their grace after a cancel, the launcher waits without
// spinning.
func TestRunNoSpinAfterCancel(t *testing.T) {
	requireSh(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	launch(t, ctx, "-n", "2", "-grace", "2s", "sh", "-c", `trap 'sleep 1.5; exit 0' TERM; sleep 30 & wait`)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	if wall := time.Since(start); cpu > wall/2 {
		t.Errorf("the launcher burned %v of CPU in %v", cpu, wall)
	}
}

// A second signal ends the grace: the ranks are killed at once.
func TestRunSecondSignalKills(t *testing.T) {
	requireSh(t)
	dir := t.TempDir()
	l := startLauncher(t, "run", "-n", "2", "-grace", "60s", "-env", "DIR="+dir, "sh", "-c",
		`trap 'echo "rank $RANK ignores it"' INT TERM; echo "$RANK" > "$DIR/ready.$RANK"; while :; do sleep 0.02; done`)
	waitFiles(t, 10*time.Second, filepath.Join(dir, "ready.0"), filepath.Join(dir, "ready.1"))
	l.cmd.Process.Signal(syscall.SIGINT)
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(l.stdout.String(), "ignores it") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	l.cmd.Process.Signal(syscall.SIGINT)
	code := l.wait(t, 20*time.Second)
	killed := regexp.MustCompile(`(?m)^nccl4go run: +\d+ +killed by SIGKILL `).FindAllString(l.stderr.String(), -1)
	if code != 137 || len(killed) != 2 {
		t.Errorf("exit status %d, want 137 with both ranks killed by SIGKILL", code)
	}
}

// On every Unix: what a rank leaves in its process group when it ends is
// killed before the launcher returns (on Linux by the rank's supervisor,
// elsewhere by the launcher).
func TestRunGroupLeftoversKilled(t *testing.T) {
	requireSh(t)
	dir := t.TempDir()
	_, _, err := launch(t, context.Background(), "-n", "2", "-grace", "300ms", "-env", "DIR="+dir, "sh", "-c",
		`(trap '' INT TERM HUP; exec sleep 300) & echo "$!" > "$DIR/pids.$RANK"; exit 0`)
	if err != nil {
		t.Fatal(err)
	}
	pids := pidsIn(t, dir)
	if live := survivors(pids, 0); len(live) > 0 {
		t.Errorf("%d processes outlived the launcher:%s", len(live), describePids(live))
	}
}

// Several nodes without --store-port (help: "master port + 1 on
// several"): node 0's store, and the address its ranks get, is on the
// master port + 1; and the warning about an open store names that port.
func TestRunStorePortDefault(t *testing.T) {
	requireSh(t)
	t.Setenv("NCCL4GO_STORE_SECRET", "")
	os.Unsetenv("NCCL4GO_STORE_SECRET")
	port := testPort(t, "127.0.0.1")
	for range 100 {
		if l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port+1))); err == nil {
			l.Close()
			break
		}
		port = testPort(t, "127.0.0.1")
	}
	out, errs, err := launch(t, context.Background(), "--nnodes", "2", "--node-rank", "0", "--master-port", strconv.Itoa(port),
		"--no-prefix", "sh", "-c", `echo "store=$NCCL4GO_STORE_ADDR"`)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("store=127.0.0.1:%d\n", port+1)
	if !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q", want)
	}
	if !strings.Contains(errs, fmt.Sprintf("port %d of every interface", port+1)) {
		t.Errorf("the warning does not name the store's port %d:\n%s", port+1, errs)
	}
}

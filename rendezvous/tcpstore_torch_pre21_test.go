package rendezvous

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// torchPre21Python finds a python whose torch is older than 2.1 (Debian
// bookworm's python3-torch is 1.13): NCCL4GO_TORCH_PRE21_PYTHON, or python3.
// It skips, with the reason, when there is none. CI does not install it:
// python3-torch pulls in libtorch and its tests, hundreds of MB, for two
// tests whose behaviour TestDialPreTorch21Server and TestServerPreTorch21Client
// check byte for byte against a model.
func torchPre21Python(t *testing.T) (python, script string) {
	t.Helper()
	candidates := []string{"python3", "/usr/bin/python3"} // Debian's, where a pyenv shim hides it
	if p := os.Getenv("NCCL4GO_TORCH_PRE21_PYTHON"); p != "" {
		candidates = []string{p}
	}
	var seen []string
	for _, python = range candidates {
		out, err := exec.Command(python, "-c", "import torch; print(torch.__version__)").Output()
		if err != nil {
			seen = append(seen, python+": no torch")
			continue
		}
		v := strings.TrimSpace(string(out))
		var major, minor int
		if n, _ := fmtSscanf(v, &major, &minor); n != 2 || major > 2 || (major == 2 && minor >= 1) {
			seen = append(seen, python+": torch "+v)
			continue
		}
		script, _ = filepath.Abs(filepath.Join("testdata", "torch_pre21.py"))
		t.Logf("%s: torch %s", python, v)
		return python, script
	}
	t.Skipf("no torch before 2.1 (%s): install Debian's python3-torch (1.13) or set NCCL4GO_TORCH_PRE21_PYTHON",
		strings.Join(seen, "; "))
	return "", ""
}

// TestTorchPre21Server: the Go client against torch 1.13's own server stops
// at once with ErrOldTorch.
func TestTorchPre21Server(t *testing.T) {
	python, script := torchPre21Python(t)
	cmd := exec.Command(python, script, "server")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	port := ""
	for sc.Scan() {
		t.Log(sc.Text())
		if p, ok := strings.CutPrefix(sc.Text(), "PORT "); ok {
			port = p
			break
		}
	}
	if port == "" {
		t.Fatal("torch's server printed no port")
	}
	start := time.Now()
	_, err := Dial(context.Background(), "127.0.0.1:"+port, &DialOptions{Timeout: 20 * time.Second})
	var de *DialError
	if !errors.Is(err, ErrOldTorch) || !errors.As(err, &de) || de.Attempts != 1 {
		t.Fatalf("Dial to torch's pre-2.1 server = %v, want ErrOldTorch after one attempt", err)
	}
	t.Logf("after %v: %v", time.Since(start), err)
}

// TestTorchPre21Client: torch 1.13's client against the Go server is closed
// at once and the server's log names a pre-2.1 torch client.
func TestTorchPre21Client(t *testing.T) {
	python, script := torchPre21Python(t)
	var mu sync.Mutex
	var logs []string
	srv := startServer(t, &ServerOptions{Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, sprintf(f, a...))
		mu.Unlock()
	}})
	_, port, _ := strings.Cut(srv.Addr().String(), ":")
	out, err := exec.Command(python, script, "client", port).CombinedOutput()
	t.Logf("python: %v\n%s", err, out)
	if strings.Contains(string(out), "VALUE") {
		t.Fatal("a pre-2.1 torch client was served")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) == 0 || !strings.Contains(strings.Join(logs, "\n"), "pre-2.1 torch") {
		t.Fatalf("server log %q does not name a pre-2.1 torch client", logs)
	}
}

// fmtSscanf reads "major.minor" from a torch version ("1.13.1+dfsg").
func fmtSscanf(v string, major, minor *int) (int, error) {
	return fmt.Sscanf(v, "%d.%d", major, minor)
}

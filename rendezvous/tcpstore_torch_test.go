package rendezvous

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// torchPython returns the python named by NCCL4GO_TORCH_PYTHON, or skips.
func torchPython(t *testing.T) string {
	py := os.Getenv("NCCL4GO_TORCH_PYTHON")
	if py == "" {
		t.Skip("set NCCL4GO_TORCH_PYTHON to a python with torch to test interop with torch's TCPStore")
	}
	if interopScript() == "" {
		t.Fatal("testdata/torch_interop.py not found: run the test from the repository root or rendezvous/")
	}
	return py
}

// interopScript finds the script from the package directory (go test) or the
// repository root (a test binary run there).
func interopScript() string {
	for _, p := range []string{filepath.Join("testdata", "torch_interop.py"), filepath.Join("rendezvous", "testdata", "torch_interop.py")} {
		if abs, err := filepath.Abs(p); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs
			}
		}
	}
	return ""
}

// checkScript fails the test for FAIL lines or a bad exit.
func checkScript(t *testing.T, out string, err error) {
	t.Helper()
	t.Logf("torch_interop.py:\n%s", out)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL") {
			t.Errorf("python: %s", line)
		}
	}
	if err != nil {
		t.Fatalf("torch_interop.py: %v", err)
	}
	if !strings.Contains(out, "DONE failures=0") {
		t.Fatal("torch_interop.py did not finish")
	}
}

// TestTorchInteropGoServer: torch's client against the Go server.
func TestTorchInteropGoServer(t *testing.T) {
	py := torchPython(t)
	srv := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local := srv.Local()
	local.Set(ctx, "go/hello", []byte("from go"))
	WithPrefix(local, "nccl4go").Set(ctx, "job", []byte("prefixed"))

	out, err := exec.CommandContext(ctx, py, interopScript(), "client", srv.Addr().String()).CombinedOutput()
	checkScript(t, string(out), err)
	if v, err := local.Get(ctx, "py/hello"); err != nil || string(v) != "from python" {
		t.Fatalf("Go server: py/hello = %q, %v", v, err)
	}
	if v, err := local.Get(ctx, "py/count"); err != nil || string(v) != "3" {
		t.Fatalf("Go server: py/count = %q, %v", v, err)
	}

	// A torch client cannot join a Go server that requires a secret.
	sec := startServer(t, &ServerOptions{Secret: "job-secret"})
	out, err = exec.CommandContext(ctx, py, interopScript(), "refused", sec.Addr().String()).CombinedOutput()
	checkScript(t, string(out), err)
}

// TestTorchInteropTorchServer: the Go client against torch's servers (libuv,
// torch's default, and the classic one).
func TestTorchInteropTorchServer(t *testing.T) {
	py := torchPython(t)
	for _, kind := range []string{"libuv", "classic"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, interopScript(), "server", kind)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// Read stdout until the port, keep the rest for the verdict.
			var mu sync.Mutex
			var all strings.Builder
			portc := make(chan string, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					line := sc.Text()
					mu.Lock()
					all.WriteString(line + "\n")
					mu.Unlock()
					if p, ok := strings.CutPrefix(line, "PORT "); ok {
						portc <- p
					}
				}
			}()
			var port string
			select {
			case port = <-portc:
			case <-done:
				t.Fatalf("torch server exited before printing its port:\n%s\n%s", all.String(), stderr.String())
			case <-time.After(2 * time.Minute):
				t.Fatal("torch server printed no port")
			}
			addr := "127.0.0.1:" + port
			c, err := Dial(ctx, addr, &DialOptions{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("Dial torch %s server: %v", kind, err)
			}
			defer c.Close()

			// The whole Store contract, under a prefix of our own.
			storeSemantics(t, WithPrefix(c, "gotest"))
			if v, err := c.Get(ctx, "py/hello"); err != nil || string(v) != "from python" {
				t.Fatalf("py/hello = %q, %v", v, err)
			}
			if n, err := c.Add(ctx, "py/count", 1); err != nil || n != 42 {
				t.Fatalf("Add py/count = %d, %v", n, err)
			}
			if err := c.MultiSet(ctx, []string{"go/m1", "go/m2"}, [][]byte{[]byte("1"), []byte("2")}); err != nil {
				t.Fatal(err)
			}
			if vs, err := c.MultiGet(ctx, "go/m2", "go/m1"); err != nil || len(vs) != 2 || string(vs[0]) != "2" {
				t.Fatalf("MultiGet = %q, %v", vs, err)
			}
			if err := c.Append(ctx, "go/ap", []byte("a")); err != nil {
				t.Fatal(err)
			}
			if n, err := c.NumKeys(ctx); err != nil || n < 5 {
				t.Fatalf("NumKeys = %d, %v", n, err)
			}
			if keys, err := c.List(ctx); err != nil || len(keys) == 0 {
				t.Logf("List on torch %s server: %v, %v (LIST needs a recent torch)", kind, keys, err)
			}
			if kind == "libuv" {
				if err := c.QueuePush(ctx, "go/q", []byte("item")); err != nil {
					t.Fatal(err)
				}
				if v, ok, err := c.QueuePop(ctx, "go/q", true); err != nil || !ok || string(v) != "item" {
					t.Fatalf("QueuePop = %q %v %v", v, ok, err)
				}
			}
			bin := make([]byte, 256)
			for i := range bin {
				bin[i] = byte(i)
			}
			c.Set(ctx, "go/bin", bin)
			WithPrefix(c, "nccl4go").Set(ctx, "job", []byte("prefixed"))
			c.Set(ctx, "go/value", []byte("from go"))

			// A client with a secret is refused by torch's server, clearly.
			_, err = Dial(ctx, addr, &DialOptions{Secret: "s", Timeout: 3 * time.Second})
			if err == nil {
				t.Fatal("a secret-holding client joined a torch store")
			}
			t.Logf("secret client vs torch %s server: %v (unauthorized: %v)", kind, err, errors.Is(err, ErrUnauthorized))

			if err := c.Set(ctx, "go/done", nil); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			<-done
			mu.Lock()
			out := all.String() + stderr.String()
			mu.Unlock()
			checkScript(t, out, err)
		})
	}
}

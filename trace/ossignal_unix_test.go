//go:build unix

package trace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDumpOnSignal(t *testing.T) {
	dir := t.TempDir()
	r := New(16)
	r.RegisterComm(CommInfo{Name: "sig", Rank: 0, Size: 1}).Record(Event{Op: AllReduce})
	stop := r.DumpOnSignal(dir, syscall.SIGUSR2)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	var files []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(dir, "nccl4go-trace-*.json"))
		if len(files) > 0 {
			break
		}
	}
	if len(files) != 1 {
		t.Fatalf("dumps after the signal: %v", files)
	}
	d, err := ReadDumpFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Reason, "signal ") {
		t.Errorf("reason %q", d.Reason)
	}
	stop()
	stop() // idempotent
}

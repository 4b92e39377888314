package nccl_test

import (
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// A goroutine that exits with a group open ends its thread: its
// communicators then refuse new work but can be aborted.
func TestThreadExitInsideGroup(t *testing.T) {
	collFake(t, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		orphan(t, c, b)
		if err := c.Abort(); err != nil {
			t.Fatalf("Abort of an orphaned communicator: %v", err)
		}
		if n := capi.GroupRecords(); n != 0 {
			t.Errorf("the shim still records %d communicator(s) after the abort", n)
		}
		// Destroy of an orphaned communicator aborts it (NCCL could never
		// finalize the work queued on it), and reports no error.
		d := collComm(t, 1, 0, 0)
		orphan(t, d, b)
		if err := d.Destroy(); err != nil {
			t.Errorf("Destroy of an orphaned communicator: %v", err)
		}
		if d.IsValid() || capi.GroupRecords() != 0 {
			t.Errorf("after Destroy: valid %v, %d record(s)", d.IsValid(), capi.GroupRecords())
		}
	})
}

// orphan makes c orphaned: a goroutine queues work on c in a group and
// exits inside it; orphan returns once c refuses new work.
func orphan(t *testing.T, c *nccl.Communicator, b nccl.Buffer) {
	t.Helper()
	// Go ends the thread of a goroutine that exits locked to it, except
	// the process's main thread, which it parks: run on another.
	for {
		done := make(chan error)
		onMain := make(chan bool)
		go func() {
			runtime.LockOSThread()
			main := syscall.Gettid() == syscall.Getpid()
			onMain <- main
			if main {
				runtime.UnlockOSThread()
				return
			}
			if err := nccl.GroupStart(); err != nil {
				done <- err
				return
			}
			done <- c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
			// Exits still locked to its thread (twice): Go ends the thread.
		}()
		if <-onMain {
			continue
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		break
	}
	// Once the thread is gone, the communicator refuses new work (NCCL
	// can never run what the dead thread's group queued).
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{})
		if errors.Is(err, nccl.ErrInvalidUsage) && strings.Contains(err.Error(), "exited inside a group") {
			break
		}
		if !errors.Is(err, nccl.ErrInvalidUsage) || time.Now().After(deadline) {
			t.Fatalf("AllReduce after the holding thread ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

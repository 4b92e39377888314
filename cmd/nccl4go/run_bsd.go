//go:build unix && !linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Where there is no child subreaper (macOS, the BSDs), each rank runs in a
// process group of its own, directly under the launcher: signals go to
// that group, and what is left of the group when the rank ends is killed.
// Processes that leave the group, and everything when the launcher itself
// is killed with SIGKILL, are not covered.

// rankSys is empty: the rank is the launcher's own child.
type rankSys struct{}

// rankCommand is the rank's process, in a group of its own.
func rankCommand(f *runFlags) *exec.Cmd {
	cmd := exec.Command(f.program, f.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func startRank(p *rankProc) error { return p.cmd.Start() }

// watchRank waits for the rank, then kills what is left of its group.
func watchRank(p *rankProc, events chan<- rankEvent) {
	p.cmd.Wait() //nolint:errcheck // its state is what matters
	end := time.Now()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // ESRCH: nothing left
	events <- rankEvent{p: p, exit: exitOf(p.cmd.ProcessState), end: end}
	events <- rankEvent{p: p, gone: true}
}

// signalRank sends s to the rank's process group.
func signalRank(p *rankProc, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok {
		syscall.Kill(-p.cmd.Process.Pid, sig) //nolint:errcheck // the rank may be gone
	}
}

// superviseMain: no supervisor here.
func superviseMain([]string) int {
	fmt.Fprintf(os.Stderr, "nccl4go: %s is nccl4go run's own, on Linux\n", superviseCommand)
	return 2
}

//go:build !unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"
)

// Without Unix signals, stopping a rank kills its process; nothing more is
// promised about what it started.
var (
	termSignal       os.Signal = os.Kill
	killSignal       os.Signal = os.Kill
	brokenPipeSignal os.Signal // none
)

type rankSys struct{}

func rankCommand(f *runFlags) *exec.Cmd { return exec.Command(f.program, f.args...) }

func startRank(p *rankProc) error { return p.cmd.Start() }

func watchRank(p *rankProc, events chan<- rankEvent) {
	p.cmd.Wait() //nolint:errcheck // its state is what matters
	events <- rankEvent{p: p, exit: exitOf(p.cmd.ProcessState), end: time.Now()}
	events <- rankEvent{p: p, gone: true}
}

func signalRank(p *rankProc, _ os.Signal) {
	p.cmd.Process.Kill() //nolint:errcheck // the rank may be gone
}

func notifySignals() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, os.Interrupt)
	return c, func() { signal.Stop(c) }
}

func signalStatus(os.Signal) (int, bool)    { return 0, false }
func signalOf(*os.ProcessState) (int, bool) { return 0, false }
func signalName(sig int) string             { return "signal " + strconv.Itoa(sig) }

func superviseMain([]string) int {
	fmt.Fprintf(os.Stderr, "nccl4go: %s is nccl4go run's own, on Linux\n", superviseCommand)
	return 2
}

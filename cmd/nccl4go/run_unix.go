//go:build unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// setProcAttr puts each rank in a process group of its own, so that
// stopping a rank stops what it started too, and a terminal's Ctrl-C
// reaches the ranks only through the launcher (which forwards it once).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// notifySignals delivers the signals run forwards.
func notifySignals() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// forward sends s to the rank's process group.
func forward(p *rankProc, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok && p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, sig) //nolint:errcheck // the rank may be gone
	}
}

func terminate(p *rankProc) { forward(p, syscall.SIGTERM) }
func killRank(p *rankProc)  { forward(p, syscall.SIGKILL) }

// signalOf returns the signal that ended the process.
func signalOf(st *os.ProcessState) (int, bool) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}

// signalName is "SIGTERM" for the signal that ended the process.
func signalName(st *os.ProcessState) string {
	ws, _ := st.Sys().(syscall.WaitStatus)
	if name, ok := signalNames[ws.Signal()]; ok {
		return name
	}
	return ws.Signal().String()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
}

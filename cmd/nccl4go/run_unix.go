//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// The signals the launcher sends: to stop the ranks, to kill them after
// their grace, and the one whose status (141) it exits with when its
// stdout's reader has gone.
var (
	termSignal       os.Signal = syscall.SIGTERM
	killSignal       os.Signal = syscall.SIGKILL
	brokenPipeSignal os.Signal = syscall.SIGPIPE
)

// notifySignals delivers the signals run forwards. It also catches
// SIGPIPE, so that a write to a stdout nobody reads fails with EPIPE
// (which stops the ranks with their grace) instead of killing the
// launcher, and with it the ranks without grace.
func notifySignals() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return c, func() { signal.Stop(c); signal.Stop(pipe) }
}

// signalStatus is 128 + the number of s, a shell's status for a process
// that s ended.
func signalStatus(s os.Signal) (int, bool) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return 0, false
	}
	return 128 + int(sig), true
}

// signalOf returns the signal that ended the process.
func signalOf(st *os.ProcessState) (int, bool) {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}

// signalName is "SIGTERM" for signal 15.
func signalName(sig int) string {
	if name, ok := signalNames[syscall.Signal(sig)]; ok {
		return name
	}
	return syscall.Signal(sig).String()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
}

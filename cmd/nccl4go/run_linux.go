package main

import "syscall"

// setDeathSignal kills a rank when the launcher dies (SIGKILL included), so
// that no rank outlives a killed launcher.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

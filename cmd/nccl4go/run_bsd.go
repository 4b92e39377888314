//go:build unix && !linux

package main

import "syscall"

// setDeathSignal: only Linux can kill a child when its parent dies.
func setDeathSignal(*syscall.SysProcAttr) {}

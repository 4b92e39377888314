package nccl

import "syscall"

// threadID is the calling OS thread's id (gettid), for the per-thread state
// of NCCL groups.
func threadID() int { return syscall.Gettid() }

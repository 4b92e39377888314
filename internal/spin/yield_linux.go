package spin

import "syscall"

// osYield is sched_yield(2): the thread goes to the end of its core's run
// queue, so a thread of NCCL's pinned to the same core runs.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

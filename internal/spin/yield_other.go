//go:build !linux

package spin

import "time"

// osYield sleeps 1 µs: outside Linux no sched_yield is reachable without
// cgo, and a sleep also gives the thread away.
func osYield() { time.Sleep(time.Microsecond) }

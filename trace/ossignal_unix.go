//go:build unix

package trace

import (
	"os"
	"syscall"
)

// DefaultDumpSignal is the signal DumpOnSignal listens for when given none:
// SIGUSR1 (`kill -USR1 <pid>`).
var DefaultDumpSignal os.Signal = syscall.SIGUSR1

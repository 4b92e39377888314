//go:build !unix

package trace

import "os"

// DefaultDumpSignal is the signal DumpOnSignal listens for when given none;
// this system has no SIGUSR1, so there is none.
var DefaultDumpSignal os.Signal

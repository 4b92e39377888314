//go:build amd64 || arm64

package trace

// counter reads the CPU's constant-rate counter: the time-stamp counter
// (RDTSC) on amd64, the generic timer's virtual count (CNTVCT_EL0) on arm64.
func counter() int64

// haveCounter says that counter reads hardware.
const haveCounter = true

//go:build !amd64 && !arm64

package trace

// counter is not available on this architecture; the recorder uses the
// monotonic clock.
func counter() int64 { return 0 }

// haveCounter says that counter reads hardware.
const haveCounter = false

package trace

import (
	"bytes"
	"os"
	"runtime"
	"sync"
	"time"
)

// ClockEnv names the environment variable that picks the recorder's clock:
// "counter" (the CPU's constant-rate counter, RDTSC on amd64 and CNTVCT_EL0
// on arm64) or "mono" (Go's monotonic clock). Unset, the counter is used
// where it is known to tick at a constant rate on every CPU (arm64 always;
// amd64 on Linux when /proc/cpuinfo lists constant_tsc and nonstop_tsc),
// else the monotonic clock. Either way a dump reports times as Unix
// nanoseconds; counter readings are converted with a rate measured against
// the monotonic clock since the process started recording.
const ClockEnv = "NCCL4GO_TRACE_CLOCK"

// clock is the process's recording clock. It is chosen once, before the
// first recorder exists, and never changes.
type clock struct {
	useCounter bool
	base       time.Time // wall and monotonic reading at t0
	baseTicks  int64     // counter at base (useCounter)

	mu       sync.Mutex
	lastMono time.Duration // calibration: monotonic time since base ...
	lastTick int64         // ... and the counter read with it
}

var (
	clk     clock
	clkOnce sync.Once
)

// theClock is the process's recording clock, set up on first use.
func theClock() *clock {
	clkOnce.Do(func() {
		clk.useCounter = chooseCounter(os.Getenv(ClockEnv))
		clk.base = time.Now()
		if clk.useCounter {
			clk.baseTicks = counter()
		}
	})
	return &clk
}

// chooseCounter decides whether the counter is the clock.
func chooseCounter(env string) bool {
	switch env {
	case "mono":
		return false
	case "counter":
		return haveCounter
	}
	if !haveCounter {
		return false
	}
	switch runtime.GOARCH {
	case "arm64":
		return true
	case "amd64":
		if runtime.GOOS != "linux" {
			return false
		}
		b, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			return false
		}
		return cpuFlagsSay(b, "constant_tsc", "nonstop_tsc")
	}
	return false
}

// cpuFlagsSay reports whether the first "flags" line of /proc/cpuinfo text
// names every flag.
func cpuFlagsSay(cpuinfo []byte, flags ...string) bool {
	for line := range bytes.Lines(cpuinfo) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(k)) != "flags" {
			continue
		}
		have := map[string]bool{}
		for _, f := range bytes.Fields(v) {
			have[string(f)] = true
		}
		for _, f := range flags {
			if !have[f] {
				return false
			}
		}
		return true
	}
	return false
}

// now is a reading of the recording clock: counter ticks, or nanoseconds
// since base.
func (c *clock) now() int64 {
	if c.useCounter {
		return counter()
	}
	return int64(time.Since(c.base))
}

// name is the clock's name in a dump: "counter" or "mono".
func (c *clock) name() string {
	if c.useCounter {
		return "counter"
	}
	return "mono"
}

// minCalibration is the shortest span over which the counter's rate is
// measured; a dump taken sooner after the first recording waits until then.
const minCalibration = 20 * time.Millisecond

// converter turns clock readings into Unix nanoseconds. It is taken once
// per dump.
type converter struct {
	baseUnix  int64
	baseTicks int64
	rate      float64 // nanoseconds per tick; 1 for the monotonic clock
}

// converter measures the counter's rate (waiting up to minCalibration when
// the clock was set up just now) and returns the conversion.
func (c *clock) converter() converter {
	cv := converter{baseUnix: c.base.UnixNano(), rate: 1}
	if !c.useCounter {
		return cv
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if since := time.Since(c.base); since < minCalibration {
		time.Sleep(minCalibration - since)
	}
	// Read the counter between two monotonic readings and keep the pair
	// whose readings are closest, so a preemption in between does not skew
	// the rate.
	best := time.Duration(1 << 62)
	for range 5 {
		m0 := time.Since(c.base)
		t := counter()
		m1 := time.Since(c.base)
		if m1-m0 < best {
			best = m1 - m0
			c.lastMono, c.lastTick = m0+(m1-m0)/2, t
		}
	}
	cv.baseTicks = c.baseTicks
	if span := c.lastTick - c.baseTicks; span > 0 {
		cv.rate = float64(c.lastMono) / float64(span)
	}
	return cv
}

// unix converts a clock reading to Unix nanoseconds.
func (cv converter) unix(t int64) int64 {
	return cv.baseUnix + int64(float64(t-cv.baseTicks)*cv.rate)
}

// nanos converts a span of clock readings to nanoseconds.
func (cv converter) nanos(d int64) int64 { return int64(float64(d) * cv.rate) }

package trace

import (
	"os"
	"sync/atomic"
	"time"
)

// ClockEnv names the environment variable that picks how Record reads the
// time. "coarse" (the default): a word of memory that a ticker goroutine
// refreshes every millisecond (tickPeriod) while operations are being
// recorded, and stops refreshing (the goroutine ends) once none were for
// 50 ms; reading it costs a load, where reading a clock costs 15-20 ns, more
// than the whole record. An enqueue time is then late by at most a tick,
// plus however late the Go scheduler runs the ticker: hang analysis needs
// milliseconds. "mono": Go's monotonic clock at every read, to the
// nanosecond. Start and Complete read the same clock: the watchdog that
// calls them learns of a start or a completion by polling, every few
// milliseconds, so their times are no finer than that anyway (CompleteIn
// carries a duration measured on the GPU). Any other value (such as
// "counter", which earlier releases read the CPU's time-stamp counter for)
// is "coarse". A dump reports every time as Unix nanoseconds.
const ClockEnv = "NCCL4GO_TRACE_CLOCK"

// tickPeriod is how often the coarse clock is refreshed, and idleTicks how
// many ticks without a record end the ticker.
const (
	tickPeriod = time.Millisecond
	idleTicks  = 50
)

// The coarse clock's states.
const (
	tickStopped = iota // no ticker: the next read reads the monotonic clock and starts one
	tickIdle           // ticker running; nothing read the word since its last tick
	tickUsed           // ticker running; the word was read since its last tick
	tickMono           // NCCL4GO_TRACE_CLOCK=mono: every read reads the monotonic clock
)

// clock is the process's recording clock: nanoseconds of Go's monotonic
// clock since base, read exactly (precise) or from the coarse word (read).
type clock struct {
	base time.Time // wall and monotonic reading at t0

	_      [64]byte
	coarse atomic.Int64  // a recent precise reading, while the ticker runs
	state  atomic.Uint32 // tickStopped, ...
	_      [64]byte
}

// clk is the process's recording clock.
var clk = newClock(os.Getenv(ClockEnv))

func newClock(env string) *clock {
	c := &clock{base: time.Now()}
	if env == "mono" {
		c.state.Store(tickMono)
	}
	return c
}

// precise reads the monotonic clock.
func (c *clock) precise() int64 { return int64(time.Since(c.base)) }

// read is the time for Record: the coarse word while the ticker runs, else
// a precise reading that starts the ticker.
func (c *clock) read() int64 {
	if c.state.Load() != tickUsed {
		return c.readSlow()
	}
	return c.coarse.Load()
}

// readSlow is read when the word was not read since the last tick (once per
// tick), the ticker is stopped, or the clock is "mono".
func (c *clock) readSlow() int64 {
	for {
		switch c.state.Load() {
		case tickUsed:
			return c.coarse.Load()
		case tickIdle:
			if c.state.CompareAndSwap(tickIdle, tickUsed) {
				return c.coarse.Load()
			}
		case tickMono:
			return c.precise()
		case tickStopped:
			now := c.precise()
			storeMaxInt(&c.coarse, now)
			if c.state.CompareAndSwap(tickStopped, tickUsed) {
				go c.tick()
			}
			return now
		}
	}
}

// tick refreshes the coarse word every tickPeriod until idleTicks ticks
// pass without a read; the read that finds it stopped starts another.
func (c *clock) tick() {
	t := time.NewTicker(tickPeriod)
	defer t.Stop()
	idle := 0
	for range t.C {
		storeMaxInt(&c.coarse, c.precise())
		if c.state.CompareAndSwap(tickUsed, tickIdle) {
			idle = 0
			continue
		}
		if idle++; idle >= idleTicks && c.state.CompareAndSwap(tickIdle, tickStopped) {
			return
		}
	}
}

// storeMaxInt raises a to v if v is larger.
func storeMaxInt(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if cur >= v || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// name is the clock's name in a dump: "mono" either way, since the coarse
// word holds readings of the same monotonic clock (a new name would be a
// new schema version, which today's readers refuse); the package
// documentation says how fine the readings are.
func (c *clock) name() string { return "mono" }

// converter turns clock readings into Unix nanoseconds.
type converter struct {
	baseUnix int64
}

// converter returns the conversion of c's readings.
func (c *clock) converter() converter { return converter{baseUnix: c.base.UnixNano()} }

// unix converts a clock reading to Unix nanoseconds.
func (cv converter) unix(t int64) int64 { return cv.baseUnix + t }

// nanos converts a span of clock readings to nanoseconds.
func (cv converter) nanos(d int64) int64 { return d }

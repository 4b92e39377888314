// Package spin is the one way nccl4go waits for something another thread
// (NCCL's proxy thread, the GPU, a writer of the flight recorder) will do
// soon: give the OS thread away with sched_yield, then back off with sleeps.
//
// Why not runtime.Gosched: it hands the goroutine's P to another goroutine
// but keeps the OS thread running. When ranks are pinned to one core each
// (mpirun's default binding, srun, Kubernetes CPU limits) NCCL's own
// threads share that core, and a Gosched loop starves them until the
// kernel's time slice ends: two processes on one H200 ran 1.55-2.59x slower
// than nccl-tests (whose loop calls std::this_thread::yield, i.e.
// sched_yield) until the wait yielded the thread.
package spin

import (
	"context"
	"time"
)

// Yield gives the calling OS thread's core to another runnable thread
// (sched_yield on Linux; a 1 µs sleep elsewhere). It never blocks long.
func Yield() { yield() }

// Defaults of a zero Backoff.
const (
	DefaultYields   = 64                    // sched_yield calls before the first sleep
	DefaultMinSleep = 10 * time.Microsecond // the first sleep
	DefaultMaxSleep = 2 * time.Millisecond  // sleeps double up to this
)

// Backoff waits in steps: Yields calls of [Yield] first, then sleeps that
// double from MinSleep up to MaxSleep. The zero value uses the defaults.
// A Backoff is used by one goroutine at a time.
type Backoff struct {
	Yields   int           // 0: DefaultYields; negative: none
	MinSleep time.Duration // 0: DefaultMinSleep
	MaxSleep time.Duration // 0: DefaultMaxSleep

	n     int
	delay time.Duration
	timer *time.Timer
}

// Reset starts the steps again (after progress was made).
func (b *Backoff) Reset() { b.n, b.delay = 0, 0 }

// next is the next step: 0 to yield, else how long to sleep.
func (b *Backoff) next() time.Duration {
	yields := b.Yields
	if yields == 0 {
		yields = DefaultYields
	}
	if b.n < yields {
		b.n++
		return 0
	}
	lo, hi := b.MinSleep, b.MaxSleep
	if lo <= 0 {
		lo = DefaultMinSleep
	}
	if hi <= 0 {
		hi = DefaultMaxSleep
	}
	b.delay = min(max(2*b.delay, lo), max(hi, lo))
	return b.delay
}

// Wait takes one step: a yield, or a sleep.
func (b *Backoff) Wait() {
	if d := b.next(); d == 0 {
		yield()
	} else {
		sleep(d)
	}
}

// WaitContext takes one step like Wait, but a sleep ends early when ctx
// ends; it then returns ctx.Err(). A yield step returns ctx.Err() too.
func (b *Backoff) WaitContext(ctx context.Context) error {
	d := b.next()
	if d == 0 {
		yield()
		return ctx.Err()
	}
	if ctx.Done() == nil {
		sleep(d)
		return nil
	}
	if b.timer == nil {
		b.timer = time.NewTimer(d)
	} else {
		b.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		b.timer.Stop()
		return ctx.Err()
	case <-b.timer.C:
		return nil
	}
}

// Test seams: what a step does (spin_test.go counts them).
var (
	yield = osYield
	sleep = time.Sleep
)

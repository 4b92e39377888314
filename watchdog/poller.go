package watchdog

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// The process's poller: one goroutine for every watched communicator,
// started by the first Watch and ended when the last watchdog stops or
// fails. It never waits for a communicator: the asynchronous error, which
// takes the communicator's lock, is read by a short-lived goroutine per
// communicator (at most one at a time), and failures are handled on a
// goroutine of their own.
var reg struct {
	mu      sync.Mutex
	ws      []*Watchdog
	running bool
	quit    chan struct{} // closed to end the running poller
	exited  chan struct{} // closed by the poller as it ends
	wake    chan struct{} // a watchdog came or went
}

// Running reports whether the process's poller goroutine runs (some
// communicator is watched).
func Running() bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.running
}

func register(w *Watchdog) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.ws = append(reg.ws, w)
	if !reg.running {
		reg.running = true
		reg.quit, reg.exited, reg.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		go poll(reg.quit, reg.exited, reg.wake)
		return
	}
	select {
	case reg.wake <- struct{}{}:
	default:
	}
}

// unregister removes w; when it was the last, it ends the poller and, if
// wait, waits until the poller has ended.
func unregister(w *Watchdog, wait bool) {
	reg.mu.Lock()
	i := slices.Index(reg.ws, w)
	if i < 0 {
		reg.mu.Unlock()
		return
	}
	reg.ws = slices.Delete(reg.ws, i, i+1)
	var exited chan struct{}
	if len(reg.ws) == 0 && reg.running {
		reg.running = false
		close(reg.quit)
		exited = reg.exited
	}
	reg.mu.Unlock()
	if exited != nil && wait {
		<-exited
	}
}

func poll(quit, exited chan struct{}, wake chan struct{}) {
	defer close(exited)
	var ws []*Watchdog
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		reg.mu.Lock()
		select {
		case <-quit:
			reg.mu.Unlock()
			return
		default:
		}
		ws = append(ws[:0], reg.ws...)
		reg.mu.Unlock()
		interval := time.Duration(1<<63 - 1)
		for _, w := range ws {
			interval = min(interval, w.opts.PollInterval)
			switch w.tick() {
			case tickGone:
				go w.Stop() // destroyed or aborted by its owner: nothing to watch
			}
		}
		clear(ws)
		t.Reset(interval)
		select {
		case <-quit:
			return
		case <-wake:
		case <-t.C:
		}
	}
}

type tickResult int

const (
	tickOK tickResult = iota
	tickGone
	tickFailed
)

// tick looks at w's operations and asynchronous error once.
func (w *Watchdog) tick() tickResult {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	if w.unregistered.Load() || w.failed.Load() {
		return tickOK
	}
	now := time.Since(w.begun)

	// The last asynchronous-error poll.
	var async error
	var failure *TimeoutError
	if r := w.asyncOut.Swap(nil); r != nil {
		if !errors.Is(r.err, nccl.ErrInProgress) {
			w.busySince = 0
		}
		switch {
		case r.err == nil:
			w.flushLaunched(r.before)
		case errors.Is(r.err, nccl.ErrInProgress):
			// A non-blocking communicator: its operations' events wait
			// for NCCL to launch them. One in progress for a whole
			// timeout is a hang too.
			w.nonBlocking.Store(true)
			if w.busySince == 0 {
				w.busySince = max(now, 1)
			} else if waited := now - w.busySince; waited >= w.opts.Timeout {
				w.mu.Lock()
				last := w.last
				w.mu.Unlock()
				failure = &TimeoutError{Comm: w.comm, Op: last.op(), Waited: waited, Timeout: w.opts.Timeout, Action: w.opts.Action, NotLaunched: true}
			}
		case errors.Is(r.err, nccl.ErrNotInitialized): // destroyed or aborted (StateError)
			w.unregistered.Store(true)
			return tickGone
		default:
			async = r.err
		}
	}

	// Take what queued recorded since the last tick, and date the deferred
	// operations: one NCCL never launches (a non-blocking communicator's
	// operation in progress for good, a group that never ends) times out
	// too.
	w.mu.Lock()
	in := w.incoming
	w.incoming = w.spare[:0]
	for i := range w.deferred {
		if w.deferred[i].seen == 0 {
			w.deferred[i].seen = max(now, 1)
		}
	}
	if len(w.deferred) > 0 && failure == nil {
		en := &w.deferred[0]
		if waited := now - en.seen; waited >= w.opts.Timeout {
			failure = &TimeoutError{Comm: w.comm, Op: en.op(), Waited: waited, Timeout: w.opts.Timeout, Action: w.opts.Action, NotLaunched: true}
		}
	}
	w.mu.Unlock()
	for i := range in {
		if in[i].seen == 0 {
			in[i].seen = now
		}
	}
	w.pending = append(w.pending, in...)
	clear(in)
	w.spare = in[:0]

	// Look at each stream's operations in order: the first not done on a
	// stream is running (or waiting for the work before it), the ones after
	// it are not looked at.
	blocked := w.blocked[:0]
	keep := w.pending[:0]
	freed := w.freed[:0]
	abandoned := 0
	for _, en := range w.pending {
		if slices.Contains(blocked, en.e.Stream) {
			keep = append(keep, en)
			continue
		}
		switch en.ev.Query() {
		case cuda.Success:
			en.tr.Complete(en.ref)
			freed = append(freed, en.ev)
		case cuda.NotReady:
			if en.started == 0 {
				en.started = max(now, 1)
				en.tr.Start(en.ref)
			}
			if waited := now - en.started; waited >= w.opts.Timeout && failure == nil {
				failure = &TimeoutError{Comm: w.comm, Op: en.op(), Waited: waited, Timeout: w.opts.Timeout, Action: w.opts.Action}
			}
			blocked = append(blocked, en.e.Stream)
			keep = append(keep, en)
		default:
			// Not queryable: an event recorded while its stream was being
			// captured into a graph (the graph owns that record now), or
			// one destroyed under us. Not reused, not watched.
			abandoned++
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	w.blocked = blocked[:0]
	w.mu.Lock()
	w.free = append(w.free, freed...)
	w.dropped += uint64(abandoned)
	pending := len(w.pending) + len(w.incoming) + len(w.deferred)
	w.mu.Unlock()
	clear(freed)
	w.freed = freed[:0]

	var err error
	switch {
	case failure != nil:
		failure.Pending = pending
		err = failure
	case async != nil:
		ae := &AsyncError{Comm: w.comm, Err: async, Action: w.opts.Action, Pending: pending}
		if len(w.pending) > 0 {
			en := w.pending[0]
			op := en.op()
			ae.Oldest = &op
			if en.started != 0 {
				ae.Waited = now - en.started
			}
		}
		err = ae
	}
	if err != nil {
		w.failed.Store(true)
		unregister(w, false)
		go w.fail(err)
		return tickFailed
	}

	// Start the next asynchronous-error poll, unless one is in flight.
	if !w.asyncOn.Load() {
		w.asyncOn.Store(true)
		w.mu.Lock()
		before := w.serial + 1
		w.mu.Unlock()
		w.asyncRun.Add(1)
		go func() {
			defer w.asyncRun.Done()
			err := w.c.AsyncError()
			w.asyncOut.Store(&asyncResult{err: err, before: before})
			w.asyncOn.Store(false)
		}()
	}
	return tickOK
}

// flushLaunched records the events of the deferred operations queued
// outside a group before serial before, which the communicator's
// asynchronous state says NCCL has launched.
func (w *Watchdog) flushLaunched(before uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for n < len(w.deferred) && w.deferred[n].e.Group == 0 && w.deferred[n].serial < before {
		n++
	}
	if n > 0 && !w.closed {
		w.flushLocked(n)
	}
}

// op describes the entry's operation.
func (en *entry) op() Operation {
	o := Operation{Op: en.e.Op, Seq: en.ref.Seq(), Count: en.e.Count, DataType: en.e.DataType, Peer: -1, Stream: en.e.Stream}
	if en.e.Op.HasRoot() || en.e.Op.HasPeer() {
		o.Peer = int(en.e.Peer)
	}
	return o
}

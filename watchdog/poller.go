package watchdog

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// The process's poller: one goroutine for every watched communicator,
// started by the first [Watch] and ended when the last watchdog stops or
// fails. It never waits for a communicator: the asynchronous error, which
// takes the communicator's lock, is read by a short-lived goroutine per
// communicator (at most one at a time), and failures are handled on a
// goroutine of their own.
//
// The poller runs on an OS thread of its own whose stream-capture
// interaction mode is relaxed (cuThreadExchangeStreamCaptureMode): its
// event queries are then no "unsafe" calls for a CaptureGlobal capture
// another thread runs, which they would otherwise invalidate (the driver
// answers 900 and breaks that capture).
var reg struct {
	mu      sync.Mutex
	ws      []*Watchdog
	acting  []*Watchdog // failures whose action is under way (the monitor watches them)
	running bool
	quit    chan struct{} // closed to end the running poller
	exited  chan struct{} // closed by the poller as it ends
	wake    chan struct{} // a watchdog came or went
	monitor bool          // the heartbeat monitor runs
	monWake chan struct{} // wakes the monitor: something ended

	tickSince atomic.Int64 // unix ns when the poller's current round began; 0: idle
	relaxed   atomic.Int32 // the poller thread's cuThreadExchangeStreamCaptureMode result (0: relaxed)
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
	startMonitorLocked()
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
		wakeMonitorLocked()
	}
	reg.mu.Unlock()
	if exited != nil && wait {
		<-exited
	}
}

// acting notes that w's failure action began (on) or ended.
func acting(w *Watchdog, on bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if on {
		reg.acting = append(reg.acting, w)
		startMonitorLocked()
		return
	}
	if i := slices.Index(reg.acting, w); i >= 0 {
		reg.acting = slices.Delete(reg.acting, i, i+1)
	}
	wakeMonitorLocked()
}

func startMonitorLocked() {
	if !reg.monitor {
		reg.monitor = true
		reg.monWake = make(chan struct{}, 1)
		go monitor(reg.monWake)
	}
}

func wakeMonitorLocked() {
	if reg.monitor {
		select {
		case reg.monWake <- struct{}{}:
		default:
		}
	}
}

func poll(quit, exited chan struct{}, wake chan struct{}) {
	defer close(exited)
	// A thread of its own, in relaxed capture mode, for as long as the
	// poller runs; the thread is discarded after (it stays locked).
	runtime.LockOSThread()
	mode := int32(cuda.CaptureRelaxed)
	_, r := capi.CuThreadExchangeStreamCaptureMode(mode)
	reg.relaxed.Store(r)
	var ws []*Watchdog
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	defer reg.tickSince.Store(0)
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
		reg.tickSince.Store(time.Now().UnixNano())
		interval := time.Duration(1<<63 - 1)
		for _, w := range ws {
			interval = min(interval, w.opts.PollInterval)
			switch w.tick() {
			case tickGone:
				go w.Stop() // destroyed, aborted or dropped by its owner: nothing to watch
			}
		}
		reg.tickSince.Store(0)
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

// monitor is the heartbeat monitor: while watchdogs run or act, it checks
// that the poller's rounds and the failures' actions end within the
// shortest [Options.Heartbeat]; when one does not (a driver or NCCL call
// that never returns), it dumps the flight recorder and ends the process.
func monitor(wake chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		reg.mu.Lock()
		hb := time.Duration(-1)
		var dir string
		code := DefaultExitCode
		pick := func(w *Watchdog) {
			if w.opts.Heartbeat > 0 && (hb < 0 || w.opts.Heartbeat < hb) {
				hb, dir, code = w.opts.Heartbeat, w.opts.DumpDir, w.opts.ExitCode
				if w.opts.NoDump {
					dir = "" // heartbeatExit dumps only where a dump is wanted
				}
			}
		}
		for _, w := range reg.ws {
			pick(w)
		}
		for _, w := range reg.acting {
			pick(w)
		}
		var stuck string
		now := time.Now()
		if hb > 0 {
			if since := reg.tickSince.Load(); since != 0 && now.Sub(time.Unix(0, since)) > hb {
				stuck = fmt.Sprintf("the poller has been inside one round of event queries for %v", now.Sub(time.Unix(0, since)).Round(time.Millisecond))
			}
			for _, w := range reg.acting {
				if since := w.actionSince.Load(); since != 0 && now.Sub(time.Unix(0, since)) > hb && stuck == "" {
					stuck = fmt.Sprintf("the %s of %s has not returned in %v", w.opts.Action.verb(), w.comm, now.Sub(time.Unix(0, since)).Round(time.Millisecond))
				}
			}
		}
		idle := !reg.running && len(reg.acting) == 0
		if idle {
			reg.monitor = false
		}
		reg.mu.Unlock()
		if idle {
			return
		}
		if stuck != "" {
			heartbeatExit(stuck, hb, dir, code)
		}
		d := time.Second
		if hb > 0 {
			d = min(d, max(hb/8, time.Millisecond))
		}
		t.Reset(d)
		select {
		case <-t.C:
		case <-wake:
		}
	}
}

// heartbeatExit dumps what it can and ends the process.
func heartbeatExit(stuck string, hb time.Duration, dir string, code int) {
	reason := fmt.Sprintf("watchdog: heartbeat monitor: %s (heartbeat timeout %v): the watchdog itself is stuck in a driver or NCCL call", stuck, hb)
	msg := reason
	if dir != "" {
		if dump, err := trace.Default().DumpFile(dir, reason); err == nil {
			msg += "; flight recorder dumped to " + dump
		} else {
			msg += fmt.Sprintf("; flight recorder not dumped: %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s; ending the process (exit status %d)\n", msg, code)
	os.Exit(code)
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
	w.polls.Add(1)
	if w.cw.Value() == nil {
		// Dropped by the program without Destroy: the root package reports
		// the leak; there is nothing left to watch.
		w.unregistered.Store(true)
		return tickGone
	}
	now := time.Since(w.begun)

	// The last asynchronous-error poll.
	var async error
	var failure *TimeoutError
	w.asyncMu.Lock()
	r, have := w.asyncOut, w.asyncHave
	w.asyncOut, w.asyncHave = asyncResult{}, false
	w.asyncMu.Unlock()
	if have {
		switch {
		case r.err == nil:
			w.busySince = 0
			w.flushLaunched(r.before)
		case errors.Is(r.err, nccl.ErrNotInitialized):
			// Destroyed or aborted (a StateError), whatever cause the
			// abort gave: one matching ErrInProgress is no busy state.
			w.unregistered.Store(true)
			return tickGone
		case errors.Is(r.err, nccl.ErrInProgress):
			// A non-blocking communicator: its operations wait for NCCL to
			// launch them. In progress for a whole timeout, with no
			// operation accepted meanwhile, is a hang too; NCCL accepting
			// operations is progress, however busy it stays.
			w.nonBlocking.Store(true)
			w.mu.Lock()
			serial, last := w.serial, w.newestLocked()
			w.mu.Unlock()
			switch {
			case w.busySince == 0 || serial != w.busySerial:
				w.busySince, w.busySerial = max(now, 1), serial
			case now-w.busySince >= w.opts.Timeout && last.serial != 0:
				failure = &TimeoutError{Comm: w.comm, Op: last.op(), Waited: now - w.busySince, Timeout: w.opts.Timeout, Action: w.opts.Action, NotLaunched: true}
			}
		default:
			w.busySince = 0
			async = r.err
		}
	}

	// Take what queued launched since the last tick, start a new period,
	// and date the deferred operations: one NCCL never launches (a
	// non-blocking communicator's operation in progress for good, a group
	// that never ends) times out too.
	w.mu.Lock()
	w.closeRunLocked()
	w.period++
	in := w.incoming
	w.incoming = w.spare[:0]
	for i := range w.deferred {
		if w.deferred[i].seen == 0 {
			w.deferred[i].seen = max(now, 1)
		}
	}
	// Host-side operations: done when their entry says completed (or is
	// gone from the ring); one not done Timeout after the poller first saw
	// it times out.
	host := w.host[:0]
	for _, en := range w.host {
		if st, ok := en.tr.State(en.ref); !ok || st == trace.Completed {
			continue
		}
		if en.seen == 0 {
			en.seen = max(now, 1)
		}
		if waited := now - en.seen; waited >= w.opts.Timeout && failure == nil {
			failure = &TimeoutError{Comm: w.comm, Op: en.op(), Waited: waited, Timeout: w.opts.Timeout, Action: w.opts.Action}
		}
		host = append(host, en)
	}
	clear(w.host[len(host):])
	w.host = host
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

	w.cover()

	// Look at each stream's operations in order: the first not done on a
	// stream is running (or waiting for the work before it), the ones after
	// it are not looked at. Operations sharing an event share its answer.
	blocked := w.blocked[:0]
	results := w.results[:0]
	keep := w.pending[:0]
	for _, en := range w.pending {
		if slices.Contains(blocked, en.e.Stream) {
			keep = append(keep, en)
			continue
		}
		if en.ev == nil { // on a stream being captured: covered once the capture ends
			blocked = append(blocked, en.e.Stream)
			keep = append(keep, en)
			continue
		}
		k := slices.IndexFunc(results, func(r evResult) bool { return r.ev == en.ev })
		if k < 0 {
			results = append(results, evResult{en.ev, queryEvent(en.ev)})
			k = len(results) - 1
		}
		switch results[k].r {
		case cuda.Success:
			en.complete()
		case cuda.NotReady:
			if en.started == 0 {
				en.started = max(now, 1)
				en.tr.Start(en.ref)
			}
			if waited := now - en.started; waited >= w.opts.Timeout && failure == nil {
				failure = &TimeoutError{Comm: w.comm, Op: en.op(), Waited: waited, Timeout: w.opts.Timeout, Action: w.opts.Action}
				failure.Shared = en.ops() - 1
				for _, o := range w.pending {
					if o.ev == en.ev && o.serial > en.serial {
						failure.Shared += o.ops()
					}
				}
			}
			blocked = append(blocked, en.e.Stream)
			keep = append(keep, en)
		default:
			// Not queryable (it should not happen: the watchdog records
			// no event in a capture): follow the operation with a new event.
			en.ev = nil
			blocked = append(blocked, en.e.Stream)
			keep = append(keep, en)
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	w.blocked = blocked[:0]
	var destroy []*cuda.Event
	w.mu.Lock()
	for _, r := range results {
		switch r.r {
		case cuda.Success:
			w.free = append(w.free, r.ev)
		case cuda.NotReady:
		case cuda.CapturedEvent:
			w.abandoned.Add(1) // the record is a graph's: never destroyed under it
			for i := range w.pending {
				if w.pending[i].ev == r.ev {
					w.pending[i].ev = nil
				}
			}
		default:
			w.events--
			destroy = append(destroy, r.ev)
		}
	}
	pending := opsIn(w.pending) + w.queuedLocked()
	w.mu.Unlock()
	clear(results)
	w.results = results[:0]
	for _, ev := range destroy {
		for i := range w.pending { // the entries it followed get a new one
			if w.pending[i].ev == ev {
				w.pending[i].ev = nil
			}
		}
		ev.Destroy()
	}

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
			// The operations after it that share its state (its event, or
			// none yet): the watchdog cannot tell which of them is in
			// flight, so it names the range (seen on the H200: the oldest
			// had completed, the one in flight was two later).
			if en.ops() > 1 {
				ae.Shared = en.ops() - 1
				last := en.newest()
				newest := last.op()
				ae.Newest = &newest
			}
			for _, o := range w.pending[1:] {
				if o.e.Stream != en.e.Stream || o.ev != en.ev {
					break
				}
				ae.Shared += o.ops()
				last := o.newest()
				newest := last.op()
				ae.Newest = &newest
			}
		}
		err = ae
	}
	if err != nil {
		w.failed.Store(true)
		w.shutAsync() // no tick asks again
		acting(w, true)
		unregister(w, false)
		go func() {
			defer acting(w, false)
			w.fail(err)
		}()
		return tickFailed
	}

	// Start the next asynchronous-error poll, unless one is in flight.
	if !w.asyncOn.Load() {
		w.asyncOn.Store(true)
		w.mu.Lock()
		before := w.serial + 1
		w.mu.Unlock()
		if w.asyncReq == nil {
			w.asyncReq = make(chan uint64, 1)
			w.asyncRun.Add(1)
			go w.asyncPolls(w.asyncReq)
		}
		w.asyncReq <- before // never blocks: one poll at a time, and asyncOn was false
	}
	return tickOK
}

// newestLocked is the newest operation queued (the highest serial) among
// those not yet taken by the poller and the poller's own pending ones (mu
// and pollMu held); the zero entry when there is none.
func (w *Watchdog) newestLocked() entry {
	var last entry
	for _, q := range [...][]entry{w.pending, w.incoming, {w.open}, w.deferred, w.host} {
		if n := len(q); n > 0 {
			if e := q[n-1].newest(); e.serial > last.serial {
				last = e
			}
		}
	}
	return last
}

// asyncPolls answers the poller's requests for the communicator's
// asynchronous error, one at a time, until req is closed (Stop, or a
// failure). One goroutine for the watchdog's life and a result kept in
// place: a poll allocates nothing.
func (w *Watchdog) asyncPolls(req <-chan uint64) {
	defer w.asyncRun.Done()
	for before := range req {
		if c := w.cw.Value(); c != nil {
			err := c.AsyncError()
			w.asyncMu.Lock()
			w.asyncOut, w.asyncHave = asyncResult{err: err, before: before}, true
			w.asyncMu.Unlock()
		}
		w.asyncOn.Store(false)
	}
}

// shutAsync ends the asynchronous-error goroutine once its poll in flight
// returns (pollMu held: no tick sends meanwhile).
func (w *Watchdog) shutAsync() {
	if w.asyncReq != nil && !w.asyncShut {
		w.asyncShut = true
		close(w.asyncReq)
	}
}

// cover gives every pending operation not followed by an event yet the
// next event recorded after it on its stream (pollMu held): one a later
// operation recorded (queued records after the first operation of a
// stream in each period), else one the poller records now behind the
// stream's last operations once every earlier event there has completed.
// It records none on a stream being captured, and abandons one whose
// stream began a capture while it recorded.
func (w *Watchdog) cover() {
	type tail struct {
		h     uintptr
		ev    *cuda.Event // the nearest later event seen walking back
		bare  bool        // the stream's last operations have none
		count int
		busy  bool // an event of the stream is pending: a new one could not complete before it
	}
	var buf [8]tail
	tails := buf[:0]
	for i := len(w.pending) - 1; i >= 0; i-- {
		en := &w.pending[i]
		k := slices.IndexFunc(tails, func(t tail) bool { return t.h == en.e.Stream })
		if k < 0 {
			tails = append(tails, tail{h: en.e.Stream, bare: en.ev == nil})
			k = len(tails) - 1
		}
		switch {
		case en.ev != nil:
			tails[k].ev = en.ev
			tails[k].busy = true
		case tails[k].ev != nil:
			en.ev = tails[k].ev
		default:
			tails[k].count += en.ops()
		}
	}
	for _, t := range tails {
		if !t.bare || t.busy || t.h == streamPerThread {
			// Nothing to cover; or an earlier event of the stream has not
			// completed (recording behind a hung operation is of no use,
			// and a stream whose queue is full would block the poller);
			// or the per-thread default stream, which is the calling
			// thread's: queued records after each of its operations.
			continue
		}
		if w.capturing(t.h) {
			continue
		}
		w.mu.Lock()
		ev := w.eventLocked()
		w.mu.Unlock()
		if ev == nil {
			continue
		}
		if err := recordEvent(ev, t.h); err != nil {
			// The stream is gone: its operations cannot be followed.
			w.mu.Lock()
			w.free = append(w.free, ev)
			w.dropped += uint64(t.count)
			w.mu.Unlock()
			w.pending = slices.DeleteFunc(w.pending, func(en entry) bool { return en.e.Stream == t.h && en.ev == nil })
			continue
		}
		if w.capturing(t.h) {
			// A capture began on the stream while the event was recorded:
			// the record may be the capture's. Never touch the event again.
			w.abandoned.Add(1)
			continue
		}
		w.covers.Add(1)
		for i := range w.pending {
			if w.pending[i].e.Stream == t.h && w.pending[i].ev == nil {
				w.pending[i].ev = ev
			}
		}
	}
}

// capturing reports whether stream h is being captured (or the driver
// cannot say); the legacy default stream never is.
func (w *Watchdog) capturing(h uintptr) bool {
	if h == 0 || h == streamLegacy {
		return false
	}
	st, _, err := cuda.StreamOf(h, w.dev).CaptureInfo()
	return err != nil || st != cuda.NotCapturing
}

// flushLaunched launches the deferred operations queued outside a group
// before serial before, which the communicator's asynchronous state says
// NCCL has launched.
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

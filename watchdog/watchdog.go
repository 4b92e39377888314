package watchdog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/trace"
)

// Action is what the watchdog does to a communicator that failed.
type Action int

const (
	// ActionAbort aborts the communicator ([nccl.Communicator].AbortCause): its
	// kernels are freed, and every later call on it returns an
	// *[nccl.StateError] wrapping the watchdog's error. The default.
	ActionAbort Action = iota
	// ActionRevoke revokes the communicator (ncclCommRevoke, NCCL 2.28.7):
	// its operations in flight stop, it takes no new ones, and it can still
	// be shrunk, split or destroyed.
	ActionRevoke
	// ActionNone leaves the communicator alone: the watchdog dumps and
	// reports (Err, Done, OnFailure), and the program recovers itself, for
	// example with Shrink(dead ranks, ShrinkAbort), which cancels the
	// parent's operations on the device, then Abort of the parent.
	ActionNone
)

// String is the action's name: "abort", "revoke" or "none".
func (a Action) String() string {
	switch a {
	case ActionAbort:
		return "abort"
	case ActionRevoke:
		return "revoke"
	case ActionNone:
		return "none"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

func (a Action) verb() string {
	if a == ActionRevoke {
		return "revoke"
	}
	return "abort"
}

func (a Action) past() string {
	if a == ActionRevoke {
		return "revoked"
	}
	return "aborted"
}

// Defaults.
const (
	DefaultTimeout      = 10 * time.Minute       // PyTorch's default collective timeout
	DefaultPollInterval = 100 * time.Millisecond // how often the GPU's progress is looked at
	DefaultExitCode     = 6                      // the status of a process ended by SIGABRT, as PyTorch's watchdog ends it
	DefaultHeartbeat    = 8 * time.Minute        // PyTorch's TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC
	MinHeartbeat        = 100 * time.Millisecond // the shortest positive Options.Heartbeat Watch takes
)

// exitGrace is how long, with [Options.Exit], the action and then OnFailure
// may each take before the process exits anyway.
var exitGrace = 10 * time.Second

// Options configure a watchdog. The zero value (or nil) is usable.
type Options struct {
	// Timeout is how long an operation may take on the GPU, counted from
	// when everything queued before it on its stream (and watched) has
	// completed; 0 means [DefaultTimeout].
	Timeout time.Duration
	// PollInterval is how often the process's poller queries the watched
	// operations' events and the communicator's asynchronous error;
	// 0 means [DefaultPollInterval], or Timeout/4 when that is shorter.
	// Timeouts are detected up to one interval late.
	PollInterval time.Duration
	// DumpDir is where the flight recorder ([trace.Default]) is dumped on a
	// failure; "" means os.TempDir(). NoDump turns the dump off.
	DumpDir string
	NoDump  bool
	// Store, when set, is the job's store: on a failure the watchdog asks
	// every rank watching it ([trace.Recorder].WatchDumpRequests) to dump too.
	Store trace.Store
	// Action is what to do to the communicator on a failure: [ActionAbort]
	// (the default), [ActionRevoke] or [ActionNone].
	Action Action
	// OnFailure, when set, is called once on a failure, after the dump and
	// the action, on a goroutine of the watchdog's, with the *[TimeoutError]
	// or *[AsyncError].
	OnFailure func(err error)
	// Exit ends the process with os.Exit(ExitCode) after the dump, the
	// action and OnFailure, as PyTorch's TORCH_NCCL_ASYNC_ERROR_HANDLING=1
	// does: a rank of a job that cannot go on leaves, so the launcher (or
	// the scheduler) restarts the job. The error is printed to standard
	// error first. If the action has not returned within 10 s (see the
	// package documentation: an abort waits for a call inside NCCL), the
	// process exits anyway, and likewise if OnFailure has not returned
	// within 10 s of its call; the message says which did not return.
	Exit bool
	// ExitCode is the status Exit ends the process with, 1 to 255; 0
	// means [DefaultExitCode]. [Watch] refuses others (os.Exit(256) would end
	// the process with status 0).
	ExitCode int
	// Heartbeat bounds how long the watchdog itself may be stuck: when the
	// process's poller has not finished a poll, or a failure's action (an
	// abort) has not returned, for this long (a driver or NCCL call that
	// never returns), a monitor goroutine dumps the flight recorder,
	// prints why to standard error and ends the process with ExitCode,
	// whatever Exit says, as PyTorch's TORCH_NCCL_ENABLE_MONITORING does.
	// 0 means [DefaultHeartbeat]; negative turns the monitor off; a positive
	// value shorter than [MinHeartbeat] is refused. The
	// process's monitor uses the shortest Heartbeat of the watchdogs
	// running.
	Heartbeat time.Duration
}

// defaultHeartbeat is what Options.Heartbeat 0 means: DefaultHeartbeat
// (tests shorten it).
var defaultHeartbeat = DefaultHeartbeat

// Watchdog watches one communicator's operations. Its methods are safe for
// concurrent use. Make one with [Watch]: the zero Watchdog, and a nil one,
// watch nothing (Stop does nothing, Err is nil, Done is closed, [Stats] are
// zero, Synchronize returns an error matching [nccl.ErrInvalidUsage]).
type Watchdog struct {
	cw     weak.Pointer[nccl.Communicator] // weak: a watched communicator the program drops is still collected (and its leak reported)
	opts   Options
	dev    cuda.Device
	comm   Comm
	remove func() // detaches the hook (nccl.Communicator.AddHook)
	begun  time.Time

	// mu guards what queued touches; queued runs under the communicator's
	// lock, so only the poller contends for it. The fields from mu to open
	// are what queued's hot path (one more operation into the open run)
	// reads and writes: kept together, they span two or three cache lines.
	mu        sync.Mutex
	closed    bool   // stopped or failed: queued does nothing
	serial    uint64 // operations queued so far
	period    uint64 // the poller's ticks so far: queued records at most one event per stream and tick
	openFast  uint64
	openEpoch uint64
	// nonBlocking: the communicator returns ncclInProgress, so events
	// wait for the next call.
	nonBlocking atomic.Bool
	deferred    []entry // queued inside a group or on a non-blocking communicator: not launched yet
	// open is the run (entry.n) the next operation may join; n 0: none.
	// The poller takes it at each tick. openFast says one more operation
	// on its stream may join it without looking at the stream again: the
	// stream had its event of period openFast-1 and was not being captured
	// at capture epoch openEpoch.
	open entry

	free     []*cuda.Event // events whose work completed, for reuse
	events   int           // events made (free, in flight or abandoned)
	incoming []entry       // launched, not yet taken by the poller (ev nil: not covered by an event yet)
	dropped  uint64        // operations not watched: an event could not be made or recorded, or the capture state not read
	captured uint64        // operations queued into a stream capture: not watched
	streams  []streamState // the streams operations were queued on
	host     []entry       // host-side operations (Split, Finalize, ...): followed by their flight-recorder entries

	// The poller's own state (pollMu held while the poller works on it).
	pollMu       sync.Mutex
	pending      []entry // in queue order
	spare        []entry
	blocked      []uintptr      // streams with an operation not done, during a tick
	results      []evResult     // events queried during a tick
	unregistered atomic.Bool    // Stop began: the poller leaves it alone
	busySince    time.Duration  // when the asynchronous state was first seen in progress; 0: not in progress
	busySerial   uint64         // serial then: an operation accepted since is progress
	asyncRun     sync.WaitGroup // the asynchronous-error goroutine
	asyncOn      atomic.Bool    // an asynchronous-error poll is asked for or under way
	asyncReq     chan uint64    // asks the asynchronous-error goroutine for a poll (serial then + 1); nil: not started
	asyncShut    bool           // asyncReq closed (pollMu held)
	asyncMu      sync.Mutex
	asyncOut     asyncResult   // the last poll's answer, unless taken (asyncMu held)
	asyncHave    bool          // asyncOut holds an answer not taken yet
	polls        atomic.Uint64 // ticks that looked at this watchdog
	covers       atomic.Uint64 // events the poller recorded
	abandoned    atomic.Uint64 // events the poller recorded that a capture begun meanwhile took: never queried or reused

	actionSince atomic.Int64 // unix ns when the failure's action began; 0: none under way (for the heartbeat monitor)

	failed   atomic.Bool
	done     chan struct{} // closed once failed (err set) or stopped
	doneOnce sync.Once
	errMu    sync.Mutex
	err      error // the failure, set once
	stopOnce sync.Once
}

// streamState is what queued keeps per stream (mu held).
type streamState struct {
	h         uintptr
	capEpoch  uint64 // capi.CaptureEpoch+1 when capturing was read; 0: never
	capturing bool
	recorded  uint64 // period+1 of the last event queued recorded on it
}

// Stream handles with a fixed meaning (cuda.h).
const (
	streamLegacy    = 0x1 // CU_STREAM_LEGACY; 0 is the same stream
	streamPerThread = 0x2 // CU_STREAM_PER_THREAD: the calling thread's default stream
)

type asyncResult struct {
	err    error
	before uint64 // serial when the poll began: deferred entries below it are launched
}

type evResult struct {
	ev *cuda.Event
	r  cuda.Result
}

// entry is one watched operation.
type entry struct {
	// A run: an entry without an event of its own stands for n operations
	// (1: itself alone) the communicator recorded one after another on
	// the same stream (consecutive serials, so consecutive flight-recorder
	// entries), which the same later event follows; lastRef and lastE
	// are the newest of them when n > 1, whose serial is serial+n-1. Queuing one more into a run
	// costs a few stores into the open run (Watchdog.open), not an entry:
	// these fields come first, with e (its stream), so that those stores
	// stay within the entry's first cache lines.
	n       int
	lastRef trace.Ref
	lastE   trace.Event
	e       trace.Event

	ev      *cuda.Event // the event that follows it: recorded after it on its stream, maybe shared with the operations before it there; nil: none yet
	tr      *trace.Comm
	ref     trace.Ref
	serial  uint64
	seen    time.Duration // since begun: when the poller first saw it
	started time.Duration // when it reached the head of its stream; 0: not yet
}

// newest is the newest operation of the run as an entry of its own.
func (en *entry) newest() entry {
	if en.n <= 1 {
		return *en
	}
	return entry{tr: en.tr, ref: en.lastRef, e: en.lastE, serial: en.lastSerialOf(), n: 1}
}

// lastSerialOf is the serial of the run's newest operation.
func (en *entry) lastSerialOf() uint64 { return en.serial + uint64(en.ops()) - 1 }

// complete marks every operation of the run completed in the recorder.
func (en *entry) complete() {
	if en.n <= 1 {
		en.tr.Complete(en.ref)
		return
	}
	en.tr.CompleteRange(en.ref, en.lastRef)
}

// unwatch gives up every operation of the run (see unwatchPending).
func (en *entry) unwatch() {
	if en.n <= 1 {
		en.tr.Unwatch(en.ref)
		return
	}
	en.tr.UnwatchRange(en.ref, en.lastRef)
}

// ops is the number of operations the entry stands for.
func (en *entry) ops() int { return max(en.n, 1) }

// queuedLocked counts the operations queued and not yet taken by the
// poller (mu held): the poller's own (pending) are counted apart, under
// pollMu.
func (w *Watchdog) queuedLocked() int {
	return opsIn(w.incoming) + w.open.n + len(w.deferred) + len(w.host)
}

// opsIn counts the operations of entries.
func opsIn(entries []entry) int {
	n := 0
	for i := range entries {
		n += entries[i].ops()
	}
	return n
}

// Watch starts watching c: the operations c queues from now on are
// followed with timing-disabled CUDA events on their streams, which one
// goroutine of the process polls, with c's asynchronous error. On a timeout
// or an asynchronous error the watchdog dumps the flight recorder, acts on
// the communicator ([Options.Action]), and reports (Err, Done, OnFailure,
// [Options.Exit]). Stop ends the watch. c must be initialized, and watched by
// no other watchdog (one that stopped or failed does not count); other
// hooks of c ([nccl.Communicator].AddHook) are not affected. The flight recorder
// ([trace.Default]) is turned on with [trace.DefaultEntries] when it is off:
// its dump is what explains a hang. The watchdog does not keep c
// reachable: a watched communicator the program drops without Destroy is
// reported as leaked ([nccl.SetLeakHandler]), and its watch ends.
func Watch(c *nccl.Communicator, o *Options) (*Watchdog, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Timeout < 0 || opts.PollInterval < 0 {
		return nil, fmt.Errorf("watchdog: Watch: negative Timeout (%v) or PollInterval (%v): %w", opts.Timeout, opts.PollInterval, nccl.ErrInvalidArgument)
	}
	if opts.Action < ActionAbort || opts.Action > ActionNone {
		return nil, fmt.Errorf("watchdog: Watch: unknown Action %d: %w", int(opts.Action), nccl.ErrInvalidArgument)
	}
	if opts.ExitCode < 0 || opts.ExitCode > 255 {
		// os.Exit(256) ends the process with status 0: a hung rank
		// would read as one that succeeded.
		return nil, fmt.Errorf("watchdog: Watch: ExitCode %d: an exit status is 1 to 255 (0: DefaultExitCode): %w", opts.ExitCode, nccl.ErrInvalidArgument)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = min(DefaultPollInterval, opts.Timeout/4)
	}
	if opts.PollInterval < time.Millisecond {
		opts.PollInterval = time.Millisecond
	}
	if opts.DumpDir == "" {
		opts.DumpDir = os.TempDir()
	}
	if opts.ExitCode == 0 {
		opts.ExitCode = DefaultExitCode
	}
	if opts.Heartbeat > 0 && opts.Heartbeat < MinHeartbeat {
		// A bound shorter than one slow round of event queries would end
		// a healthy process.
		return nil, fmt.Errorf("watchdog: Watch: Heartbeat %v: at least %v (0: DefaultHeartbeat; negative: no monitor): %w", opts.Heartbeat, MinHeartbeat, nccl.ErrInvalidArgument)
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if c == nil {
		return nil, fmt.Errorf("watchdog: Watch: nil communicator: %w", nccl.ErrInvalidArgument)
	}
	dev, err := c.Device()
	if err != nil {
		return nil, fmt.Errorf("watchdog: Watch: %w", err)
	}
	tc, err := c.TraceComm()
	if err != nil {
		return nil, fmt.Errorf("watchdog: Watch: %w", err)
	}
	info := tc.Info()
	w := &Watchdog{
		cw: weak.Make(c), opts: opts, dev: dev, begun: time.Now(),
		comm: Comm{Name: info.Name, Hash: info.Hash, Rank: info.Rank, Size: info.Size},
		done: make(chan struct{}),
	}
	if !c.Blocking() {
		w.nonBlocking.Store(true)
	}
	// The flight recorder is off by default (its cost); a watched
	// communicator needs it for the dump that explains a hang.
	if rec := tc.Recorder(); rec.Size() == 0 {
		rec.SetSize(trace.DefaultEntries)
	}
	// Warm the pool: the first operations then create no event.
	for range 4 {
		ev, err := dev.NewEventFlags(cuda.EventDisableTiming)
		if err != nil {
			w.destroyEvents()
			return nil, fmt.Errorf("watchdog: Watch: creating events: %w", err)
		}
		w.free = append(w.free, ev)
		w.events++
	}
	// Checked before anything is attached: a refused Watch leaves the
	// watchdog in charge alone.
	if err := w.claim(); err != nil {
		w.destroyEvents()
		return nil, err
	}
	remove, err := c.AddHook(hook{w})
	if err != nil {
		w.unclaim()
		w.destroyEvents()
		return nil, fmt.Errorf("watchdog: Watch: %w", err)
	}
	w.mu.Lock()
	w.remove = remove
	w.mu.Unlock()
	register(w)
	return w, nil
}

// claims are the communicators watched now, each by the one watchdog in
// charge of it: [Watch] checks here before it attaches anything, so that a
// refused Watch never comes between the communicator and the watchdog in
// charge. Weak on both sides: a claim keeps neither reachable.
var claims struct {
	sync.Mutex
	m map[weak.Pointer[nccl.Communicator]]weak.Pointer[Watchdog]
}

// claim makes w the watchdog in charge of its communicator, unless another
// one watches it (neither stopped nor failed).
func (w *Watchdog) claim() error {
	claims.Lock()
	defer claims.Unlock()
	if pw := claims.m[w.cw].Value(); pw != nil && !pw.failed.Load() && !pw.isStopped() {
		return fmt.Errorf("watchdog: Watch: %s is already watched (Stop its watchdog first): %w", w.comm, nccl.ErrInvalidUsage)
	}
	if claims.m == nil {
		claims.m = make(map[weak.Pointer[nccl.Communicator]]weak.Pointer[Watchdog])
	}
	for c, pw := range claims.m { // forget the claims of collected values
		if c.Value() == nil || pw.Value() == nil {
			delete(claims.m, c)
		}
	}
	claims.m[w.cw] = weak.Make(w)
	return nil
}

// unclaim ends w's charge of its communicator.
func (w *Watchdog) unclaim() {
	claims.Lock()
	defer claims.Unlock()
	if claims.m[w.cw].Value() == w {
		delete(claims.m, w.cw)
	}
}

// hook attaches a watchdog to its communicator: the communicator's calls
// reach the watchdog through it, so [Watchdog] itself exports no hook
// methods.
type hook struct{ w *Watchdog }

func (h hook) Queued(op nccl.QueuedOp) { h.w.queued(&op) }

// WatchesQueued: the watchdog follows every operation queued on a stream
// ([nccl.WatchingHook]), so they are recorded watched; queued unwatches the
// ones it does not follow.
func (h hook) WatchesQueued() {}
func (h hook) GroupEnded()    { h.w.groupEnded() }

// queued runs under the communicator's lock right after NCCL accepted an
// operation. It costs a mutex, an atomic load and a copy: the first
// operation on a stream in each poll period records an event after itself
// (so an operation queued alone is followed exactly); the ones after it in
// the period are covered by the next event on that stream (stream order:
// an event completes after everything queued before it), which the poller
// records at its next tick if no operation does.
func (w *Watchdog) queued(op *nccl.QueuedOp) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		if op.Event.Watched {
			op.Trace.Unwatch(op.Ref) // recorded watched (WatchesQueued): not followed after all
		}
		return
	}
	if w.open.n > 0 && op.OnStream && op.Event.Stream == w.open.e.Stream && op.Event.Group == 0 &&
		w.serial == w.open.lastSerialOf() && w.openFast == w.period+1 && len(w.deferred) == 0 &&
		w.openEpoch == capi.CaptureEpoch.Load()+1 && !w.nonBlocking.Load() {
		// The hot path: the next operation on the open run's stream, with
		// nothing recorded between (the same decisions as below: no event
		// due on the stream in this period, no capture begun since).
		w.serial++
		w.open.n++
		w.open.lastRef, w.open.lastE = op.Ref, op.Event
		w.mu.Unlock()
		if !op.Event.Watched {
			op.Watch()
		}
		return
	}
	w.serial++
	en := entry{tr: op.Trace, ref: op.Ref, e: op.Event, serial: w.serial}
	// A group's operations reach the GPU when the group ends, and a
	// non-blocking communicator's when NCCL's thread launches them: both
	// before the communicator's next operation is accepted.
	if len(w.deferred) > 0 && (op.Event.Group == 0 || op.Event.Group != w.deferred[0].e.Group) {
		w.flushLocked(len(w.deferred))
	}
	if !op.OnStream {
		// Split, Shrink, Grow, Finalize...: work of the host (and NCCL's
		// threads), on no stream. The call path marks its entry watched,
		// started and completed; the poller reads that, and times it out
		// by its name.
		w.host = append(w.host, en)
		w.mu.Unlock()
		return
	}
	ss := w.streamLocked(op.Event.Stream)
	if w.capturingLocked(ss) {
		// Captured into a graph: it runs at each replay, not now. No event
		// is recorded in a capture, and none of one is ever queried (either
		// would break the capture); its replays are not watched.
		w.captured++
		w.mu.Unlock()
		if op.Event.Watched {
			op.Trace.Unwatch(op.Ref)
		}
		return
	}
	if op.Event.Group != 0 || w.nonBlocking.Load() {
		w.deferred = append(w.deferred, en)
	} else {
		w.launchLocked(en, ss)
	}
	w.mu.Unlock()
}

// streamLocked is the state of stream h (mu held).
func (w *Watchdog) streamLocked(h uintptr) *streamState {
	for i := range w.streams {
		if w.streams[i].h == h {
			return &w.streams[i]
		}
	}
	if len(w.streams) >= 64 { // a program cycling through streams: forget the oldest
		w.streams = w.streams[:copy(w.streams, w.streams[1:])]
	}
	w.streams = append(w.streams, streamState{h: h})
	return &w.streams[len(w.streams)-1]
}

// capturingLocked reports whether work queued on the stream now is
// captured (mu held). The driver is asked when the stream is new, and again
// after package cuda began or ended any capture (capi.CaptureEpoch); the
// legacy default stream is never captured. A capture begun by another
// library, on a stream the watchdog has seen, is not seen here: the poller
// checks again before it records an event there.
func (w *Watchdog) capturingLocked(ss *streamState) bool {
	if ss.h == 0 || ss.h == streamLegacy {
		return false
	}
	epoch := capi.CaptureEpoch.Load() + 1
	if ss.capEpoch == epoch && ss.h != streamPerThread {
		return ss.capturing
	}
	st, _, err := cuda.StreamOf(ss.h, w.dev).CaptureInfo()
	if err != nil {
		w.dropped++ // cannot tell: never record an event that might be captured
		return true
	}
	ss.capturing = st != cuda.NotCapturing
	ss.capEpoch = epoch
	return ss.capturing
}

// launchLocked hands a launched operation to the poller (mu held),
// recording an event after it when it is the first on its stream in this
// poll period (or on the per-thread default stream, which only the
// calling thread can record on).
func (w *Watchdog) launchLocked(en entry, ss *streamState) {
	if ss == nil {
		ss = w.streamLocked(en.e.Stream)
	}
	if ss.recorded != w.period+1 || ss.h == streamPerThread {
		if ev := w.eventLocked(); ev != nil {
			if err := recordEvent(ev, en.e.Stream); err != nil {
				w.free = append(w.free, ev)
			} else {
				en.ev = ev
				ss.recorded = w.period + 1
			}
		}
	}
	if !en.e.Watched {
		en.tr.Watch(en.ref) // the poller starts and completes it from now on
	}
	en.n = 1
	if en.ev == nil && w.open.n > 0 && w.open.e.Stream == en.e.Stream && w.open.lastSerialOf()+1 == en.serial {
		// The next operation of the open run's stream, recorded right
		// after it: it joins the run.
		w.open.n++
		w.open.lastRef, w.open.lastE = en.ref, en.e
		w.setFastLocked(ss)
		return
	}
	w.closeRunLocked()
	if en.ev == nil && ss.h != streamPerThread {
		w.open = en
		w.setFastLocked(ss)
		return
	}
	w.incoming = append(w.incoming, en)
}

// setFastLocked notes whether the next operation on the open run's
// stream ss may join it on queued's hot path (mu held).
func (w *Watchdog) setFastLocked(ss *streamState) {
	w.openFast = 0
	if ss.recorded == w.period+1 && ss.h != streamPerThread && !ss.capturing &&
		(ss.h == 0 || ss.h == streamLegacy || ss.capEpoch == capi.CaptureEpoch.Load()+1) {
		w.openFast = w.period + 1
		w.openEpoch = capi.CaptureEpoch.Load() + 1
	}
}

// closeRunLocked hands the open run to the poller (mu held).
func (w *Watchdog) closeRunLocked() {
	if w.open.n > 0 {
		w.incoming = append(w.incoming, w.open)
		w.open = entry{}
		w.openFast = 0
	}
}

// eventLocked takes an event from the pool, or makes one; nil when it
// cannot (mu held).
func (w *Watchdog) eventLocked() *cuda.Event {
	if n := len(w.free); n > 0 {
		ev := w.free[n-1]
		w.free = w.free[:n-1]
		return ev
	}
	ev, err := w.dev.NewEventFlags(cuda.EventDisableTiming)
	if err != nil {
		return nil
	}
	w.events++
	return ev
}

// groupEnded: the outermost group that queued operations on the
// communicator has ended. On a blocking communicator they are on their
// streams now; on a non-blocking one NCCL's thread launches them, and they
// wait, as the communicator's other operations do, for its state to say so.
func (w *Watchdog) groupEnded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if !w.nonBlocking.Load() {
		w.flushLocked(len(w.deferred))
		return
	}
	for i := range w.deferred {
		w.deferred[i].e.Group = 0 // launched like any other of its operations
	}
}

// flushLocked launches the first n deferred entries (mu held).
func (w *Watchdog) flushLocked(n int) {
	for _, en := range w.deferred[:n] {
		w.launchLocked(en, nil)
	}
	k := copy(w.deferred, w.deferred[n:])
	clear(w.deferred[k:])
	w.deferred = w.deferred[:k]
}

// Err is the failure the watchdog found (*[TimeoutError] or *[AsyncError]),
// once it has dumped and acted; nil before, and when stopped without one.
func (w *Watchdog) Err() error {
	if w == nil {
		return nil
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Done is closed when the watchdog has failed (Err says why) or stopped.
func (w *Watchdog) Done() <-chan struct{} {
	if w == nil || w.done == nil {
		return closedChan // the zero Watchdog
	}
	return w.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Comm is the watched communicator's identity.
func (w *Watchdog) Comm() Comm {
	if w == nil {
		return Comm{}
	}
	return w.comm
}

// Stats are a watchdog's counters.
type Stats struct {
	Events  int    // CUDA events made (the pool, in flight, abandoned)
	Pending int    // operations queued and not seen complete
	Dropped uint64 // operations not watched: an event could not be made or recorded, or a stream's capture state not read
	// Captured counts operations queued on a stream being captured into a
	// CUDA graph. They are not watched: the watchdog records no event in a
	// capture and queries none (either would invalidate it), and a graph's
	// replays ([cuda.GraphExec].Launch) are not operations of the
	// communicator. Captures begun by other libraries than package cuda,
	// on a stream the watchdog has seen before, are noticed only by the
	// poller, which then leaves that stream's operations alone until the
	// capture ends.
	Captured uint64
	// Abandoned counts events the poller recorded on a stream that
	// another thread began capturing at the same moment: the record may
	// belong to that capture, so the event is never queried, reused or
	// destroyed (the graph may record it on every replay).
	Abandoned uint64
	Polls     uint64 // poller ticks that looked at this communicator
	Covers    uint64 // events the poller recorded behind operations queued after a stream's first in a poll period
}

// Stats returns the watchdog's counters.
func (w *Watchdog) Stats() Stats {
	if w == nil || w.done == nil {
		return Stats{} // the zero Watchdog
	}
	w.mu.Lock()
	s := Stats{Events: w.events, Dropped: w.dropped, Captured: w.captured, Pending: w.queuedLocked(),
		Abandoned: w.abandoned.Load(), Polls: w.polls.Load(), Covers: w.covers.Load()}
	w.mu.Unlock()
	w.pollMu.Lock()
	s.Pending += opsIn(w.pending)
	w.pollMu.Unlock()
	return s
}

// Synchronize waits until the work queued on s is done, as s.Synchronize
// does, but returns the watchdog's error as soon as it fails, and ctx's when
// ctx ends: a wait a hang cannot hold forever. It polls with a backoff
// from 20 µs to the poll interval.
func (w *Watchdog) Synchronize(ctx context.Context, s cuda.Stream) error {
	if w == nil || w.done == nil {
		return fmt.Errorf("watchdog: Synchronize: the zero Watchdog watches nothing: use Watch: %w", nccl.ErrInvalidUsage)
	}
	d := 20 * time.Microsecond
	var t *time.Timer
	done := w.done
	for {
		if err := w.Err(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		ok, err := s.Done()
		if err != nil {
			if werr := w.Err(); werr != nil {
				return werr
			}
			return err
		}
		if ok {
			return nil
		}
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-done:
			done = nil // failed (Err says) or stopped (poll on)
		case <-ctx.Done():
		}
		d = min(2*d, w.opts.PollInterval)
	}
}

// Stop ends the watch: the communicator no longer records events, and the
// watchdog's events are destroyed. It waits for the poller to let go of the
// watchdog (and for a poll of the communicator's asynchronous error in
// flight, which waits while a call holds the communicator inside NCCL).
// After a failure it only releases what is left. Idempotent; Err keeps its
// value. On the zero [Watchdog], and a nil one (what a failed [Watch]
// returns), it does nothing.
func (w *Watchdog) Stop() {
	if w == nil || w.done == nil {
		return
	}
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.unregistered.Store(true)
		unregister(w, true)
		// A tick under way ends (later ones see unregistered and start no
		// asynchronous poll); then wait for the poll in flight without
		// holding pollMu, so that a poller round that reached this
		// watchdog is not held by it.
		w.pollMu.Lock()
		w.shutAsync()
		w.pollMu.Unlock()
		w.asyncRun.Wait()
		w.mu.Lock()
		remove := w.remove
		w.mu.Unlock()
		if remove != nil {
			remove() // needs no lock of the communicator: never waits for a call
		}
		w.unclaim()
		if !w.failed.Load() {
			w.unwatchPending()
		}
		w.destroyEvents()
		w.doneOnce.Do(func() { close(w.done) })
	})
}

// unwatchPending gives up the entries the watchdog marked watched and will
// no longer complete (Stop of a healthy watch): the dump then reads them
// "enqueued", not started and never completed, which the analyzer would
// call stuck. After a failure they stay as the watchdog last saw them.
func (w *Watchdog) unwatchPending() {
	w.mu.Lock()
	w.closeRunLocked()
	for i := range w.incoming {
		w.incoming[i].unwatch()
	}
	w.mu.Unlock()
	w.pollMu.Lock()
	for i := range w.pending {
		w.pending[i].unwatch()
	}
	w.pollMu.Unlock()
}

func (w *Watchdog) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// destroyEvents destroys every event of the watchdog (queued must be off).
// Events still pending on a stream are released by the driver once their
// work completes.
func (w *Watchdog) destroyEvents() {
	w.mu.Lock()
	evs := w.free
	for _, en := range w.incoming {
		if en.ev != nil && !slices.Contains(evs, en.ev) {
			evs = append(evs, en.ev)
		}
	}
	w.free, w.incoming, w.deferred = nil, nil, nil
	w.mu.Unlock()
	w.pollMu.Lock()
	for _, en := range w.pending {
		if en.ev != nil && !slices.Contains(evs, en.ev) { // entries share events
			evs = append(evs, en.ev)
		}
	}
	w.pending = nil
	w.pollMu.Unlock()
	for _, ev := range evs {
		ev.Destroy()
	}
}

// fail dumps, acts and reports; it runs on a goroutine of its own, since
// an abort may wait for a call inside NCCL.
func (w *Watchdog) fail(err error) {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	reason := err.Error()
	var dump string
	var derr error
	if !w.opts.NoDump {
		dump, derr = trace.Default().DumpFile(w.opts.DumpDir, reason)
	}
	if w.opts.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		trace.Default().RequestDump(ctx, w.opts.Store, reason)
		cancel()
	}
	// With Exit, neither the action nor OnFailure may hold the process:
	// each has exitGrace, and the message says which one did not return.
	exitAfter := func(what string) *time.Timer {
		if !w.opts.Exit {
			return nil
		}
		msg, grace, code := reason, exitGrace, w.opts.ExitCode
		return time.AfterFunc(grace, func() {
			fmt.Fprintf(os.Stderr, "%s (%s did not return within %v; exiting)\n", msg, what, grace)
			os.Exit(code)
		})
	}
	stop := func(t *time.Timer) {
		if t != nil {
			t.Stop()
		}
	}
	exitTimer := exitAfter("the " + w.opts.Action.verb())
	// The error the communicator records as the abort's cause is complete
	// before the abort; one with the action's failure is a copy.
	withAction := func(aerr error) error {
		switch e := err.(type) {
		case *TimeoutError:
			c := *e
			c.Action, c.ActionErr, c.Dump, c.DumpErr = w.opts.Action, aerr, dump, derr
			return &c
		case *AsyncError:
			c := *e
			c.Action, c.ActionErr, c.Dump, c.DumpErr = w.opts.Action, aerr, dump, derr
			return &c
		}
		return err
	}
	err = withAction(nil)
	var aerr error
	w.actionSince.Store(time.Now().UnixNano()) // the heartbeat monitor watches it
	if c := w.cw.Value(); c != nil {
		switch w.opts.Action {
		case ActionAbort:
			aerr = c.AbortCause(err)
		case ActionRevoke:
			aerr = c.Revoke(0)
		}
	} else if w.opts.Action != ActionNone {
		aerr = errors.New("the communicator was dropped by the program (never destroyed)")
	}
	w.actionSince.Store(0)
	stop(exitTimer)
	if aerr != nil {
		err = withAction(aerr)
	}
	w.errMu.Lock()
	w.err = err
	w.errMu.Unlock()
	w.doneOnce.Do(func() { close(w.done) })
	if w.opts.Action != ActionNone {
		w.destroyEvents()
	}
	if w.opts.OnFailure != nil {
		t := exitAfter("OnFailure")
		w.opts.OnFailure(err)
		stop(t)
	}
	if w.opts.Exit {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(w.opts.ExitCode)
	}
}

// Package watchdog turns a hang of an NCCL communicator into an error.
//
// A collective that a peer never joins does not fail: its kernel waits on
// the GPU forever, and so does the host that synchronizes with it. A
// watchdog, opt-in per communicator, notices:
//
//	w, err := watchdog.Watch(c, &watchdog.Options{Timeout: 2 * time.Minute, DumpDir: "/shared/dumps"})
//	if err != nil { ... }
//	defer w.Stop()
//	for step := range steps {
//		if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
//			return err // after a timeout: an *nccl.StateError wrapping the *watchdog.TimeoutError
//		}
//		if err := w.Synchronize(ctx, s); err != nil {
//			return err // *watchdog.TimeoutError or *watchdog.AsyncError
//		}
//	}
//
// # How it works
//
// [Watch] attaches a hook to the communicator ([nccl.Communicator].AddHook). Each
// operation the communicator queues (collectives, point-to-point and
// one-sided calls) is followed by a CUDA event created with
// CU_EVENT_DISABLE_TIMING, recorded on its stream after it. Stream order
// makes one event cover every operation queued before it on its stream, so
// events are recorded only as often as the poller can use them: the first
// operation on a stream in each poll period records one right after NCCL
// accepted it; the later ones of the period share the next event on that
// stream, recorded by a later operation or by the poller at its next tick.
// Events whose work completed are reused, so the steady state creates none
// and allocates nothing, the poller's ticks included (the queues of
// operations grow to the largest backlog seen between two ticks, and
// stay). Off (not watched), a communicator pays nothing: its list of hooks
// is empty.
//
// One goroutine per process, started by the first Watch and ended with the
// last watchdog, polls every PollInterval: for each stream of each watched
// communicator, the oldest operation's event (cuEventQuery), and each
// communicator's asynchronous error (ncclCommGetAsyncError). An operation
// counts as started ([trace.Comm].Start) when the poller sees it at the head
// of its stream, everything watched before it there having completed; it
// times out Timeout after that. Completed operations are marked so in the
// flight recorder (trace.Comm.Complete), so a dump says which operations the
// GPU finished.
//
// On a timeout or an asynchronous error, the watchdog
//
//  1. dumps the flight recorder (trace.Default().DumpFile into DumpDir) and,
//     given the job's Store, asks every rank to dump too;
//  2. acts on the communicator: aborts it (the default; every later call
//     returns an *nccl.StateError wrapping the watchdog's error), revokes it,
//     or leaves it to the program (ActionNone, for recovery by Shrink with
//     nccl.ShrinkAbort);
//  3. reports: Err returns the *[TimeoutError] or *[AsyncError], Done is closed,
//     Synchronize returns the error, OnFailure is called;
//  4. with Exit, ends the process (os.Exit(ExitCode), as PyTorch's
//     TORCH_NCCL_ASYNC_ERROR_HANDLING=1 does).
//
// The error names the operation, its sequence number (the same on every
// rank for a collective) and how long it waited:
//
//	watchdog: AllReduce #17 (1024 float32) on world rank 2/4 did not complete in 10s; communicator aborted; flight recorder dumped to /shared/dumps/nccl4go-trace-rank2-pid4242-1718000000000.json
//
// # Groups and non-blocking communicators
//
// An operation queued inside a group reaches the GPU when the outermost
// group ends, and one queued on a non-blocking communicator when NCCL's
// thread launches it; an event recorded at once would complete before the
// operation began. The watchdog therefore records a group's events when the
// group ends (the root package tells it: [nccl.Hook]'s GroupEnded), and a
// non-blocking communicator's when its next operation is queued or its
// asynchronous state says the work has left NCCL's host side. An operation
// NCCL never launches (a group that never ends, a non-blocking operation in
// progress for good) times out as "not launched by NCCL"; one NCCL keeps
// accepting operations on is busy, not hung.
//
// # CUDA graphs
//
// Watching never breaks a stream capture. The watchdog records no event in
// a capture and queries none, since the driver answers either with an error
// that invalidates the capture (see cuda's "NCCL and graphs"): an operation
// queued on a stream being captured (asked of the driver when the stream is
// first seen, and again after package cuda began or ended any capture) is
// not watched, and neither are the graph's replays, which are no operations
// of the communicator; [Stats.Captured] counts them. The poller runs on an OS
// thread of its own in relaxed capture interaction mode
// (cuThreadExchangeStreamCaptureMode), so its queries of other events are
// harmless to a CaptureGlobal capture begun anywhere in the process, by
// this program or another library. Before it records an event itself, it
// asks whether the stream is being captured, and again after: an event
// whose stream began a capture at that moment is abandoned, never queried
// or destroyed ([Stats.Abandoned]). A capture begun by another library on a
// stream the watchdog already knows is seen only by the poller: operations
// queued in it are taken for eager ones, wait until the capture ends, and
// are then reported complete with the stream's next event.
//
// # Blocking communicators: what is safe
//
// Detection is safe with every communicator: the poller only queries
// events and reads the asynchronous error, and it never waits for a
// communicator; the asynchronous error, which takes the communicator's lock,
// is read on a goroutine of the communicator's own (one read at a time), so a
// call held inside NCCL delays only that communicator's asynchronous check,
// never the timeouts of any.
//
// A blocking communicator's collective returns once NCCL has queued it, so
// a hang shows as a stream that never completes, while the host goroutine
// is free: in Synchronize, in a cuda copy, or queuing more work. The abort
// then frees NCCL's kernels and the stream completes. Three cases are not
// safe to rescue, and the watchdog waits them out, as nccl.Communicator's
// Abort does:
//
//   - a blocking Split, Shrink, Grow, Finalize or Destroy waiting for a
//     dead peer holds the communicator inside NCCL, where it cannot be
//     interrupted; the abort waits for it (the dump is written first, so it
//     always lands; with Exit the process ends 10 s later regardless, and
//     the heartbeat monitor ends it after Options.Heartbeat in any case);
//   - a blocking collective whose enqueue waits inside NCCL because NCCL's
//     work queue is full behind the hung operation (thousands of operations
//     queued without a synchronization): the same;
//   - an operation queued inside a group still open on another goroutine:
//     Abort is refused (nccl.ErrInvalidUsage); the error's ActionErr says so.
//
// To keep every wait interruptible, synchronize with Synchronize (or a
// context-bounded poll) rather than cuStreamSynchronize, and initialize
// non-blocking when peers may never come (see the nccl package's
// "Blocking and cancellation"). With [ActionNone] nothing is aborted and the
// program decides.
//
// # Cost
//
// Watched, a collective that follows another on the same stream joins
// the open run: a few stores under the watchdog's lock and no CUDA call;
// the first operation on a stream in each poll period records one event
// after it (one cuEventRecord, 150-280 ns on an H200), and one later event
// follows the whole run (TestOneEventRecordPerStreamAndPeriod counts the
// calls). BenchmarkWatchedAllReduce/compare on an H200 (NCCL 2.28.3 and
// 2.30.7, three runs each; the README has the table): 42-72 ns added per
// small all-reduce in a tight loop at the 1 ms poll, 30-48 ns at the
// default poll interval. A hang is still detected within Timeout plus one poll interval of the
// operation reaching the head of its stream; when several operations
// queued within one poll interval share the event that does not complete,
// the error names the oldest and says how many share it
// ([TimeoutError.Shared]). Unwatched, nothing: the communicator has no hook.
//
// # Heartbeat
//
// The watchdog itself can be stuck: a driver query that never returns on
// the poller's thread, an abort that waits inside NCCL for good. A monitor
// goroutine checks that every poller round and every failure's action end
// within [Options.Heartbeat] ([DefaultHeartbeat], PyTorch's
// TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC); when one does not, it dumps the flight
// recorder, prints "watchdog: heartbeat monitor: ..." saying what is stuck,
// and ends the process with [Options.ExitCode], as PyTorch's
// TORCH_NCCL_ENABLE_MONITORING does. A negative Heartbeat turns it off.
package watchdog

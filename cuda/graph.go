package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/nccl4go/nccl/internal/capi"
)

// CUDA graphs: record the work queued on a stream once (stream capture),
// then replay it with one launch. Capturing NCCL operations removes their
// host cost from every replay.
//
// # NCCL and graphs
//
// Every collective and point-to-point call of the nccl package can be
// captured: it only enqueues work on the stream, and NCCL (2.9 and later)
// notices the capture itself. Rules NCCL sets:
//
//   - All ranks of a communicator must capture (or run eagerly) the same
//     operations in the same order, and replay their graphs the same number
//     of times in the same order: a replay is a collective call.
//   - Mixing captured and uncaptured operations on one communicator, or
//     using it in several graphs, is allowed by default (Config's
//     GraphUsageMode, NCCL_GRAPH_USAGE_MODE: GraphUsageMultiple, NCCL's
//     default). GraphUsageOne or GraphUsageNone let NCCL skip the
//     synchronization that mixing needs, and then such mixing is undefined.
//   - Replays of graphs holding operations of one communicator must not
//     run concurrently with each other or with eager operations of it on
//     another stream unless the work is ordered by the streams.
//   - A graph keeps references to the buffers captured: keep them allocated
//     until the GraphExec is destroyed. Values are read at replay time.
//   - A custom reduction operator (PreMulSum) captured into a graph must
//     live until the graph is destroyed.
//   - A communicator watched by package watchdog can be captured too: the
//     watchdog records no event in a capture and queries none, and its
//     poller runs in relaxed capture interaction mode, so it never
//     invalidates a capture (the captured operations are not watched).
//   - Capture in CaptureGlobal mode forbids "unsafe" driver calls (memory
//     allocation, synchronizing a capturing stream) on every thread while it
//     lasts; NCCL's first operation on a communicator may connect peers and
//     allocate. Run one eager operation before capturing, or capture in
//     CaptureThreadLocal mode (what nccl-tests does).
//
// Capture is per stream: work queued on a capturing stream from any
// goroutine is captured. Except in CaptureRelaxed mode, the capture must
// end on the OS thread that began it: Capture locks the goroutine to its
// thread for the whole capture; with BeginCapture and EndCapture the caller
// does that (runtime.LockOSThread).

// CaptureMode says which driver calls other code may make while a stream
// is being captured (CUstreamCaptureMode).
type CaptureMode int32

// Capture modes.
const (
	// CaptureGlobal: no thread may make unsafe calls while the capture lasts.
	CaptureGlobal CaptureMode = 0 // CU_STREAM_CAPTURE_MODE_GLOBAL
	// CaptureThreadLocal: only the capturing thread may not.
	CaptureThreadLocal CaptureMode = 1 // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	// CaptureRelaxed: unsafe calls are allowed; the capture may end on
	// another thread.
	CaptureRelaxed CaptureMode = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
)

// String is the C name.
func (m CaptureMode) String() string {
	switch m {
	case CaptureGlobal:
		return "CU_STREAM_CAPTURE_MODE_GLOBAL"
	case CaptureThreadLocal:
		return "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL"
	case CaptureRelaxed:
		return "CU_STREAM_CAPTURE_MODE_RELAXED"
	}
	return fmt.Sprintf("CUstreamCaptureMode(%d)", int32(m))
}

// CaptureStatus is a stream's capture state (CUstreamCaptureStatus).
type CaptureStatus int32

// Capture states.
const (
	// NotCapturing: work queued on the stream runs.
	NotCapturing CaptureStatus = 0 // CU_STREAM_CAPTURE_STATUS_NONE
	// Capturing: work queued on the stream is recorded.
	Capturing CaptureStatus = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
	// CaptureInvalidated: the capture broke a rule; ending it fails.
	CaptureInvalidated CaptureStatus = 2 // CU_STREAM_CAPTURE_STATUS_INVALIDATED
)

// String is the C name.
func (s CaptureStatus) String() string {
	switch s {
	case NotCapturing:
		return "CU_STREAM_CAPTURE_STATUS_NONE"
	case Capturing:
		return "CU_STREAM_CAPTURE_STATUS_ACTIVE"
	case CaptureInvalidated:
		return "CU_STREAM_CAPTURE_STATUS_INVALIDATED"
	}
	return fmt.Sprintf("CUstreamCaptureStatus(%d)", int32(s))
}

// captureStream is ctx for capture calls: the legacy default stream cannot
// be captured.
func (s Stream) captureStream(op string) (uintptr, uintptr, error) {
	ctx, h, err := s.ctx(op)
	if err != nil {
		return 0, 0, err
	}
	if h == 0 {
		return 0, 0, &ArgError{Op: op, Arg: "stream", Reason: "the legacy default stream cannot be captured: use a stream from NewStream"}
	}
	return ctx, h, nil
}

// BeginCapture starts capturing the stream (cuStreamBeginCapture_v2): work
// queued on it from now on is recorded, not run, until EndCapture. Except
// in [CaptureRelaxed] mode, EndCapture must be called on the same OS thread:
// lock the goroutine to its thread first, or use Capture.
func (s Stream) BeginCapture(mode CaptureMode) error {
	const op = "Stream.BeginCapture"
	if mode < CaptureGlobal || mode > CaptureRelaxed {
		return &ArgError{Op: op, Arg: "mode", Reason: mode.String() + ": unknown"}
	}
	ctx, h, err := s.captureStream(op)
	if err != nil {
		return err
	}
	r := capi.CuStreamBeginCapture(ctx, h, int32(mode))
	capi.CaptureEpoch.Add(1) // after the call: a cache read since sees the capture
	return check(op, "cuStreamBeginCapture_v2", r)
}

// EndCapture ends the stream's capture and returns the recorded work as a
// [Graph] (cuStreamEndCapture). A capture invalidated by a forbidden call
// returns an error, and the stream is no longer capturing.
func (s Stream) EndCapture() (*Graph, error) {
	const op = "Stream.EndCapture"
	ctx, h, err := s.captureStream(op)
	if err != nil {
		return nil, err
	}
	g, r := capi.CuStreamEndCapture(ctx, h)
	capi.CaptureEpoch.Add(1)
	if err := check(op, "cuStreamEndCapture", r); err != nil {
		return nil, err
	}
	if g == 0 {
		return nil, &Error{Op: op, Code: Unknown, Detail: "the driver returned no graph"}
	}
	return &Graph{h: g, dev: s.s.dev}, nil
}

// CaptureStatus reports whether the stream is being captured
// (cuStreamIsCapturing). The zero [Stream] is the legacy default stream of
// the thread's current device, which is never captured: it reports
// [NotCapturing].
func (s Stream) CaptureStatus() (CaptureStatus, error) {
	const op = "Stream.CaptureStatus"
	if s.s == nil {
		return NotCapturing, nil
	}
	ctx, h, err := s.ctx(op)
	if err != nil {
		return NotCapturing, err
	}
	st, r := capi.CuStreamIsCapturing(ctx, h)
	return CaptureStatus(st), check(op, "cuStreamIsCapturing", r)
}

// CaptureInfo is [CaptureStatus] with the capture's id, unique per capture in
// the process (cuStreamGetCaptureInfo_v3, else _v2). The id is 0 when the
// stream is not capturing.
func (s Stream) CaptureInfo() (CaptureStatus, uint64, error) {
	const op = "Stream.CaptureInfo"
	if s.s == nil {
		return NotCapturing, 0, nil
	}
	ctx, h, err := s.ctx(op)
	if err != nil {
		return NotCapturing, 0, err
	}
	st, id, r := capi.CuStreamGetCaptureInfo(ctx, h)
	if err := check(op, "cuStreamGetCaptureInfo_v2", r); err != nil {
		return NotCapturing, 0, err
	}
	if CaptureStatus(st) == NotCapturing {
		id = 0
	}
	return CaptureStatus(st), id, nil
}

// Capture records the work fn queues on s into a [Graph]: it locks the
// goroutine to its OS thread, begins the capture, runs fn, and ends the
// capture. If fn fails, the capture is ended and its graph destroyed, and
// fn's error is returned; if fn panics, the capture is ended (on the thread
// that began it) and the panic goes on.
func (s Stream) Capture(mode CaptureMode, fn func() error) (*Graph, error) {
	gs, err := CaptureStreams([]Stream{s}, mode, fn)
	if err != nil {
		return nil, err
	}
	return gs[0], nil
}

// CaptureStreams captures several streams at once (one graph per stream),
// as a group of NCCL operations over several GPUs of one process needs: it
// begins a capture on each stream in order, runs fn, and ends them in the
// same order, all on one locked OS thread. On failure every capture begun
// is ended and every graph destroyed; if fn panics, the captures are ended
// on the thread that began them, and the panic goes on.
func CaptureStreams(streams []Stream, mode CaptureMode, fn func() error) (graphs []*Graph, err error) {
	if len(streams) == 0 {
		return nil, &ArgError{Op: "CaptureStreams", Arg: "streams", Reason: "empty"}
	}
	if fn == nil {
		return nil, &ArgError{Op: "CaptureStreams", Arg: "fn", Reason: "nil"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	begun := 0
	returned := false // fn returned: no panic or runtime.Goexit under way
	defer func() {
		if returned && err == nil {
			return
		}
		// On a failure, and while fn panics (or calls runtime.Goexit), end
		// what was begun on this thread, which began it, so that no stream
		// stays capturing; the panic then goes on.
		// End what was begun; their graphs are of no use.
		for _, s := range streams[:begun] {
			if g, e := s.EndCapture(); e == nil && g != nil {
				g.Destroy()
			}
		}
		for _, g := range graphs {
			g.Destroy()
		}
		graphs = nil
	}()
	for _, s := range streams {
		if err := s.BeginCapture(mode); err != nil {
			return nil, err
		}
		begun++
	}
	ferr := fn()
	returned = true
	graphs = make([]*Graph, 0, len(streams))
	var errs []error
	for _, s := range streams {
		g, e := s.EndCapture()
		begun--
		if e != nil {
			errs = append(errs, e)
			continue
		}
		graphs = append(graphs, g)
	}
	begun = 0
	if ferr != nil {
		return nil, ferr
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return graphs, nil
}

// Graph is recorded work (CUgraph). Instantiate it to launch it; Destroy it
// when done (its instances stay valid). It is safe for concurrent use.
type Graph struct {
	h         uintptr
	dev       Device
	destroyed atomic.Bool
}

// Handle is the raw CUgraph, valid until Destroy.
func (g *Graph) Handle() uintptr {
	if g == nil {
		return 0
	}
	return g.h
}

func (g *Graph) ctx(op string) (uintptr, error) {
	if g == nil {
		return 0, &ArgError{Op: op, Arg: "graph", Reason: "nil"}
	}
	if g.destroyed.Load() {
		return 0, closedError(op, "graph destroyed")
	}
	return g.dev.context(op)
}

// Instantiate makes an executable instance of the graph
// (cuGraphInstantiateWithFlags with no flags). Launch it on a stream.
func (g *Graph) Instantiate() (*GraphExec, error) {
	const op = "Graph.Instantiate"
	ctx, err := g.ctx(op)
	if err != nil {
		return nil, err
	}
	e, r := capi.CuGraphInstantiate(ctx, g.h, 0)
	if err := check(op, "cuGraphInstantiateWithFlags", r); err != nil {
		return nil, err
	}
	return &GraphExec{h: e, dev: g.dev}, nil
}

// Destroy releases the graph (cuGraphDestroy). Nil-safe; a second Destroy
// returns [ErrClosed].
func (g *Graph) Destroy() error {
	if g == nil {
		return nil
	}
	return destroyOnce(&g.destroyed, g.dev, g.h, "Graph.Destroy", "graph already destroyed", "cuGraphDestroy", capi.CuGraphDestroy)
}

// GraphExec is an instantiated graph (CUgraphExec): Launch replays it. It
// is safe for concurrent use, but replays of one instance are ordered only
// by the streams they are launched on.
type GraphExec struct {
	h         uintptr
	dev       Device
	destroyed atomic.Bool
}

// Handle is the raw CUgraphExec, valid until Destroy.
func (e *GraphExec) Handle() uintptr {
	if e == nil {
		return 0
	}
	return e.h
}

// Launch enqueues one replay of the graph on s (cuGraphLaunch). s must be
// on the graph's device; the zero [Stream] is that device's legacy default
// stream.
func (e *GraphExec) Launch(s Stream) error {
	const op = "GraphExec.Launch"
	if e == nil {
		return &ArgError{Op: op, Arg: "graph", Reason: "nil"}
	}
	if e.destroyed.Load() {
		return closedError(op, "graph instance destroyed")
	}
	h, dev, err := s.resolve()
	if err != nil {
		return err
	}
	if dev >= 0 && Device(dev) != e.dev {
		return &ArgError{Op: op, Arg: "stream", Reason: "stream of " + Device(dev).String() + ", graph of " + e.dev.String()}
	}
	ctx, err := e.dev.context(op)
	if err != nil {
		return err
	}
	return check(op, "cuGraphLaunch", capi.CuGraphLaunch(ctx, e.h, h))
}

// Destroy releases the instance (cuGraphExecDestroy). Nil-safe; a second
// Destroy returns [ErrClosed].
func (e *GraphExec) Destroy() error {
	if e == nil {
		return nil
	}
	return destroyOnce(&e.destroyed, e.dev, e.h, "GraphExec.Destroy", "graph instance already destroyed", "cuGraphExecDestroy", capi.CuGraphExecDestroy)
}

package cuda

import (
	"sync/atomic"
	"time"

	"github.com/nccl4go/nccl/internal/capi"
)

// Stream is a CUDA stream (CUstream) and the device it belongs to. The zero
// Stream is the legacy default stream of whatever device the operation runs
// on; [Device.DefaultStream] is the same stream bound to one device. A Stream
// is a small value: copy it freely. It is safe for concurrent use.
type Stream struct{ s *stream }

type stream struct {
	h         uintptr
	dev       Device
	owned     bool
	destroyed atomic.Bool
}

// CU_STREAM_NON_BLOCKING: no implicit synchronization with the legacy
// default stream.
const streamNonBlocking = 1

// NewStream creates a stream on the device that does not synchronize with
// the legacy default stream (cuStreamCreate with CU_STREAM_NON_BLOCKING).
// Destroy it when done.
func (d Device) NewStream() (Stream, error) {
	ctx, err := d.context("NewStream")
	if err != nil {
		return Stream{}, err
	}
	h, r := capi.CuStreamCreate(ctx, streamNonBlocking)
	if err := check("NewStream", "cuStreamCreate", r); err != nil {
		return Stream{}, err
	}
	return Stream{&stream{h: h, dev: d, owned: true}}, nil
}

// DefaultStream is the device's legacy default stream (handle 0).
func (d Device) DefaultStream() Stream { return Stream{&stream{dev: d}} }

// StreamOf wraps a stream made by another library (a CUstream or
// cudaStream_t handle) on device dev. Destroy on it returns an error: the
// other library owns it.
func StreamOf(handle uintptr, dev Device) Stream { return Stream{&stream{h: handle, dev: dev}} }

// Handle is the raw CUstream; 0 is the legacy default stream.
func (s Stream) Handle() uintptr {
	if s.s == nil {
		return 0
	}
	return s.s.h
}

// Device is the stream's device; ok is false for the zero [Stream].
func (s Stream) Device() (d Device, ok bool) {
	if s.s == nil {
		return 0, false
	}
	return s.s.dev, true
}

// resolve returns what an operation on the stream needs: its handle and
// device (-1 for the zero [Stream], which fits any device), or [ErrClosed] after
// Destroy (cudabridge.StreamResolve).
func (s Stream) resolve() (handle uintptr, dev int, err error) {
	if s.s == nil {
		return 0, -1, nil
	}
	if s.s.destroyed.Load() {
		return 0, -1, closedError("stream", "stream destroyed")
	}
	return s.s.h, int(s.s.dev), nil
}

func (s Stream) ctx(op string) (uintptr, uintptr, error) {
	if s.s == nil {
		return 0, 0, &ArgError{Op: op, Arg: "stream", Reason: "the zero Stream has no device: use Device.DefaultStream"}
	}
	if s.s.destroyed.Load() {
		return 0, 0, closedError(op, "stream destroyed")
	}
	ctx, err := s.s.dev.context(op)
	return ctx, s.s.h, err
}

// Synchronize waits until all work queued on the stream is done.
func (s Stream) Synchronize() error {
	ctx, h, err := s.ctx("Stream.Synchronize")
	if err != nil {
		return err
	}
	return check("Stream.Synchronize", "cuStreamSynchronize", capi.CuStreamSynchronize(ctx, h))
}

// Done reports whether all work queued on the stream is done, without waiting.
func (s Stream) Done() (bool, error) {
	ctx, h, err := s.ctx("Stream.Done")
	if err != nil {
		return false, err
	}
	r := capi.CuStreamQuery(ctx, h)
	if Result(r) == NotReady {
		return false, nil
	}
	return r == 0, check("Stream.Done", "cuStreamQuery", r)
}

// Destroy destroys a stream made by NewStream. A second Destroy returns an
// error wrapping [ErrClosed]; destroying a default or wrapped stream is an
// error and leaves it alone.
func (s Stream) Destroy() error {
	if s.s == nil || !s.s.owned {
		return &ArgError{Op: "Stream.Destroy", Arg: "stream", Reason: "not created by NewStream"}
	}
	return destroyOnce(&s.s.destroyed, s.s.dev, s.s.h, "Stream.Destroy", "stream already destroyed", "cuStreamDestroy_v2", capi.CuStreamDestroy)
}

// Event is a CUDA event with timing enabled. Use it to time work on a stream:
// record one before and one after, then [Elapsed]. It is safe for concurrent use.
type Event struct {
	h         uintptr
	dev       Device
	flags     EventFlag // as created
	destroyed atomic.Bool
}

// NewEvent creates an event on the device (cuEventCreate). Destroy it when done.
func (d Device) NewEvent() (*Event, error) {
	ctx, err := d.context("NewEvent")
	if err != nil {
		return nil, err
	}
	h, r := capi.CuEventCreate(ctx, 0)
	if err := check("NewEvent", "cuEventCreate", r); err != nil {
		return nil, err
	}
	return &Event{h: h, dev: d}, nil
}

func (e *Event) ctx(op string) (uintptr, error) {
	if e == nil {
		return 0, &ArgError{Op: op, Arg: "event", Reason: "nil"}
	}
	if e.destroyed.Load() {
		return 0, closedError(op, "event destroyed")
	}
	return e.dev.context(op)
}

// Record captures the work queued on s so far (cuEventRecord). s must be on
// the event's device.
func (e *Event) Record(s Stream) error {
	ctx, err := e.ctx("Event.Record")
	if err != nil {
		return err
	}
	h, dev, err := s.resolve()
	if err != nil {
		return err
	}
	if dev >= 0 && Device(dev) != e.dev {
		return &ArgError{Op: "Event.Record", Arg: "stream", Reason: "stream of " + Device(dev).String() + ", event of " + e.dev.String()}
	}
	return check("Event.Record", "cuEventRecord", capi.CuEventRecord(ctx, e.h, h))
}

// Synchronize waits until the recorded work is done.
func (e *Event) Synchronize() error {
	ctx, err := e.ctx("Event.Synchronize")
	if err != nil {
		return err
	}
	return check("Event.Synchronize", "cuEventSynchronize", capi.CuEventSynchronize(ctx, e.h))
}

// Done reports whether the recorded work is done, without waiting.
func (e *Event) Done() (bool, error) {
	ctx, err := e.ctx("Event.Done")
	if err != nil {
		return false, err
	}
	r := capi.CuEventQuery(ctx, e.h)
	if Result(r) == NotReady {
		return false, nil
	}
	return r == 0, check("Event.Done", "cuEventQuery", r)
}

// Destroy releases the event. A second Destroy returns [ErrClosed].
func (e *Event) Destroy() error {
	if e == nil {
		return nil
	}
	return destroyOnce(&e.destroyed, e.dev, e.h, "Event.Destroy", "event already destroyed", "cuEventDestroy_v2", capi.CuEventDestroy)
}

// Elapsed is the GPU time between two recorded events (cuEventElapsedTime,
// about half a microsecond of resolution). Both must have completed.
func Elapsed(start, end *Event) (time.Duration, error) {
	ctx, err := start.ctx("Elapsed")
	if err != nil {
		return 0, err
	}
	if _, err := end.ctx("Elapsed"); err != nil {
		return 0, err
	}
	ms, r := capi.CuEventElapsedTime(ctx, start.h, end.h)
	if err := check("Elapsed", "cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

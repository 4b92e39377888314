package cuda

import "github.com/nccl4go/nccl/internal/capi"

// EventFlag selects how an event behaves (CU_EVENT_* flags of cuEventCreate).
type EventFlag uint32

// [Event] flags.
const (
	// EventBlockingSync makes Synchronize sleep instead of spinning
	// (CU_EVENT_BLOCKING_SYNC).
	EventBlockingSync EventFlag = 0x1
	// EventDisableTiming records no time stamp (CU_EVENT_DISABLE_TIMING):
	// recording and querying cost less; [Elapsed] fails on such an event.
	// The watchdog records one of these per operation.
	EventDisableTiming EventFlag = 0x2
	// EventInterprocess lets the event be shared between processes; it
	// needs [EventDisableTiming] (CU_EVENT_INTERPROCESS).
	EventInterprocess EventFlag = 0x4
)

const eventFlagsKnown = EventBlockingSync | EventDisableTiming | EventInterprocess

// NewEventFlags creates an event on the device with the given flags
// (cuEventCreate). NewEvent is NewEventFlags(0). Destroy it when done.
func (d Device) NewEventFlags(flags EventFlag) (*Event, error) {
	if flags&^eventFlagsKnown != 0 {
		return nil, &ArgError{Op: "NewEventFlags", Arg: "flags", Reason: "unknown event flags"}
	}
	if flags&EventInterprocess != 0 && flags&EventDisableTiming == 0 {
		return nil, &ArgError{Op: "NewEventFlags", Arg: "flags", Reason: "EventInterprocess needs EventDisableTiming"}
	}
	ctx, err := d.context("NewEventFlags")
	if err != nil {
		return nil, err
	}
	h, r := capi.CuEventCreate(ctx, uint32(flags))
	if err := check("NewEventFlags", "cuEventCreate", r); err != nil {
		return nil, err
	}
	return &Event{h: h, dev: d, flags: flags}, nil
}

// resolve is what an NCCL call given e needs: its CUevent, device and
// creation flags, or an error after Destroy (cudabridge.EventResolve).
func (e *Event) resolve() (handle uintptr, dev int, flags uint32, err error) {
	if e == nil {
		return 0, 0, 0, &ArgError{Op: "Event", Arg: "event", Reason: "nil"}
	}
	if e.destroyed.Load() {
		return 0, 0, 0, closedError("Event", "event destroyed")
	}
	return e.h, int(e.dev), uint32(e.flags), nil
}

// Device is the device the event belongs to.
func (e *Event) Device() Device { return e.dev }

// recordHandle is Record on a raw stream handle (a CUstream or
// cudaStream_t of the event's device; 0 is that device's legacy default
// stream), for callers that hold the handle rather than a [Stream], such as
// the watchdog's nccl.Hook (cudabridge.EventRecord). It allocates nothing.
func (e *Event) recordHandle(stream uintptr) error {
	ctx, err := e.ctx("Event.Record")
	if err != nil {
		return err
	}
	return check("Event.Record", "cuEventRecord", capi.CuEventRecord(ctx, e.h, stream))
}

// query is the driver's answer to cuEventQuery, as a code: [Success] once
// the recorded work is done, [NotReady] while it is not, another code when
// the event cannot be queried ([InvalidHandle] for a destroyed event;
// CUDA_ERROR_CAPTURED_EVENT, 907, for one last recorded in a stream being
// captured into a graph). Done wraps the same call in an error; query
// allocates nothing, for pollers such as the watchdog's
// (cudabridge.EventQuery).
func (e *Event) query() Result {
	ctx, err := e.ctx("Event.Query")
	if err != nil {
		return InvalidHandle
	}
	return Result(capi.CuEventQuery(ctx, e.h))
}

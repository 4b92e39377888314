package nccl

import (
	"errors"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// Result is an NCCL result code (ncclResult_t).
type Result int32

// NCCL result codes.
const (
	Success            Result = 0 // ncclSuccess
	UnhandledCUDAError Result = 1 // ncclUnhandledCudaError
	SystemError        Result = 2 // ncclSystemError
	InternalError      Result = 3 // ncclInternalError
	InvalidArgument    Result = 4 // ncclInvalidArgument
	InvalidUsage       Result = 5 // ncclInvalidUsage
	RemoteError        Result = 6 // ncclRemoteError
	InProgress         Result = 7 // ncclInProgress
	Timeout            Result = 8 // ncclTimeout, NCCL 2.30.3
)

var resultText = [...]struct{ c, text string }{
	{"ncclSuccess", "success"},
	{"ncclUnhandledCudaError", "unhandled CUDA error"},
	{"ncclSystemError", "system error"},
	{"ncclInternalError", "internal error"},
	{"ncclInvalidArgument", "invalid argument"},
	{"ncclInvalidUsage", "invalid usage"},
	{"ncclRemoteError", "remote error"},
	{"ncclInProgress", "operation in progress"},
	{"ncclTimeout", "timeout"},
}

// String is the C name, e.g. "ncclInvalidUsage".
func (r Result) String() string {
	if r >= 0 && int(r) < len(resultText) {
		return resultText[r].c
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// Text is a short description, e.g. "invalid usage".
func (r Result) Text() string {
	if r >= 0 && int(r) < len(resultText) {
		return resultText[r].text
	}
	return fmt.Sprintf("unknown result code %d", int32(r))
}

// Sentinel errors, for errors.Is. An *[Error] matches the sentinel of its
// code; the binding's own errors match [ErrInvalidArgument] (checks before
// NCCL), [ErrNotInitialized], [ErrClosed], [ErrUnsupported] and [ErrLibraryNotFound].
var (
	ErrUnhandledCUDA   = errors.New("nccl: unhandled CUDA error")
	ErrSystem          = errors.New("nccl: system error")
	ErrInternal        = errors.New("nccl: internal error")
	ErrInvalidArgument = errors.New("nccl: invalid argument")
	ErrInvalidUsage    = errors.New("nccl: invalid usage")
	ErrRemote          = errors.New("nccl: remote error")
	ErrInProgress      = errors.New("nccl: operation in progress")
	ErrTimeout         = errors.New("nccl: timeout")

	// ErrNotInitialized: the communicator is null (never initialized) or was
	// destroyed or aborted.
	ErrNotInitialized = errors.New("communicator not initialized")
	// ErrClosed: the communicator or resource was already destroyed, aborted
	// or closed.
	ErrClosed = errors.New("nccl: already closed")
	// ErrUnsupported: the loaded NCCL lacks the function or feature. It
	// wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("nccl: unsupported by the loaded NCCL: %w", errors.ErrUnsupported)
	// ErrLibraryNotFound: no NCCL library could be loaded.
	ErrLibraryNotFound = errors.New("nccl: library not found")
)

var codeSentinel = map[Result]error{
	UnhandledCUDAError: ErrUnhandledCUDA, SystemError: ErrSystem, InternalError: ErrInternal,
	InvalidArgument: ErrInvalidArgument, InvalidUsage: ErrInvalidUsage, RemoteError: ErrRemote,
	InProgress: ErrInProgress, Timeout: ErrTimeout,
}

// Error is a failed NCCL call.
type Error struct {
	Op     string // the binding's operation, e.g. "AllReduce"
	Code   Result // what NCCL returned
	Detail string // ncclGetLastError at the time of the failure, if any
}

// Error reads "nccl: AllReduce: invalid usage: <detail>".
func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("nccl: %s: %s: %s", e.Op, e.Code.Text(), e.Detail)
	}
	return fmt.Sprintf("nccl: %s: %s", e.Op, e.Code.Text())
}

// Is maps Code to the sentinel errors.
func (e *Error) Is(target error) bool {
	s, ok := codeSentinel[e.Code]
	return ok && s == target
}

// UnsupportedError is a call the loaded NCCL cannot make: the function is
// missing, or a struct field or feature is newer than the library.
type UnsupportedError struct {
	Feature string  // what is missing: a C function ("ncclCommShrink"), a struct field ("ncclConfig_t.commName"), a flag, a data type
	Since   Release // the first NCCL release that has it
	Loaded  Release // the loaded NCCL
}

// Error reads "nccl: ncclCommShrink: requires NCCL 2.27.3, loaded 2.26.2".
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("nccl: %s: requires NCCL %s, loaded %s", e.Feature, e.Since, e.Loaded)
}

// Is matches [ErrUnsupported] and errors.ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool {
	return target == ErrUnsupported || target == errors.ErrUnsupported
}

// ArgError is an argument the binding rejects before calling NCCL.
type ArgError struct {
	Op     string // e.g. "AllReduce"
	Arg    string // e.g. "recv"
	Reason string // e.g. "10 elements, need 12"
	Err    error  // the underlying error, if any (for example from package cuda)
}

// Unwrap returns the underlying error.
func (e *ArgError) Unwrap() error { return e.Err }

// Error reads "nccl: AllReduce: recv: 10 elements, need 12".
func (e *ArgError) Error() string { return fmt.Sprintf("nccl: %s: %s: %s", e.Op, e.Arg, e.Reason) }

// Is matches [ErrInvalidArgument].
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArgument }

func argErr(op, arg, format string, a ...any) error {
	return &ArgError{Op: op, Arg: arg, Reason: fmt.Sprintf(format, a...)}
}

// StateError is an operation that the communicator's lifecycle state
// refuses: a call on a null, destroyed or aborted communicator, new work on
// a finalized or revoked one, a second Initialize, a call on a communicator
// still being created. The package's one table of legal transitions decides
// (state.go).
type StateError struct {
	// Op is the exported method that was refused, e.g. "NRanks" (a
	// ...Context variant reports the plain method's name; a method of
	// another type is qualified, e.g. "Window.Close").
	Op string
	// State is the communicator's state: "not initialized" (or ""),
	// "creating", "pending", "live", "finalized", "revoked", "destroyed" or
	// "aborted".
	State string
	// Cause is why it was aborted, when AbortCause said (a watchdog's
	// timeout, say); else nil.
	Cause error

	err error  // the sentinel the refusal matches besides State's; nil: by State
	why string // what the refusal tells the caller; "": by State
}

// Error reads "nccl: NRanks: communicator not initialized", with the state,
// the reason and the abort's cause when there are.
func (e *StateError) Error() string {
	msg := e.why
	if msg == "" {
		switch e.State {
		case "", "not initialized", "null":
			msg = "communicator not initialized"
		default:
			msg = "communicator " + e.State
		}
	}
	if e.Cause != nil {
		return fmt.Sprintf("nccl: %s: %s (%v)", e.Op, msg, e.Cause)
	}
	return fmt.Sprintf("nccl: %s: %s", e.Op, msg)
}

// Unwrap returns the abort's cause, if any.
func (e *StateError) Unwrap() error { return e.Cause }

// Is matches [ErrNotInitialized] for a null, destroyed or aborted
// communicator, [ErrClosed] once destroyed or aborted and for new
// operations on a finalized or revoked one, [ErrInvalidUsage] for a
// lifecycle call the state does not allow (a second Initialize or Finalize,
// Finalize after Revoke), and [ErrInProgress] while the communicator is
// being created.
func (e *StateError) Is(target error) bool {
	if e.err != nil && target == e.err {
		return true
	}
	switch e.State {
	case "", "not initialized", "null":
		return target == ErrNotInitialized
	case "destroyed", "aborted":
		return target == ErrNotInitialized || target == ErrClosed
	}
	return false
}

// joinDistinct flattens joined errors and drops those whose text repeats an
// earlier one (the same failure reported by every rank of a group).
func joinDistinct(errs ...error) error {
	var out []error
	seen := map[string]bool{}
	var add func(error)
	add = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				add(e)
			}
			return
		}
		if !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	for _, err := range errs {
		add(err)
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// groupRefusal is the binding's refusal to act on a communicator because
// of a group (open on this thread, or holding it on another): nothing was
// done. It matches [ErrInvalidUsage].
type groupRefusal struct{ msg string }

func (e *groupRefusal) Error() string        { return e.msg + ": " + ErrInvalidUsage.Error() }
func (e *groupRefusal) Is(target error) bool { return target == ErrInvalidUsage }

// statusErr turns a shim status into an error; fn is the C function, for
// the missing-symbol case.
func statusErr(op, fn string, st capi.Status) error {
	switch st.Code {
	case 0:
		return nil
	case capi.Missing:
		return unsupportedFunc(fn)
	case capi.NotLoaded:
		return fmt.Errorf("nccl: %s: %w", op, ErrLibraryNotFound)
	case capi.Held:
		return &groupRefusal{fmt.Sprintf("nccl: %s: another goroutine's open group holds operations of this communicator (its queue belongs to one group at a time): end that group first", op)}
	case capi.Orphaned:
		return fmt.Errorf("nccl: %s: a goroutine exited inside a group (GroupStart without GroupEnd) holding operations of this communicator, which NCCL can never run: Abort or Destroy it: %w", op, ErrInvalidUsage)
	}
	return &Error{Op: op, Code: Result(st.Code), Detail: st.Detail}
}

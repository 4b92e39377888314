package nccl

import (
	"context"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// resState is the state of a resource whose creation NCCL may finish after
// the call returned (windows, device communicators).
type resState uint8

const (
	resPending resState = iota // created in a group, or in the background: not known yet
	resReady                   // usable
	resNone                    // NCCL created nothing (a window it does not support)
	resFailed                  // the creation failed when it ran
	resClosed                  // closed, by Close or by the communicator's Destroy or Abort
)

func (s resState) String() string {
	switch s {
	case resPending:
		return "pending"
	case resReady:
		return "ready"
	case resNone:
		return "none"
	case resFailed:
		return "failed"
	}
	return "closed"
}

// pendingErr is the error of a resource whose creation has not finished.
func pendingErr(op, what string) error {
	return &Error{Op: op, Code: InProgress,
		Detail: what + " is not complete yet: Wait on the communicator (or end the group that issued it) first"}
}

// closedErr is the error of a closed resource.
func closedErr(op, what string) error {
	return fmt.Errorf("nccl: %s: %s closed (by Close, or by the communicator's Destroy or Abort): %w", op, what, ErrClosed)
}

// RegisteredBuffer is device memory registered with a communicator
// (ncclCommRegister), which lets NCCL skip its own copies when the buffer
// is passed to collectives. It is tracked by its communicator: Destroy and
// Abort close it. Safe for concurrent use.
type RegisteredBuffer struct {
	c      *Communicator
	ptr    uintptr // the ncclComm_t it belongs to
	handle uintptr
	buf    Buffer
	closed bool // guarded by c.mu
}

// RegisterBuffer registers b with the communicator (ncclCommRegister). b
// must be on the communicator's device. If one rank passes registered
// buffers to an operation, every rank must. The handle is 0 when NCCL's
// local registration is off (NCCL_LOCAL_REGISTER=0): NCCL then uses the
// buffer unregistered. Close it before freeing the memory. Not collective.
// NCCL 2.19.1.
func (c *Communicator) RegisterBuffer(b Buffer) (*RegisteredBuffer, error) {
	const op = "RegisterBuffer"
	if err := c.prepare(op); err != nil {
		return nil, err
	}
	for {
		ptr, err := c.lockLive(op)
		if err != nil {
			return nil, err
		}
		if c.coll.ptr != ptr || !c.identity {
			c.mu.Unlock()
			if err := c.prepare(op); err != nil {
				return nil, err
			}
			continue
		}
		if err := c.checkBuf(op, "buf", b); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		h, st := capi.CommRegister(ptr, b.Ptr, b.Bytes())
		if st.Code == 0 {
			rb := &RegisteredBuffer{c: c, ptr: ptr, handle: h, buf: b}
			c.trackLocked(rb)
			c.mu.Unlock()
			return rb, nil
		}
		c.mu.Unlock()
		if st.Code != capi.Pending {
			return nil, statusErr(op, "ncclCommRegister", st)
		}
		if err := c.wait(context.Background(), op); err != nil {
			return nil, err
		}
	}
}

// Handle is NCCL's registration handle, valid until Close.
func (rb *RegisteredBuffer) Handle() (uintptr, error) {
	if rb == nil || rb.c == nil {
		return 0, closedErr("RegisteredBuffer.Handle", "registration")
	}
	rb.c.mu.Lock()
	defer rb.c.mu.Unlock()
	if rb.closed || rb.c.ptr != rb.ptr {
		return 0, closedErr("RegisteredBuffer.Handle", "registration")
	}
	return rb.handle, nil
}

// Buffer is the registered memory.
func (rb *RegisteredBuffer) Buffer() Buffer {
	if rb == nil {
		return Buffer{}
	}
	return rb.buf
}

// Size is the registered size in bytes.
func (rb *RegisteredBuffer) Size() uint64 { return rb.Buffer().Bytes() }

// String reads "nccl.RegisteredBuffer(ncclFloat32[1024]@cuda:0:0x7f..., handle 0x...)".
func (rb *RegisteredBuffer) String() string {
	if rb == nil {
		return "nccl.RegisteredBuffer(nil)"
	}
	return fmt.Sprintf("nccl.RegisteredBuffer(%v, handle %#x)", rb.buf, rb.handle)
}

// Close deregisters the buffer (ncclCommDeregister). No operation using it
// may still be queued. Close is idempotent: a second Close, or a Close
// after the communicator's Destroy or Abort (which closed it), returns nil.
// Not collective. NCCL 2.19.1.
func (rb *RegisteredBuffer) Close() error {
	const op = "RegisteredBuffer.Close"
	if rb == nil || rb.c == nil {
		return nil
	}
	c := rb.c
	for {
		c.mu.Lock()
		if rb.closed || c.ptr != rb.ptr {
			rb.closed = true
			c.mu.Unlock()
			return nil
		}
		st := capi.CommDeregister(c.ptr, rb.handle)
		if st.Code == capi.Pending {
			c.mu.Unlock()
			if err := c.wait(context.Background(), op); err != nil {
				return err
			}
			continue
		}
		rb.closed = true
		c.untrackLocked(rb)
		c.mu.Unlock()
		return statusErr(op, "ncclCommDeregister", st)
	}
}

// closeLocked is Close for Destroy and Abort (c.mu held).
func (rb *RegisteredBuffer) closeLocked() error {
	c := rb.c
	if rb.closed {
		return nil
	}
	rb.closed = true
	if c.ptr == 0 || c.ptr != rb.ptr {
		return nil
	}
	st := capi.CommDeregister(c.ptr, rb.handle)
	if st.Code == capi.Pending {
		return nil // busy: NCCL frees its registrations with the communicator
	}
	return statusErr("RegisteredBuffer.Close", "ncclCommDeregister", st)
}

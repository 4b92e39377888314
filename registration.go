package nccl

import (
	"context"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// RegisteredBuffer is device memory registered with a communicator
// (ncclCommRegister), which lets NCCL skip its own copies when the buffer
// is passed to collectives. It is tracked by its communicator: Destroy and
// Abort close it. Safe for concurrent use.
type RegisteredBuffer struct {
	localRes
	handle uintptr
	buf    Buffer
}

// RegisterBuffer registers b with the communicator (ncclCommRegister). b
// must be on the communicator's device. If one rank passes registered
// buffers to an operation, every rank must. The handle is 0 when NCCL's
// local registration is off (NCCL_LOCAL_REGISTER=0): NCCL then uses the
// buffer unregistered. Close it before freeing the memory. Not collective.
// NCCL 2.19.1.
func (c *Communicator) RegisterBuffer(b Buffer) (*RegisteredBuffer, error) {
	const op = "RegisterBuffer"
	var rb *RegisteredBuffer
	err := c.call(context.Background(), completed, op, "ncclCommRegister", takePrepared, nil, func(ptr uintptr) (capi.Status, error) {
		if err := c.checkBuf(op, "buf", b); err != nil {
			return capi.Status{}, err
		}
		h, st := capi.CommRegister(ptr, b.Ptr, b.Bytes())
		if st.Code == 0 {
			rb = &RegisteredBuffer{localRes: localRes{c: c, ptr: ptr}, handle: h, buf: b}
			c.trackLocked(rb)
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	return rb, nil
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

// String reads "nccl.RegisteredBuffer(float32[1024]@cuda:0:0x7f..., handle 0x...)".
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
	if rb == nil || rb.c == nil {
		return nil
	}
	return closeLocal(rb, "RegisteredBuffer.Close", "ncclCommDeregister")
}

// closeLocked is Close for Destroy and Abort (c.mu held).
func (rb *RegisteredBuffer) closeLocked() error {
	return closeLocalLocked(rb, "RegisteredBuffer.Close", "ncclCommDeregister")
}

func (rb *RegisteredBuffer) local() *localRes { return &rb.localRes }

func (rb *RegisteredBuffer) destroyLocked() capi.Status {
	return capi.CommDeregister(rb.ptr, rb.handle)
}

func (rb *RegisteredBuffer) forgetLocked() {}

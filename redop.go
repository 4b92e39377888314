package nccl

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// CustomOp is a reduction operator made for one communicator and one
// element type (ncclRedOpCreatePreMulSum). Use Op wherever a [RedOp] goes, on
// that communicator only, with buffers of that type: the collectives check
// both, and that the operator is still open.
//
// NCCL reuses the values of destroyed operators, so a RedOp kept after
// Close may name a newer operator of the same communicator; do not keep it.
//
// The communicator tracks its operators: Destroy and Abort close those
// still open. A CustomOp is safe for concurrent use.
type CustomOp struct {
	localRes
	op   RedOp
	dt   DataType
	keep any // the device scalar, kept reachable
}

// Values of ncclScalarResidence_t.
const (
	scalarDevice = 0 // ncclScalarDevice: NCCL reads the scalar from device memory when the reduction runs
	// ncclScalarHostImmediate (1) is what capi.RedOpCreatePreMulSumHost passes.
)

// PreMulSum makes an operator that multiplies each rank's input by scalar
// before summing across ranks (ncclRedOpCreatePreMulSum with
// ncclScalarHostImmediate): NCCL copies the value now. Each rank may pass
// its own scalar. The operator works on buffers of T only. Not collective
// (local to this rank). NCCL 2.11.4 (fp8 types: 2.24.3).
func PreMulSum[T cuda.Elem](c *Communicator, scalar T) (*CustomOp, error) {
	var bits uint64 // NCCL copies the type's size from the address: the low bytes
	*(*T)(unsafe.Pointer(&bits)) = scalar
	return c.newPreMulSum("PreMulSum", cuda.DTypeOf[T](), true, bits, 0, nil)
}

// PreMulSumDevice is [PreMulSum] with the scalar in device memory: a
// one-element slice on the communicator's device, which NCCL reads each
// time a reduction using the operator runs (ncclRedOpCreatePreMulSum with
// ncclScalarDevice). Keep the memory allocated, and its value written in
// the reductions' stream order, until the operator is closed. Not
// collective. NCCL 2.11.4 (fp8 types: 2.24.3).
func PreMulSumDevice[T cuda.Elem](c *Communicator, scalar cuda.Slice[T]) (*CustomOp, error) {
	const op = "PreMulSumDevice"
	if err := scalar.Err(); err != nil {
		return nil, &ArgError{Op: op, Arg: "scalar", Reason: err.Error(), Err: err}
	}
	if scalar.Len() != 1 {
		return nil, argErr(op, "scalar", "%d elements: need exactly one", scalar.Len())
	}
	_, _, dev, err := c.ident(op)
	if err != nil {
		return nil, err
	}
	if int(scalar.Device()) != dev {
		return nil, argErr(op, "scalar", "on %s, but the communicator is on cuda:%d", scalar.Device(), dev)
	}
	return c.newPreMulSum(op, cuda.DTypeOf[T](), false, 0, scalar.Ptr(), scalar)
}

func (c *Communicator) newPreMulSum(op string, dt DataType, host bool, bits uint64, dptr uintptr, keep any) (*CustomOp, error) {
	if c == nil {
		return nil, &StateError{Op: op}
	}
	r, err := loaded()
	if err != nil {
		return nil, err
	}
	if err := checkDataType(dt, r); err != nil {
		return nil, err
	}
	var o *CustomOp
	err = c.call(context.Background(), completed, op, "ncclRedOpCreatePreMulSum", takeLive, nil, func(ptr uintptr) (capi.Status, error) {
		var v int32
		var st capi.Status
		if host {
			v, st = capi.RedOpCreatePreMulSumHost(bits, int32(dt), ptr)
		} else {
			v, st = capi.RedOpCreatePreMulSum(dptr, int32(dt), scalarDevice, ptr)
		}
		if st.Code == 0 {
			o = &CustomOp{localRes: localRes{c: c, ptr: ptr}, op: RedOp(v), dt: dt, keep: keep}
			c.trackLocked(o)
			c.customOps = append(c.customOps, o)
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Op is the operator's ncclRedOp_t, to pass to this communicator's
// reductions. A nil *[CustomOp] gives RedOp(-1), which every reduction
// rejects.
func (o *CustomOp) Op() RedOp {
	if o == nil {
		return -1
	}
	return o.op
}

// Type is the element type the operator was made for (DataType(-1) for a
// nil *[CustomOp]).
func (o *CustomOp) Type() DataType {
	if o == nil {
		return -1
	}
	return o.dt
}

// String reads "nccl.CustomOp(PreMulSum float32, ncclRedOp(12345))".
func (o *CustomOp) String() string {
	if o == nil {
		return "nccl.CustomOp(nil)"
	}
	return fmt.Sprintf("nccl.CustomOp(PreMulSum %s, %s)", o.dt, o.op)
}

// Close destroys the operator (ncclRedOpDestroy). Operations already
// issued with it are not affected (NCCL copies the operator when a call is
// made). Close is idempotent: a second Close, or a Close after the
// communicator was destroyed or aborted (which closed the operator), returns
// nil. Using the operator after Close is an error wrapping
// [ErrInvalidArgument]. Not collective. NCCL 2.11.4.
func (o *CustomOp) Close() error {
	if o == nil || o.c == nil {
		return nil
	}
	return closeLocal(o, "CustomOp.Close", "ncclRedOpDestroy")
}

// closeLocked is Close for Destroy and Abort (c.mu held).
func (o *CustomOp) closeLocked() error {
	return closeLocalLocked(o, "CustomOp.Close", "ncclRedOpDestroy")
}

func (o *CustomOp) local() *localRes { return &o.localRes }

func (o *CustomOp) destroyLocked() capi.Status { return capi.RedOpDestroy(int32(o.op), o.ptr) }

func (o *CustomOp) forgetLocked() { o.c.removeCustomLocked(o) }

// removeCustomLocked forgets a closed operator.
func (c *Communicator) removeCustomLocked(o *CustomOp) {
	if i := slices.Index(c.customOps, o); i >= 0 {
		c.customOps = slices.Delete(c.customOps, i, i+1)
	}
}

// checkCustomLocked checks that o is a live custom operator of c for type t.
func (c *Communicator) checkCustomLocked(op string, o RedOp, t DataType) error {
	for _, x := range c.customOps {
		if x.op != o || x.ptr != c.ptr {
			continue
		}
		if x.dt != t {
			return argErr(op, "op", "custom operator made for %s, but the buffers hold %s", x.dt, t)
		}
		return nil
	}
	return argErr(op, "op", "%s is not an open custom operator of this communicator (closed, or made for another)", o)
}

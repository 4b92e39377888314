package perf

import (
	"fmt"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// alltoallRelease is the first NCCL release with ncclAlltoAll, from which
// nccl-tests times alltoall, in place too, through it (src/alltoall.cu);
// before it, through a group of sends and receives.
const alltoallRelease = 22800

// allToAllInPlace is ncclAlltoAll with send == recv, the call nccl-tests
// times for in-place alltoall from NCCL 2.28 on (and does not check: NCCL
// defines no in-place alltoall). The binding's AllToAll refuses overlapping
// buffers, so this one call goes to the shim directly; like the binding's
// calls it is one cgo crossing, and it takes part in an open group.
func allToAllInPlace(c *nccl.Communicator, buf uintptr, count uint64, dt nccl.DataType, s cuda.Stream) error {
	st := capi.AlltoAll(buf, buf, count, int32(dt), c.Ptr(), s.Handle())
	switch {
	case st.Code == 0:
		return nil
	case st.Code == capi.Missing:
		return fmt.Errorf("perf: in-place alltoall: ncclAlltoAll: %w", nccl.ErrUnsupported)
	case st.Code > 0:
		return &nccl.Error{Op: "AllToAll (in place)", Code: nccl.Result(st.Code), Detail: st.Detail}
	}
	return fmt.Errorf("perf: in-place alltoall: ncclAlltoAll: shim status %d %s", st.Code, st.Detail)
}

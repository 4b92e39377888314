package perf

import (
	"fmt"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// hasAlltoAll reports whether the loaded NCCL has ncclAlltoAll (2.28), with
// which nccl-tests times alltoall, in place too (src/alltoall.cu); without
// it, nccl-tests uses a group of sends and receives.
func hasAlltoAll() bool { return capi.Present(capi.SymAlltoAll) }

// allToAllInPlace is ncclAlltoAll with send == recv, the call nccl-tests
// times for in-place alltoall from NCCL 2.28 on (and does not check: NCCL
// defines no in-place alltoall). The binding's AllToAll refuses overlapping
// buffers, so this one call goes to the shim directly; like the binding's
// calls it is one cgo crossing, and it takes part in an open group.
func allToAllInPlace(c *nccl.Communicator, buf uintptr, count uint64, dt nccl.DataType, s cuda.Stream) error {
	st := capi.AlltoAll(buf, buf, count, int32(dt), c.Handle(), s.Handle())
	switch {
	case st.Code == 0:
		return nil
	case st.Code == capi.Missing:
		return fmt.Errorf("perf: in-place alltoall: ncclAlltoAll: %w", nccl.ErrUnsupported)
	case st.Code > 0:
		return fmt.Errorf("perf: in-place alltoall: %w", &nccl.Error{Op: "AllToAll", Code: nccl.Result(st.Code), Detail: st.Detail})
	}
	return fmt.Errorf("perf: in-place alltoall: ncclAlltoAll: shim status %d %s", st.Code, st.Detail)
}

// alltoallvPeerBytes is what rank i sends rank j in alltoallv's generated
// pattern (nccl-tests' distance-weighted formula): of total bytes, a blend
// by spread of an equal share and a share growing with the distance
// (j-i) mod n, each rounded down to 16 bytes.
func alltoallvPeerBytes(i, j, n int, total uint64, spread float64) uint64 {
	if n == 1 {
		return total &^ 15
	}
	distance := (j - i + n) % n
	sumDistances := float64(n * (n - 1) / 2)
	uniform := float64(total) / float64(n)
	dist := float64(distance) * float64(total) / sumDistances
	return uint64((1-spread)*uniform+spread*dist) &^ 15
}

// alltoallvCount is the elements every rank sends (and receives) in the
// generated pattern: the pattern is symmetric, so rank 0's total.
func alltoallvCount(param, elt uint64, n int, spread float64) uint64 {
	total := param * uint64(n) * elt
	var c uint64
	for j := range n {
		c += alltoallvPeerBytes(0, j, n, total, spread) / elt
	}
	return c
}

// alltoallv is one rank's alltoallv: a group of a send and a receive per
// peer, of the pattern's sizes, packed one after another in each buffer.
func (b *bench) alltoallv(r *rankState, sb, rb nccl.Buffer, send, recv uintptr) error {
	n, elt := b.nranks, b.elt
	total := b.cnt.param * uint64(n) * elt
	spread := b.opts.spread()
	c, s := r.comm, r.stream
	return nccl.Group(func() error {
		for p := 0; p < n; p++ {
			if sc := alltoallvPeerBytes(r.rank, p, n, total, spread) / elt; sc > 0 {
				if err := c.Send(b.sub(sb, send, sc), p, s); err != nil {
					return err
				}
				send += uintptr(sc * elt)
			}
			if rc := alltoallvPeerBytes(p, r.rank, n, total, spread) / elt; rc > 0 {
				if err := c.Recv(b.sub(rb, recv, rc), p, s); err != nil {
					return err
				}
				recv += uintptr(rc * elt)
			}
		}
		return nil
	})
}

// alltoallvLayout is what rank q receives: from each source in rank order
// the stretch of its input that the source sends q.
func (b *bench) alltoallvLayout(q int) layout {
	n, elt := b.nranks, b.elt
	total := b.cnt.param * uint64(n) * elt
	spread := b.opts.spread()
	var l layout
	var got uint64
	for src := 0; src < n; src++ {
		count := alltoallvPeerBytes(src, q, n, total, spread) / elt
		if count == 0 {
			continue
		}
		var off uint64
		for k := 0; k < q; k++ {
			off += alltoallvPeerBytes(src, k, n, total, spread) / elt
		}
		l = append(l, segment{n: count, src: srcInput, rank: src, off: off})
		got += count
	}
	if got < b.cnt.recv {
		l = append(l, segment{n: b.cnt.recv - got})
	}
	return l
}

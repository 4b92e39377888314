package nccl

import "github.com/nccl4go/nccl/cuda"

// Send sends buf to rank peer (ncclSend), which must post a matching Recv
// of the same count and type. A rank that both sends and receives (to
// itself, or in a ring) must issue the calls inside one [Group], or they
// deadlock; a send to this rank itself outside a group is refused with
// [ErrInvalidArgument] instead of hanging. Point-to-point: only this rank and peer take part. The hot path
// of [Communicator.AllReduce] applies: one cgo call, no allocation.
// NCCL 2.7.3.
func (c *Communicator) Send(buf Buffer, peer int, s cuda.Stream) error {
	return c.run(&collCall{kind: kSend, send: buf, root: peer, stream: s})
}

// Recv receives buf.Count elements of buf.Type from rank peer into buf
// (ncclRecv); peer posts the matching Send. See Send about groups.
// Point-to-point. NCCL 2.7.3.
func (c *Communicator) Recv(buf Buffer, peer int, s cuda.Stream) error {
	return c.run(&collCall{kind: kRecv, recv: buf, root: peer, stream: s})
}

package nccl

import (
	"context"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
)

// The identity of a communicator (rank, size, device): queried once, cached.

// identityLocked fills the cached rank and size (ncclCommCount,
// ncclCommUserRank, ncclCommCuDevice). It returns capi.Pending while NCCL is
// still creating the communicator.
func (c *Communicator) identityLocked(op string) (int32, error) {
	if c.identity {
		return 0, nil
	}
	n, st := capi.CommCount(c.ptr)
	if st.Code == capi.Pending {
		return capi.Pending, nil
	}
	if err := statusErr(op, "ncclCommCount", st); err != nil {
		return 0, err
	}
	rank, st := capi.CommUserRank(c.ptr)
	if err := statusErr(op, "ncclCommUserRank", st); err != nil {
		return 0, err
	}
	dev, st := capi.CommCuDevice(c.ptr)
	if err := statusErr(op, "ncclCommCuDevice", st); err != nil {
		return 0, err
	}
	c.nranks, c.rank, c.dev, c.identity = n, rank, dev, true
	return 0, nil
}

// ident returns the cached identity, querying NCCL the first time (waiting,
// through retry, for a communicator still being created).
func (c *Communicator) ident(op string) (nranks, rank, dev int, err error) {
	_, err = c.retry(context.Background(), op, func() (capi.Status, error) {
		var code int32
		nranks, rank, dev, code, err = c.tryIdent(op)
		return capi.Status{Code: code}, err
	})
	return nranks, rank, dev, err
}

// tryIdent is one attempt of ident, with mu held: code is capi.Pending
// while NCCL is still creating the communicator.
func (c *Communicator) tryIdent(op string) (nranks, rank, dev int, code int32, err error) {
	if _, err := c.lockLive(op); err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.mu.Unlock()
	if code, err := c.identityLocked(op); err != nil || code == capi.Pending {
		return 0, 0, 0, code, err
	}
	return c.nranks, c.rank, c.dev, 0, nil
}

// NRanks is the number of ranks (ncclCommCount, cached). NCCL 2.3.5.
func (c *Communicator) NRanks() (int, error) {
	n, _, _, err := c.ident("NRanks")
	return n, err
}

// Rank is this rank's index in [0, NRanks) (ncclCommUserRank, cached).
// NCCL 2.3.5.
func (c *Communicator) Rank() (int, error) {
	_, r, _, err := c.ident("Rank")
	return r, err
}

// Device is the communicator's CUDA device (ncclCommCuDevice, cached).
// NCCL 2.3.5.
func (c *Communicator) Device() (cuda.Device, error) {
	_, _, d, err := c.ident("Device")
	return cuda.Device(d), err
}

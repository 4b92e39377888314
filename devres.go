package nccl

import "github.com/nccl4go/nccl/internal/capi"

// LLA2ACalcSlots is ncclLLA2ACalcSlots: the number of slots the LSA
// low-latency all-to-all needs to move maxElts elements of at most
// maxEltSize bytes each (NCCL computes maxElts × ⌈maxEltSize/8⌉): the
// value for [DevCommRequirements.LSALLA2ASlotCount]. Negative arguments, or
// a result past NCCL's int, are an [*ArgError] (NCCL checks neither).
// Needs no communicator; not collective. NCCL 2.28.3.
func LLA2ACalcSlots(maxElts, maxEltSize int) (int, error) {
	const op = "LLA2ACalcSlots"
	if _, err := require(capi.SymLLA2ACalcSlots); err != nil {
		return 0, err
	}
	switch {
	case maxElts < 0:
		return 0, argErr(op, "maxElts", "%d: must not be negative", maxElts)
	case maxEltSize < 0:
		return 0, argErr(op, "maxEltSize", "%d: must not be negative", maxEltSize)
	case maxElts > 1<<31-1 || maxEltSize > 1<<31-8 || uint64(maxElts)*uint64((maxEltSize+7)/8) > 1<<31-1:
		return 0, argErr(op, "maxElts", "%d elements of %d bytes: %d slots or more overflow NCCL's int", maxElts, maxEltSize, 1<<31)
	}
	n, r := capi.LLA2ACalcSlots(int32(maxElts), int32(maxEltSize))
	if r != 0 {
		return 0, statusErr(op, "ncclLLA2ACalcSlots", capi.Status{Code: r})
	}
	return int(n), nil
}

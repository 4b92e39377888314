// nccl4go C shim: NCCL's host helpers for device-API resources
// (nccl_device/ll_a2a.h). ncclLLA2ACalcSlots (NCCL 2.28.3) returns an int,
// not an ncclResult_t.
#ifndef NCCL4GO_DEVRES_H
#define NCCL4GO_DEVRES_H

// capi_lla2a_calc_slots calls ncclLLA2ACalcSlots(maxElts, maxEltSize) and
// stores its value in *out; it returns 0, or CAPI_MISSING / CAPI_NOT_LOADED
// without calling.
int capi_lla2a_calc_slots(int maxElts, int maxEltSize, int *out);

#endif

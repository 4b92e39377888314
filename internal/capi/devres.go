//go:build linux && cgo

package capi

/*
#include "devres.h"
*/
import "C"

// LLA2ACalcSlots is ncclLLA2ACalcSlots; r is 0, Missing or NotLoaded.
func LLA2ACalcSlots(maxElts, maxEltSize int32) (int32, int32) {
	var out C.int
	r := C.capi_lla2a_calc_slots(C.int(maxElts), C.int(maxEltSize), &out)
	return int32(out), int32(r)
}

//go:build !linux || !cgo

package capi

func LLA2ACalcSlots(maxElts, maxEltSize int32) (int32, int32) { return 0, NotLoaded }

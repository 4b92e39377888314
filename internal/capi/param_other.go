//go:build !linux || !cgo

package capi

// ParamKind selects a typed getter of ParamGetInt.
type ParamKind int

// The typed getters: ncclParamGetI8 ... ncclParamGetU64.
const (
	ParamI8 ParamKind = iota
	ParamI16
	ParamI32
	ParamI64
	ParamU8
	ParamU16
	ParamU32
	ParamU64
)

func ParamBind(key string) (uintptr, int32)                 { return 0, NotLoaded }
func ParamGetInt(kind ParamKind, h uintptr) (uint64, int32) { return 0, NotLoaded }
func ParamGetRaw(h uintptr, buf []byte) (n int, r int32)    { return 0, NotLoaded }
func ParamGetStr(h uintptr) (s string, ok bool, r int32)    { return "", false, NotLoaded }
func ParamGetParameter(key string) (string, int32)          { return "", NotLoaded }
func ParamKeys() ([]string, int32)                          { return nil, NotLoaded }
func ParamDumpAll() int32                                   { return NotLoaded }

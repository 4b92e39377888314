//go:build !linux || !cgo

package capi

func ParamBind(key string) (uintptr, int32)                 { return 0, NotLoaded }
func ParamGetInt(kind ParamKind, h uintptr) (uint64, int32) { return 0, NotLoaded }
func ParamGetRaw(h uintptr, buf []byte) (n int, r int32)    { return 0, NotLoaded }
func ParamGetStr(h uintptr) (s string, ok bool, r int32)    { return "", false, NotLoaded }
func ParamGetParameter(key string) (string, int32)          { return "", NotLoaded }
func ParamKeys() ([]string, int32)                          { return nil, NotLoaded }
func ParamDumpAll() int32                                   { return NotLoaded }

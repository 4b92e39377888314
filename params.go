package nccl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
)

// NCCL's live parameters: the registry behind its environment variables,
// read through its parameter API (ncclParamBind, ncclParamGet*,
// ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll;
// exported from NCCL 2.30.3). Keys are whole environment variable names
// ("NCCL_DEBUG"). Only the parameters NCCL declares in its registry are
// there (nine in 2.30.7, the NCCL_DEBUG family among them); most of NCCL's
// older variables (NCCL_ALGO, ...) are not, and asking for one is an
// invalid-argument error. None of these calls is collective or needs a
// communicator; all are safe from several goroutines. On an older NCCL they
// return an [*UnsupportedError] naming the missing function.

// Param returns the current value of NCCL parameter key as text, as NCCL
// prints it (ncclParamGetParameter, NCCL 2.30.3). A key NCCL does not
// register is an error wrapping [ErrInvalidArgument].
func Param(key string) (string, error) {
	const op = "Param"
	if err := checkParamKey(op, key); err != nil {
		return "", err
	}
	if _, err := require(capi.SymParamGetParameter); err != nil {
		return "", err
	}
	v, r := capi.ParamGetParameter(key)
	if r != 0 {
		return "", paramErr(op, "ncclParamGetParameter", key, r, "")
	}
	return v, nil
}

// ParamKeys returns the keys of NCCL's parameter registry, sorted
// (ncclParamGetAllParameterKeys, NCCL 2.30.3). NCCL lists its published
// parameters only, unless NCCL_PARAM_DUMP_ALL=1 is set.
func ParamKeys() ([]string, error) {
	if _, err := require(capi.SymParamGetAllParameterKeys); err != nil {
		return nil, err
	}
	keys, r := capi.ParamKeys()
	if r != 0 {
		return nil, paramErr("ParamKeys", "ncclParamGetAllParameterKeys", "", r, "")
	}
	slices.Sort(keys)
	return keys, nil
}

// Params returns a snapshot of NCCL's parameters: every key [ParamKeys]
// lists, mapped to its value as [Param] reads it (NCCL 2.30.3). The map is
// the caller's; later changes of NCCL's values do not show in it.
func Params() (map[string]string, error) {
	keys, err := ParamKeys()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := Param(k)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// DumpParams makes NCCL print its parameters, with their values, defaults
// and accepted values, to the process's standard output
// (ncclParamDumpAll, NCCL 2.30.3). NCCL chooses the format; NCCL lists its
// published parameters only, unless NCCL_PARAM_DUMP_ALL=1 is set.
func DumpParams() error {
	if _, err := require(capi.SymParamDumpAll); err != nil {
		return err
	}
	if r := capi.ParamDumpAll(); r != 0 {
		return paramErr("DumpParams", "ncclParamDumpAll", "", r, "")
	}
	return nil
}

// ParamHandle is a bound NCCL parameter (ncclParamBind, NCCL 2.30.3), for
// typed reads of its current value. NCCL keeps the parameter for the life
// of the process, so a handle never goes stale. The typed getters require
// the type NCCL registered the parameter with; a bool or an enum (as
// NCCL_DEBUG) has no typed getter: read it with [ParamHandle.Bytes], or as
// text with [Param]. A ParamHandle is a value, safe from several
// goroutines. The zero ParamHandle is not bound: its methods return an
// error wrapping [ErrInvalidArgument].
type ParamHandle struct {
	key string
	h   uintptr
}

// BindParam binds NCCL parameter key (ncclParamBind, NCCL 2.30.3). A key
// NCCL does not register is an error wrapping [ErrInvalidArgument].
func BindParam(key string) (ParamHandle, error) {
	const op = "BindParam"
	if err := checkParamKey(op, key); err != nil {
		return ParamHandle{}, err
	}
	if _, err := require(capi.SymParamBind); err != nil {
		return ParamHandle{}, err
	}
	h, r := capi.ParamBind(key)
	if r != 0 {
		return ParamHandle{}, paramErr(op, "ncclParamBind", key, r, "")
	}
	if h == 0 {
		return ParamHandle{}, &Error{Op: op, Code: InternalError, Detail: fmt.Sprintf("ncclParamBind(%q) succeeded without a handle", key)}
	}
	return ParamHandle{key: key, h: h}, nil
}

// Key is the parameter's key, "" for the zero [ParamHandle].
func (p ParamHandle) Key() string { return p.key }

// Int8 reads an int8_t parameter (ncclParamGetI8).
func (p ParamHandle) Int8() (int8, error) {
	v, err := p.getInt("Int8", capi.ParamI8, capi.SymParamGetI8, "int8_t")
	return int8(v), err
}

// Int16 reads an int16_t parameter (ncclParamGetI16).
func (p ParamHandle) Int16() (int16, error) {
	v, err := p.getInt("Int16", capi.ParamI16, capi.SymParamGetI16, "int16_t")
	return int16(v), err
}

// Int32 reads an int32_t parameter (ncclParamGetI32).
func (p ParamHandle) Int32() (int32, error) {
	v, err := p.getInt("Int32", capi.ParamI32, capi.SymParamGetI32, "int32_t")
	return int32(v), err
}

// Int64 reads an int64_t parameter (ncclParamGetI64).
func (p ParamHandle) Int64() (int64, error) {
	v, err := p.getInt("Int64", capi.ParamI64, capi.SymParamGetI64, "int64_t")
	return int64(v), err
}

// Uint8 reads a uint8_t parameter (ncclParamGetU8).
func (p ParamHandle) Uint8() (uint8, error) {
	v, err := p.getInt("Uint8", capi.ParamU8, capi.SymParamGetU8, "uint8_t")
	return uint8(v), err
}

// Uint16 reads a uint16_t parameter (ncclParamGetU16).
func (p ParamHandle) Uint16() (uint16, error) {
	v, err := p.getInt("Uint16", capi.ParamU16, capi.SymParamGetU16, "uint16_t")
	return uint16(v), err
}

// Uint32 reads a uint32_t parameter (ncclParamGetU32).
func (p ParamHandle) Uint32() (uint32, error) {
	v, err := p.getInt("Uint32", capi.ParamU32, capi.SymParamGetU32, "uint32_t")
	return uint32(v), err
}

// Uint64 reads a uint64_t parameter (ncclParamGetU64).
func (p ParamHandle) Uint64() (uint64, error) {
	return p.getInt("Uint64", capi.ParamU64, capi.SymParamGetU64, "uint64_t")
}

// Text reads a string parameter (ncclParamGetStr). A string parameter
// without a value reads as "".
func (p ParamHandle) Text() (string, error) {
	const op = "ParamHandle.Text"
	if err := p.check(op, capi.SymParamGetStr); err != nil {
		return "", err
	}
	s, _, r := capi.ParamGetStr(p.h)
	if r != 0 {
		return "", paramErr(op, "ncclParamGetStr", p.key, r, "const char*")
	}
	return s, nil
}

// maxParamBytes bounds Bytes: NCCL's parameters are numbers, enums and
// short strings.
const maxParamBytes = 1 << 16

// Bytes reads the parameter's value as NCCL stores it, in the machine's
// byte order (ncclParamGet): the C type's bytes for a number, a bool (one
// byte) or an enum (four), a string with its terminating NUL.
func (p ParamHandle) Bytes() ([]byte, error) {
	const op = "ParamHandle.Bytes"
	if err := p.check(op, capi.SymParamGet); err != nil {
		return nil, err
	}
	// NCCL answers a too-small buffer with ncclInvalidArgument, like any
	// other failure: grow until it fits or the bound is reached.
	var r int32
	for size := 64; size <= maxParamBytes; size *= 16 {
		buf := make([]byte, size)
		var n int
		n, r = capi.ParamGetRaw(p.h, buf)
		if r == 0 {
			return buf[:n], nil
		}
		if Result(r) != InvalidArgument {
			break
		}
	}
	return nil, paramErr(op, "ncclParamGet", "", r, "")
}

func (p ParamHandle) check(op string, s capi.Sym) error {
	if p.h == 0 {
		return argErr(op, "handle", "the zero ParamHandle is not bound: get one from BindParam")
	}
	_, err := require(s)
	return err
}

func (p ParamHandle) getInt(name string, kind capi.ParamKind, s capi.Sym, ctype string) (uint64, error) {
	op := "ParamHandle." + name
	if err := p.check(op, s); err != nil {
		return 0, err
	}
	v, r := capi.ParamGetInt(kind, p.h)
	if r != 0 {
		return 0, paramErr(op, capi.SymName[s], p.key, r, ctype)
	}
	return v, nil
}

// checkParamKey refuses a key no C string can carry.
func checkParamKey(op, key string) error {
	switch {
	case key == "":
		return argErr(op, "key", "empty: give the environment variable's name, e.g. NCCL_DEBUG")
	case strings.IndexByte(key, 0) >= 0:
		return argErr(op, "key", "%q contains a NUL byte", key)
	}
	return nil
}

// paramErr turns a parameter call's result into an error. The parameter
// API logs its reasons at INFO level only, so the detail is the binding's:
// an unknown key, or (ctype set) a value of another type.
func paramErr(op, fn, key string, r int32, ctype string) error {
	switch r {
	case capi.Missing, capi.NotLoaded:
		return statusErr(op, fn, capi.Status{Code: r})
	}
	e := &Error{Op: op, Code: Result(r)}
	if Result(r) == InvalidArgument {
		switch {
		case ctype != "":
			e.Detail = fmt.Sprintf("%s: parameter %s is not of type %s (NCCL requires the type it registered; read it with Param or ParamHandle.Bytes)", fn, key, ctype)
		case key != "":
			e.Detail = fmt.Sprintf("%s: %s is not in NCCL's parameter registry (see ParamKeys)", fn, key)
		}
	}
	return e
}

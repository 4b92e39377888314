package trace

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A small Python pickle writer (protocol 2), for ExportTorch: PyTorch's
// flight-recorder files are pickles of dicts, lists, tuples, strings, ints,
// floats, booleans and None, and its analyzer reads them with pickle.load.

// pyValue is one of: string, int64, float64, bool, nil, pyList, pyTuple,
// pyDict.
type pyValue = any

// pyList is a Python list.
type pyList []pyValue

// pyTuple is a Python tuple.
type pyTuple []pyValue

// pyDict is a Python dict with string keys, in insertion order.
type pyDict []pyItem

type pyItem struct {
	k string
	v pyValue
}

// Pickle opcodes (Python's Lib/pickle.py).
const (
	opProto    = 0x80
	opStop     = '.'
	opMark     = '('
	opNone     = 'N'
	opTrue     = 0x88
	opFalse    = 0x89
	opBinInt   = 'J'
	opLong1    = 0x8a
	opBinFloat = 'G'
	opUnicode  = 'X'
	opEmptyL   = ']'
	opAppends  = 'e'
	opEmptyD   = '}'
	opSetItems = 'u'
	opTuple    = 't'
	opTuple2   = 0x86
)

// pickle encodes v with protocol 2.
func pickle(v pyValue) []byte {
	b := []byte{opProto, 2}
	b = pickleValue(b, v)
	return append(b, opStop)
}

func pickleValue(b []byte, v pyValue) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, opNone)
	case bool:
		if v {
			return append(b, opTrue)
		}
		return append(b, opFalse)
	case int64:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			b = append(b, opBinInt)
			return binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
		}
		// LONG1: little-endian two's complement, 8 bytes always suffice.
		b = append(b, opLong1, 8)
		return binary.LittleEndian.AppendUint64(b, uint64(v))
	case float64:
		b = append(b, opBinFloat)
		return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	case string:
		b = append(b, opUnicode)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		return append(b, v...)
	case pyList:
		b = append(b, opEmptyL)
		if len(v) == 0 {
			return b
		}
		b = append(b, opMark)
		for _, x := range v {
			b = pickleValue(b, x)
		}
		return append(b, opAppends)
	case pyTuple:
		if len(v) == 2 {
			return append(pickleValue(pickleValue(b, v[0]), v[1]), opTuple2)
		}
		b = append(b, opMark)
		for _, x := range v {
			b = pickleValue(b, x)
		}
		return append(b, opTuple)
	case pyDict:
		b = append(b, opEmptyD)
		if len(v) == 0 {
			return b
		}
		b = append(b, opMark)
		for _, it := range v {
			b = pickleValue(pickleValue(b, it.k), it.v)
		}
		return append(b, opSetItems)
	}
	panic(fmt.Sprintf("trace: pickle: unsupported value %T", v))
}

package rendezvous

// The wire protocol of PyTorch's c10d TCPStore (torch/csrc/distributed/c10d/
// TCPStore.cpp, TCPStoreBackend.hpp, TCPStoreLibUvBackend.cpp), as torch 2.11
// speaks it. Every request is one command byte followed by its arguments; all
// integers are little-endian; a string or byte vector is a uint64 length and the
// bytes. Requests and replies:
//
//	VALIDATE     0  u32 magic 0x3C85F7CE                  -> nothing (must be first)
//	SET          1  key, value                            -> nothing
//	COMPARE_SET  2  key, expected, desired                -> value now stored
//	GET          3  key                                   -> value (empty if missing)
//	ADD          4  key, i64 delta                        -> i64 new value
//	CHECK        5  u64 n, n keys                         -> u8 READY(0)/NOT_READY(1)
//	WAIT         6  u64 n, n keys                         -> u8 STOP_WAITING(0), when all exist
//	GETNUMKEYS   7                                        -> i64
//	DELETE_KEY   8  key                                   -> i64 number deleted (0 or 1)
//	APPEND       9  key, value                            -> nothing
//	MULTI_GET   10  u64 n, n keys                         -> n values
//	MULTI_SET   11  u64 n, n (key, value)                 -> nothing
//	CANCEL_WAIT 12                                        -> u8 WAIT_CANCELED(1)
//	PING        13  u32 nonce                             -> u32 nonce
//	QUEUE_PUSH  14  key, value                            -> nothing
//	QUEUE_POP   15  key                                   -> i64 length before pop, then value if > 0
//	QUEUE_LEN   16  key                                   -> i64
//	LIST        17                                        -> i64 n, n keys
//	WAIT_GET   128  key (nccl4go only, see below)          -> u8 STOP_WAITING, value; when it exists
//
// A WAIT's reply comes when its keys exist; meanwhile the connection goes on
// serving requests. CANCEL_WAIT drops the pending wait; a STOP_WAITING that
// raced it comes before the WAIT_CANCELED. torch's client prefixes every key
// with "/" (so do ours); GETNUMKEYS and LIST see the keys as stored.
//
// nccl4go adds, without changing what torch's clients and servers see:
//   - a shared-secret handshake: a VALIDATE whose magic is authMagic instead
//     of torch's, followed by a challenge and response (see Server's
//     documentation). A torch client never sends it.
//   - a hello PING whose nonce has helloBit set; a server of this package
//     answers it with extBit flipped (torch's echoes it), and then serves
//     WAIT_GET on that connection: Get in one round trip instead of torch's
//     WAIT then GET.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

type queryType uint8

const (
	qValidate queryType = iota
	qSet
	qCompareSet
	qGet
	qAdd
	qCheck
	qWait
	qGetNumKeys
	qDeleteKey
	qAppend
	qMultiGet
	qMultiSet
	qCancelWait
	qPing
	qQueuePush
	qQueuePop
	qQueueLen
	qList

	// qWaitGet is nccl4go's extension: GET that waits until the key exists,
	// answered STOP_WAITING then the value (or WAIT_CANCELED after a
	// CANCEL_WAIT). Sent only to servers that answered the hello PING.
	qWaitGet queryType = 0x80
)

var queryNames = [...]string{"VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS",
	"DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING", "QUEUE_PUSH", "QUEUE_POP",
	"QUEUE_LEN", "LIST"}

func (q queryType) String() string {
	if q == qWaitGet {
		return "WAIT_GET"
	}
	if int(q) < len(queryNames) {
		return queryNames[q]
	}
	return fmt.Sprintf("query(%d)", uint8(q))
}

const (
	// validationMagic is torch's validationMagicNumber.
	validationMagic uint32 = 0x3C85F7CE
	// authMagic starts nccl4go's shared-secret handshake in place of torch's
	// magic; torch's client never sends it.
	authMagic uint32 = 0x4E344701
	// authNonceLen is the length of each side's challenge; authMACLen of each
	// side's HMAC-SHA256 answer.
	authNonceLen = 16
	authMACLen   = 32

	checkReady    byte = 0
	checkNotReady byte = 1
	waitStop      byte = 0
	waitCanceled  byte = 1

	// refusedNonce is the PING reply of a secret-protected server to a client
	// that did not authenticate; a client's nonce never has the top bit set.
	refusedNonce uint32 = 0xFFFFFFFF
	// tooLargeNonce answers, on a connection that said hello, the PING
	// after a write the store had no room for (MaxStoreBytes), just before
	// the server closes the connection.
	tooLargeNonce uint32 = 0xFFFFFFFD

	// A client of this package starts with a hello PING: its nonce has
	// helloBit set (torch's client sends its pid, which never has it). A
	// torch server echoes it; a server of this package answers nonce^extBit,
	// and from then on accepts WAIT_GET on that connection.
	helloBit uint32 = 0x80000000
	extBit   uint32 = 0x40000000
	// oldTorchBit is set in the hello nonce too: torch before 2.1 reads our
	// VALIDATE as a SET whose key length's top byte is this nonce's third
	// byte, so the bit makes that length exceed what a std::vector can
	// hold, and such a server closes the connection at once (instead of
	// trying to allocate, or waiting for gigabytes).
	oldTorchBit uint32 = 0x00800000
	nonceMask   uint32 = 0x0FFFFFFF
)

// limits bounds what a decoder accepts.
type limits struct {
	maxKey, maxValue, maxKeys int
	maxRequest                int64 // total bytes of one request
}

func defaultLimits() limits {
	return limits{maxKey: DefaultMaxKeyBytes, maxValue: DefaultMaxValueBytes, maxKeys: DefaultMaxKeys,
		maxRequest: DefaultMaxRequestBytes}
}

// DefaultMaxRequestBytes bounds the size of one request on a server of this
// package (a MULTI_SET or a WAIT on many keys), so one connection cannot make
// the server hold more than this for a message it has not finished reading.
const DefaultMaxRequestBytes = 64 << 20

// request is one decoded client message.
type request struct {
	op       queryType
	key      string
	keys     []string
	value    []byte   // SET, APPEND, QUEUE_PUSH; COMPARE_SET's desired
	expected []byte   // COMPARE_SET
	values   [][]byte // MULTI_SET
	delta    int64    // ADD
	u32      uint32   // VALIDATE magic, PING nonce
	nonce    []byte   // auth VALIDATE: client challenge
}

// wireError is a decoding failure: the peer does not speak the protocol or
// broke a limit. The server closes the connection.
type wireError struct {
	msg string
	err error // ErrProtocol or ErrTooLarge
}

func (e *wireError) Error() string { return "rendezvous: " + e.msg }
func (e *wireError) Unwrap() error { return e.err }

func protoErr(format string, args ...any) error {
	return &wireError{msg: fmt.Sprintf(format, args...), err: ErrProtocol}
}

func tooLarge(format string, args ...any) error {
	return &wireError{msg: fmt.Sprintf(format, args...), err: ErrTooLarge}
}

// decoder reads requests from r, enforcing lim. The zero value is not usable.
type decoder struct {
	r     *bufio.Reader
	lim   limits
	used  int64 // bytes of the current request
	units int64 // pendingUnits granted by grow for the current request
	// grow, when set, is called once for each pendingUnit a request grows
	// past its first; an error ends the request.
	grow func() error
	tmp  [8]byte
}

func (d *decoder) reset() { d.used, d.units = 0, 0 }

func (d *decoder) take(n int64) error {
	d.used += n
	if d.used > d.lim.maxRequest {
		return tooLarge("request larger than %d bytes", d.lim.maxRequest)
	}
	if d.grow != nil {
		for d.units < d.used/pendingUnit {
			if err := d.grow(); err != nil {
				return err
			}
			d.units++
		}
	}
	return nil
}

func (d *decoder) u8() (byte, error) {
	if err := d.take(1); err != nil {
		return 0, err
	}
	return d.r.ReadByte()
}

// fixed reads the next n bytes (n <= len(d.tmp)) into d.tmp.
func (d *decoder) fixed(n int) ([]byte, error) {
	if err := d.take(int64(n)); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(d.r, d.tmp[:n]); err != nil {
		return nil, err
	}
	return d.tmp[:n], nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.fixed(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.fixed(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (d *decoder) bytesN(max int, what string) ([]byte, error) {
	n, err := d.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(max) {
		return nil, tooLarge("%s of %d bytes (limit %d)", what, n, max)
	}
	if err := d.take(int64(n)); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (d *decoder) key() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(d.lim.maxKey) {
		return "", tooLarge("key of %d bytes (limit %d)", n, d.lim.maxKey)
	}
	if err := d.take(int64(n)); err != nil {
		return "", err
	}
	if n == 0 {
		return "", nil
	}
	// Peek avoids a copy when the key is buffered whole.
	if int(n) <= d.r.Size() {
		b, err := d.r.Peek(int(n))
		if err != nil {
			return "", err
		}
		s := string(b)
		d.r.Discard(int(n))
		return s, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *decoder) count() (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.lim.maxKeys) {
		return 0, tooLarge("%d keys in one request (limit %d)", n, d.lim.maxKeys)
	}
	return int(n), nil
}

func (d *decoder) keyList() ([]string, error) {
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	// Grow as keys arrive: a count alone does not make us allocate.
	keys := make([]string, 0, min(n, 16))
	for range n {
		k, err := d.key()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// next reads one request. At a clean end of input before a request starts it
// returns io.EOF; a message cut short returns io.ErrUnexpectedEOF; a message that
// is not the protocol or breaks a limit returns a *wireError. started, when not
// nil, is called once the command byte has arrived.
func (d *decoder) next(req *request, started func()) error {
	*req = request{}
	d.reset()
	c, err := d.u8()
	if err != nil {
		return err
	}
	if started != nil {
		started()
	}
	err = d.body(req, queryType(c))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (d *decoder) body(req *request, op queryType) error {
	req.op = op
	var err error
	switch op {
	case qValidate:
		if req.u32, err = d.u32(); err != nil {
			return err
		}
		if req.u32 == authMagic {
			req.nonce, err = d.bytesN(authNonceLen, "auth challenge")
			if err == nil && len(req.nonce) != authNonceLen {
				err = protoErr("auth challenge of %d bytes, want %d", len(req.nonce), authNonceLen)
			}
		}
	case qSet, qAppend, qQueuePush:
		if req.key, err = d.key(); err != nil {
			return err
		}
		req.value, err = d.bytesN(d.lim.maxValue, "value")
	case qCompareSet:
		if req.key, err = d.key(); err != nil {
			return err
		}
		if req.expected, err = d.bytesN(d.lim.maxValue, "value"); err != nil {
			return err
		}
		req.value, err = d.bytesN(d.lim.maxValue, "value")
	case qGet, qDeleteKey, qQueuePop, qQueueLen, qWaitGet:
		req.key, err = d.key()
	case qAdd:
		if req.key, err = d.key(); err != nil {
			return err
		}
		var u uint64
		u, err = d.u64()
		req.delta = int64(u)
	case qCheck, qWait, qMultiGet:
		req.keys, err = d.keyList()
	case qMultiSet:
		var n int
		if n, err = d.count(); err != nil {
			return err
		}
		req.keys = make([]string, 0, min(n, 16))
		req.values = make([][]byte, 0, min(n, 16))
		for range n {
			k, err := d.key()
			if err != nil {
				return err
			}
			v, err := d.bytesN(d.lim.maxValue, "value")
			if err != nil {
				return err
			}
			req.keys = append(req.keys, k)
			req.values = append(req.values, v)
		}
	case qPing:
		req.u32, err = d.u32()
	case qGetNumKeys, qCancelWait, qList:
	default:
		return protoErr("unknown command byte %d", uint8(op))
	}
	return err
}

// Encoding: appendX add to a byte slice (one write per request or reply).

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func appendBytes(b, v []byte) []byte {
	b = appendU64(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, s string) []byte {
	b = appendU64(b, uint64(len(s)))
	return append(b, s...)
}

// appendRequest encodes req as a client sends it (the inverse of decoder.next).
func appendRequest(b []byte, req *request) []byte {
	b = append(b, byte(req.op))
	switch req.op {
	case qValidate:
		b = appendU32(b, req.u32)
		if req.u32 == authMagic {
			b = appendBytes(b, req.nonce)
		}
	case qSet, qAppend, qQueuePush:
		b = appendString(b, req.key)
		b = appendBytes(b, req.value)
	case qCompareSet:
		b = appendString(b, req.key)
		b = appendBytes(b, req.expected)
		b = appendBytes(b, req.value)
	case qGet, qDeleteKey, qQueuePop, qQueueLen, qWaitGet:
		b = appendString(b, req.key)
	case qAdd:
		b = appendString(b, req.key)
		b = appendU64(b, uint64(req.delta))
	case qCheck, qWait, qMultiGet:
		b = appendU64(b, uint64(len(req.keys)))
		for _, k := range req.keys {
			b = appendString(b, k)
		}
	case qMultiSet:
		b = appendU64(b, uint64(len(req.keys)))
		for i, k := range req.keys {
			b = appendString(b, k)
			b = appendBytes(b, req.values[i])
		}
	case qPing:
		b = appendU32(b, req.u32)
	}
	return b
}

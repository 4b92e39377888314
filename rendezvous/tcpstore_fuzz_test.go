package rendezvous

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// seedRequests are one of each request, as clients encode them.
func seedRequests() []*request {
	return []*request{
		{op: qValidate, u32: validationMagic},
		{op: qValidate, u32: authMagic, nonce: bytes.Repeat([]byte{1}, authNonceLen)},
		{op: qSet, key: "/k", value: []byte("value")},
		{op: qCompareSet, key: "/k", expected: []byte("a"), value: []byte("b")},
		{op: qGet, key: "/k"},
		{op: qAdd, key: "/n", delta: -3},
		{op: qCheck, keys: []string{"/a", "/b"}},
		{op: qWait, keys: []string{"/a"}},
		{op: qGetNumKeys},
		{op: qDeleteKey, key: "/k"},
		{op: qAppend, key: "/k", value: []byte("x")},
		{op: qMultiGet, keys: []string{"/a", "/b"}},
		{op: qMultiSet, keys: []string{"/a", "/b"}, values: [][]byte{[]byte("1"), nil}},
		{op: qCancelWait},
		{op: qPing, u32: 42},
		{op: qQueuePush, key: "/q", value: []byte("item")},
		{op: qQueuePop, key: "/q"},
		{op: qQueueLen, key: "/q"},
		{op: qList},
		{op: qWaitGet, key: "/k"},
	}
}

// FuzzDecodeRequest feeds arbitrary bytes to the server's request decoder. It
// must never panic or allocate past its limits; it must end with a clean EOF,
// a truncation or a typed wire error; and every request it accepts must
// encode back to exactly the bytes it consumed.
func FuzzDecodeRequest(f *testing.F) {
	var all []byte
	for _, r := range seedRequests() {
		b := appendRequest(nil, r)
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add([]byte{byte(qSet), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{byte(qMultiSet), 3, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{250})
	lim := limits{maxKey: 64, maxValue: 256, maxKeys: 16, maxRequest: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := bytes.NewReader(data)
		br := bufio.NewReaderSize(src, 64)
		d := &decoder{r: br, lim: lim}
		consumed := 0
		var req request
		for {
			err := d.next(&req, nil)
			left := src.Len() + br.Buffered()
			if err != nil {
				var we *wireError
				switch {
				case err == io.EOF:
					if left != 0 || consumed != len(data) {
						t.Fatalf("EOF with %d bytes left", left)
					}
				case err == io.ErrUnexpectedEOF:
				case errors.As(err, &we):
					if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrTooLarge) {
						t.Fatalf("wire error %v is neither ErrProtocol nor ErrTooLarge", err)
					}
				default:
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			end := len(data) - left
			msg := data[consumed:end]
			if int64(len(msg)) > lim.maxRequest {
				t.Fatalf("accepted a %d-byte request (limit %d)", len(msg), lim.maxRequest)
			}
			if len(req.key) > lim.maxKey || len(req.value) > lim.maxValue || len(req.keys) > lim.maxKeys {
				t.Fatalf("accepted a request past the limits: %+v", req)
			}
			if re := appendRequest(nil, &req); !bytes.Equal(re, msg) {
				t.Fatalf("%v: re-encoded %x, consumed %x", req.op, re, msg)
			}
			consumed = end
		}
	})
}

// Every request round-trips through the encoder and decoder.
func TestRequestRoundTrip(t *testing.T) {
	for _, r := range seedRequests() {
		b := appendRequest(nil, r)
		d := &decoder{r: bufio.NewReader(bytes.NewReader(b)), lim: defaultLimits()}
		var got request
		if err := d.next(&got, nil); err != nil {
			t.Fatalf("%v: %v", r.op, err)
		}
		if re := appendRequest(nil, &got); !bytes.Equal(re, b) {
			t.Fatalf("%v: round trip %x != %x", r.op, re, b)
		}
		if err := d.next(&got, nil); err != io.EOF {
			t.Fatalf("%v: trailing decode = %v, want EOF", r.op, err)
		}
	}
}

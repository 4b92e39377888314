package nccl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

func TestNewUniqueID(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		a, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		b, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		if a.IsZero() || b.IsZero() || a == b {
			t.Errorf("ids: zero %v %v, equal %v", a.IsZero(), b.IsZero(), a == b)
		}
		if n := faketest.Calls(t, "ncclGetUniqueId"); n != 2 {
			t.Errorf("%d ncclGetUniqueId calls, want 2", n)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_FAIL=ncclGetUniqueId=2"}}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.SystemError || ne.Op != "NewUniqueID" ||
			!strings.Contains(ne.Detail, "ncclGetUniqueId") {
			t.Fatalf("NewUniqueID with ncclGetUniqueId failing: %v", err)
		}
		if !errors.Is(err, nccl.ErrSystem) {
			t.Errorf("%v does not match ErrSystem", err)
		}
		_ = id
	})
	faketest.Run(t, faketest.Env{NoNCCL: true}, func(t *testing.T) {
		if _, err := nccl.NewUniqueID(); !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Errorf("NewUniqueID without NCCL: %v", err)
		}
	})
}

func TestUniqueIDEncodings(t *testing.T) {
	var id nccl.UniqueID
	if !id.IsZero() {
		t.Fatal("the zero id is not zero")
	}
	for i := range id {
		id[i] = byte(i * 7)
	}
	if id.IsZero() {
		t.Fatal("a filled id is zero")
	}
	if s := id.String(); !strings.HasPrefix(s, "UniqueID(00070e151c232a31") || !strings.HasSuffix(s, ")") {
		t.Errorf("String = %q", s)
	}

	bin, err := id.MarshalBinary()
	if err != nil || len(bin) != nccl.UniqueIDBytes || !bytes.Equal(bin, id[:]) {
		t.Fatalf("MarshalBinary = %x, %v", bin, err)
	}
	var back nccl.UniqueID
	if err := back.UnmarshalBinary(bin); err != nil || back != id {
		t.Fatalf("UnmarshalBinary: %v", err)
	}

	text, err := id.MarshalText()
	if err != nil || len(text) != 2*nccl.UniqueIDBytes {
		t.Fatalf("MarshalText = %q, %v", text, err)
	}
	back = nccl.UniqueID{}
	if err := back.UnmarshalText(text); err != nil || back != id {
		t.Fatalf("UnmarshalText: %v", err)
	}
	if p, err := nccl.ParseUniqueID(string(text)); err != nil || p != id {
		t.Fatalf("ParseUniqueID: %v", err)
	}
	if p, err := nccl.ParseUniqueID(strings.ToUpper(string(text))); err != nil || p != id {
		t.Errorf("ParseUniqueID of upper-case hex: %v", err)
	}

	// JSON uses the text form.
	js, err := json.Marshal(map[string]nccl.UniqueID{"id": id})
	if err != nil || !strings.Contains(string(js), string(text)) {
		t.Fatalf("JSON: %s, %v", js, err)
	}
	var m map[string]nccl.UniqueID
	if err := json.Unmarshal(js, &m); err != nil || m["id"] != id {
		t.Fatalf("JSON round trip: %v", err)
	}

	// Bad input is rejected and leaves the id alone.
	keep := id
	for _, b := range [][]byte{nil, make([]byte, 127), make([]byte, 129)} {
		if err := id.UnmarshalBinary(b); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("UnmarshalBinary of %d bytes: %v", len(b), err)
		}
	}
	bad := []string{"", string(text[:255]), string(text) + "0", "zz" + string(text[2:]), strings.Repeat("g", 256)}
	for _, s := range bad {
		if err := id.UnmarshalText([]byte(s)); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("UnmarshalText(%d chars): %v", len(s), err)
		}
		if _, err := nccl.ParseUniqueID(s); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("ParseUniqueID(%d chars): %v", len(s), err)
		}
	}
	if id != keep {
		t.Error("a failed Unmarshal changed the id")
	}
	var ae *nccl.ArgError
	if err := id.UnmarshalText([]byte("xy")); !errors.As(err, &ae) || !strings.Contains(ae.Reason, "256") {
		t.Errorf("the length error does not say what is wanted: %v", err)
	}
}

package nccl

import (
	"context"
	"errors"
	"testing"

	"github.com/nccl4go/nccl/internal/versions"
)

func TestJoinDistinct(t *testing.T) {
	a := &Error{Op: "GroupEnd", Code: RemoteError, Detail: "peer gone"}
	b := &Error{Op: "GroupEnd", Code: RemoteError, Detail: "peer gone"}
	c := &Error{Op: "GroupEnd", Code: InternalError}
	err := joinDistinct(errors.Join(a, b), c, nil, errors.Join(context.Canceled, b))
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("%d errors kept, want 3 (the repeats dropped): %v", n, err)
	}
	if !errors.Is(err, ErrRemote) || !errors.Is(err, ErrInternal) || !errors.Is(err, context.Canceled) {
		t.Errorf("lost a cause: %v", err)
	}
	if got := joinDistinct(a, b); got != a {
		t.Errorf("one distinct error should come back as itself, got %v", got)
	}
	if joinDistinct() != nil || joinDistinct(nil, nil) != nil {
		t.Error("no error should give nil")
	}
}

func TestGINTypeTextRoundTrip(t *testing.T) {
	for _, g := range []GINType{GINNone, GINProxy, GINGDAKI, GINGPI, GINEFAGDA, 1, 9} {
		b, _ := g.MarshalText()
		var back GINType
		if err := back.UnmarshalText(b); err != nil || back != g {
			t.Errorf("%v -> %q -> %v, %v", g, b, back, err)
		}
	}
	// The short names and "UNKNOWN(N)" that String wrote before it wrote
	// the C names still read back (JSON written by older versions).
	for text, want := range map[string]GINType{"NONE": GINNone, "PROXY": GINProxy, "GDAKI": GINGDAKI, "GPI": GINGPI, "UNKNOWN(9)": 9} {
		var back GINType
		if err := back.UnmarshalText([]byte(text)); err != nil || back != want {
			t.Errorf("%q -> %v, %v, want %v", text, back, err, want)
		}
	}
	var g GINType
	for _, bad := range []string{"", "proxy", "UNKNOWN(x)", "UNKNOWN(3) ", "ncclGinType(x)", "ncclGinType(3) ", "NCCL_GIN_TYPE_"} {
		if err := g.UnmarshalText([]byte(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// The 2.31 enum values print as NCCL names them and read back; "" is not
// a GIN type (no transport has an empty legacy name).
func TestGINEnums231(t *testing.T) {
	if GINEFAGDA != 5 || GINEFAGDA.String() != "NCCL_GIN_TYPE_EFA_GDA" {
		t.Errorf("GINEFAGDA = %d %s", GINEFAGDA, GINEFAGDA)
	}
	var g GINType
	if err := g.UnmarshalText([]byte("NCCL_GIN_TYPE_EFA_GDA")); err != nil || g != GINEFAGDA {
		t.Errorf("UnmarshalText(EFA_GDA) = %s, %v", g, err)
	}
	if err := g.UnmarshalText(nil); err == nil {
		t.Errorf("UnmarshalText(\"\") = %s, want an error", g)
	}
	if GINConnectionCustomStride != 3 || GINConnectionCustomStride.String() != "NCCL_GIN_CONNECTION_CUSTOM_STRIDE" {
		t.Errorf("GINConnectionCustomStride = %d %s", GINConnectionCustomStride, GINConnectionCustomStride)
	}
	set := GINTypeSet(1<<GINProxy | 1<<GINEFAGDA)
	if !set.Has(GINEFAGDA) || set.Has(GINGDAKI) || set.Has(-1) || set.Has(64) || set.String() != "[NCCL_GIN_TYPE_PROXY NCCL_GIN_TYPE_EFA_GDA]" {
		t.Errorf("set %s", set)
	}
	if b, err := GINTypeSet(0).MarshalJSON(); err != nil || string(b) != "[]" {
		t.Errorf("empty set JSON %s, %v", b, err)
	}
	for f, want := range map[versions.Feature]string{versions.GINTypeEFAGDA: "NCCL_GIN_TYPE_EFA_GDA", versions.GINConnectionCustomStride: "NCCL_GIN_CONNECTION_CUSTOM_STRIDE"} {
		if f.Name() != want || f.Since() != 23100 {
			t.Errorf("row %s %d", f.Name(), f.Since())
		}
	}
}

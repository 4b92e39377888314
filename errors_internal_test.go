package nccl

import (
	"context"
	"errors"
	"testing"
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

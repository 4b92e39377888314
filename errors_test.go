package nccl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// Every NCCL result code: its names, and the sentinel its *Error matches.
func TestResultsAndSentinels(t *testing.T) {
	codes := []struct {
		r        nccl.Result
		c, text  string
		sentinel error
	}{
		{nccl.Success, "ncclSuccess", "success", nil},
		{nccl.UnhandledCUDAError, "ncclUnhandledCudaError", "unhandled CUDA error", nccl.ErrUnhandledCUDA},
		{nccl.SystemError, "ncclSystemError", "system error", nccl.ErrSystem},
		{nccl.InternalError, "ncclInternalError", "internal error", nccl.ErrInternal},
		{nccl.InvalidArgument, "ncclInvalidArgument", "invalid argument", nccl.ErrInvalidArgument},
		{nccl.InvalidUsage, "ncclInvalidUsage", "invalid usage", nccl.ErrInvalidUsage},
		{nccl.RemoteError, "ncclRemoteError", "remote error", nccl.ErrRemote},
		{nccl.InProgress, "ncclInProgress", "operation in progress", nccl.ErrInProgress},
		{nccl.Timeout, "ncclTimeout", "timeout", nccl.ErrTimeout},
	}
	sentinels := []error{nccl.ErrUnhandledCUDA, nccl.ErrSystem, nccl.ErrInternal, nccl.ErrInvalidArgument,
		nccl.ErrInvalidUsage, nccl.ErrRemote, nccl.ErrInProgress, nccl.ErrTimeout, nccl.ErrNotInitialized,
		nccl.ErrClosed, nccl.ErrUnsupported, nccl.ErrLibraryNotFound}
	for i, c := range codes {
		if int(c.r) != i {
			t.Errorf("%s = %d, want %d", c.c, int(c.r), i)
		}
		if c.r.String() != c.c || c.r.Text() != c.text {
			t.Errorf("%d: String %q Text %q, want %q %q", i, c.r.String(), c.r.Text(), c.c, c.text)
		}
		err := error(&nccl.Error{Op: "AllReduce", Code: c.r})
		for _, s := range sentinels {
			if got := errors.Is(err, s); got != (s == c.sentinel) {
				t.Errorf("errors.Is(%s error, %v) = %v", c.c, s, got)
			}
		}
		// Wrapped, it still matches.
		if c.sentinel != nil && !errors.Is(fmt.Errorf("context: %w", err), c.sentinel) {
			t.Errorf("a wrapped %s error does not match its sentinel", c.c)
		}
	}
	for _, r := range []nccl.Result{-1, 9, 100} {
		if !strings.Contains(r.String(), fmt.Sprint(int32(r))) || !strings.Contains(r.Text(), fmt.Sprint(int32(r))) {
			t.Errorf("unknown code %d: %q %q", int32(r), r.String(), r.Text())
		}
		for _, s := range sentinels {
			if errors.Is(&nccl.Error{Op: "x", Code: r}, s) {
				t.Errorf("code %d matches %v", int32(r), s)
			}
		}
	}
	// The sentinels are distinct.
	for i, a := range sentinels {
		for j, b := range sentinels {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
	if !errors.Is(nccl.ErrUnsupported, errors.ErrUnsupported) {
		t.Error("ErrUnsupported does not wrap errors.ErrUnsupported")
	}
}

func TestErrorFormats(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&nccl.Error{Op: "AllReduce", Code: nccl.InvalidUsage, Detail: "fake: why"}, "nccl: AllReduce: invalid usage: fake: why"},
		{&nccl.Error{Op: "Init", Code: nccl.RemoteError}, "nccl: Init: remote error"},
		{&nccl.UnsupportedError{Feature: "ncclCommShrink", Since: 22703, Loaded: 22602},
			"nccl: ncclCommShrink: requires NCCL 2.27.3, loaded 2.26.2"},
		{&nccl.ArgError{Op: "AllReduce", Arg: "recv", Reason: "10 elements, need 12"}, "nccl: AllReduce: recv: 10 elements, need 12"},
		{&nccl.StateError{Op: "NRanks"}, "nccl: NRanks: communicator not initialized"},
		{&nccl.StateError{Op: "NRanks", State: "not initialized"}, "nccl: NRanks: communicator not initialized"},
		{&nccl.StateError{Op: "Rank", State: "destroyed"}, "nccl: Rank: communicator destroyed"},
		{&nccl.StateError{Op: "Rank", State: "aborted", Cause: errors.New("timeout")}, "nccl: Rank: communicator aborted (timeout)"},
	}
	for _, c := range cases {
		if c.err.Error() != c.want {
			t.Errorf("%#v: %q, want %q", c.err, c.err.Error(), c.want)
		}
	}

	u := &nccl.UnsupportedError{Feature: "ncclCommShrink", Since: 22703, Loaded: 22602}
	if !errors.Is(u, nccl.ErrUnsupported) || !errors.Is(u, errors.ErrUnsupported) || errors.Is(u, nccl.ErrInvalidArgument) {
		t.Error("UnsupportedError matches the wrong sentinels")
	}

	inner := cuda.ErrInvalidDevice
	a := &nccl.ArgError{Op: "Init", Arg: "Config.Device", Reason: "device 5", Err: inner}
	if !errors.Is(a, nccl.ErrInvalidArgument) || !errors.Is(a, cuda.ErrInvalidDevice) || errors.Unwrap(a) != inner {
		t.Error("ArgError does not match ErrInvalidArgument and its cause")
	}
	if errors.Is(&nccl.ArgError{Op: "x", Arg: "y", Reason: "z"}, nccl.ErrInvalidUsage) {
		t.Error("ArgError matches ErrInvalidUsage")
	}

	null := &nccl.StateError{Op: "NRanks"}
	if !errors.Is(null, nccl.ErrNotInitialized) || errors.Is(null, nccl.ErrClosed) {
		t.Error("a null communicator's StateError: wrong sentinels")
	}
	for _, state := range []string{"destroyed", "aborted"} {
		e := &nccl.StateError{Op: "Rank", State: state}
		if !errors.Is(e, nccl.ErrNotInitialized) || !errors.Is(e, nccl.ErrClosed) {
			t.Errorf("a %s communicator's StateError: wrong sentinels", state)
		}
	}
}

func TestRelease(t *testing.T) {
	r := nccl.Release(22803)
	if r.Major() != 2 || r.Minor() != 28 || r.Patch() != 3 || r.String() != "2.28.3" {
		t.Errorf("22803: %d.%d.%d %q", r.Major(), r.Minor(), r.Patch(), r.String())
	}
	if s := nccl.Release(23010).String(); s != "2.30.10" {
		t.Errorf("23010 = %q", s)
	}
	for s, want := range map[string]nccl.Release{"2.28.3": 22803, "2.30.7": 23007, "2.9.6": 20906, "3.0.0": 30000} {
		got, err := nccl.ParseRelease(s)
		if err != nil || got != want {
			t.Errorf("ParseRelease(%q) = %d, %v; want %d", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("%d.String() = %q, want %q", got, got.String(), s)
		}
	}
	for _, bad := range []string{"", "2.28", "two", "2.100.1", "2.28.100", "-1.2.3", "2.-1.3"} {
		if r, err := nccl.ParseRelease(bad); err == nil {
			t.Errorf("ParseRelease(%q) = %d, want an error", bad, r)
		}
	}
	// ncclGetVersion: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9.
	for code, want := range map[int]nccl.Release{2805: 20805, 2708: 20708, 2304: 20304, 20906: 20906, 22803: 22803, 23007: 23007} {
		if got := nccl.ReleaseFromCodeForTest(code); got != want {
			t.Errorf("release of code %d = %d, want %d", code, got, want)
		}
	}
	if nccl.MinRelease > nccl.ABIRelease || nccl.ABIRelease != 23203 {
		t.Errorf("MinRelease %s, ABIRelease %s", nccl.MinRelease, nccl.ABIRelease)
	}
}

func TestEnumNames(t *testing.T) {
	types := []struct {
		t     nccl.DataType
		name  string
		size  int
		since nccl.Release
	}{
		// Since is MinRelease for the types every supported release has.
		{nccl.Int8, "ncclInt8", 1, nccl.MinRelease}, {nccl.Uint8, "ncclUint8", 1, nccl.MinRelease},
		{nccl.Int32, "ncclInt32", 4, nccl.MinRelease}, {nccl.Uint32, "ncclUint32", 4, nccl.MinRelease},
		{nccl.Int64, "ncclInt64", 8, nccl.MinRelease}, {nccl.Uint64, "ncclUint64", 8, nccl.MinRelease},
		{nccl.Float16, "ncclFloat16", 2, nccl.MinRelease}, {nccl.Float32, "ncclFloat32", 4, nccl.MinRelease},
		{nccl.Float64, "ncclFloat64", 8, nccl.MinRelease}, {nccl.BFloat16, "ncclBfloat16", 2, nccl.MinRelease},
		{nccl.Float8E4M3, "ncclFloat8e4m3", 1, 22403}, {nccl.Float8E5M2, "ncclFloat8e5m2", 1, 22403},
	}
	for i, c := range types {
		if int(c.t) != i || nccl.DataTypeCName(c.t) != c.name || c.t.Size() != c.size || nccl.DataTypeSince(c.t) != c.since || !c.t.Valid() {
			t.Errorf("%d: %d %q size %d since %d", i, int(c.t), nccl.DataTypeCName(c.t), c.t.Size(), nccl.DataTypeSince(c.t))
		}
		if c.t != cuda.DType(i) {
			t.Errorf("%s is not cuda.DType(%d)", c.name, i)
		}
		if nccl.IsFloat8(c.t) != (i >= 10) {
			t.Errorf("%s: IsFloat8 = %v", c.name, nccl.IsFloat8(c.t))
		}
	}
	if nccl.DataType(12).Valid() || nccl.DataType(-1).Valid() || nccl.DataTypeCName(12) != "ncclDataType(12)" {
		t.Error("an unknown data type looks valid")
	}
	ops := []string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"}
	for i, name := range ops {
		o := nccl.RedOp(i)
		if o.String() != name || !o.Builtin() {
			t.Errorf("RedOp(%d) = %q builtin %v", i, o.String(), o.Builtin())
		}
	}
	if nccl.Sum != 0 || nccl.Max != 2 || nccl.Min != 3 || nccl.Avg != 4 {
		t.Error("reduction operator values differ from ncclRedOp_t")
	}
	if o := nccl.RedOp(5); o.Builtin() || o.String() != "ncclRedOp(5)" {
		t.Errorf("a custom operator: %q builtin %v", o.String(), o.Builtin())
	}
	for g, want := range map[nccl.GINConnectionType]string{nccl.GINConnectionNone: "NCCL_GIN_CONNECTION_NONE",
		nccl.GINConnectionFull: "NCCL_GIN_CONNECTION_FULL", nccl.GINConnectionRail: "NCCL_GIN_CONNECTION_RAIL",
		7: "ncclGinConnectionType(7)"} {
		if g.String() != want {
			t.Errorf("GINConnectionType(%d) = %q", int32(g), g.String())
		}
	}
}

func TestGINTypeNames(t *testing.T) {
	for g, want := range map[nccl.GINType]string{0: "NCCL_GIN_TYPE_NONE", 2: "NCCL_GIN_TYPE_PROXY",
		3: "NCCL_GIN_TYPE_GDAKI", 4: "NCCL_GIN_TYPE_GPI", 1: "ncclGinType(1)", 9: "ncclGinType(9)"} {
		if g.String() != want {
			t.Errorf("GINType(%d) = %q, want %q", int32(g), g.String(), want)
		}
		if b, err := g.MarshalText(); err != nil || string(b) != want {
			t.Errorf("GINType(%d).MarshalText = %q, %v", int32(g), b, err)
		}
	}
	if nccl.GINNone != 0 || nccl.GINProxy != 2 || nccl.GINGDAKI != 3 || nccl.GINGPI != 4 {
		t.Error("GIN type values differ from ncclGinType_t")
	}
	b, err := json.Marshal(struct{ G nccl.GINType }{nccl.GINGDAKI})
	if err != nil || string(b) != `{"G":"NCCL_GIN_TYPE_GDAKI"}` {
		t.Errorf("JSON: %s, %v", b, err)
	}
}

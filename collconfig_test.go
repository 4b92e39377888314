package nccl_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CPU tests of the per-collective config (collconfig.go) on the fakes of
// NCCL 2.31.0a16 (23100, 40-byte ncclCollConfig_t), 2.31.2 (23102, 64
// bytes) and 2.32.3 (23203, 72 bytes). The fake NCCL validates each config
// as STyGIANet/nccl's ncclParseCollConfig does and logs what it read of it
// ("collconfig ..." lines of FAKE_NCCL_LOG).

// collConfigFake runs fn against the fake NCCL of release.
func collConfigFake(t *testing.T, release int, fn func(t *testing.T), extra ...string) {
	t.Helper()
	faketest.Run(t, faketest.Env{Release: release, Extra: extra}, fn)
}

// collConfigLines are the fake's "collconfig" log lines, for function fn.
func collConfigLines(t *testing.T, fn string) []string {
	t.Helper()
	var out []string
	for _, l := range faketest.LogLines(t) {
		if strings.HasPrefix(l, "collconfig "+fn+" ") {
			out = append(out, l)
		}
	}
	return out
}

// lastCollConfig is the last line the fake logged for fn, or fails.
func lastCollConfig(t *testing.T, fn string) string {
	t.Helper()
	lines := collConfigLines(t, fn)
	if len(lines) == 0 {
		t.Fatalf("the fake logged no config for %s (log %q)", fn, faketest.LogLines(t))
	}
	return lines[len(lines)-1]
}

func wantFields(t *testing.T, line string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if !strings.Contains(" "+line+" ", " "+f+" ") {
			t.Errorf("the fake read %q, want %q in it", line, f)
		}
	}
}

// The eight ...With methods call their nccl*Config function with the
// config, on every 2.31 layout: the size and version of the loaded
// release's layout, each field in its slot.
func TestCollConfigEveryCollective(t *testing.T) {
	for _, release := range []int{23100, 23102, 23203} {
		collConfigFake(t, release, func(t *testing.T) {
			c := collComm(t, 2, 0, 0)
			one, two := collBuf(t, 0, f32s(4)...), collBuf(t, 0, f32s(8)...)
			cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(2), MaxCTAs: nccl.Ptr(8), NVLSCTAs: nccl.Ptr(4), CGAClusterSize: nccl.Ptr(2)}
			s := cuda.Stream{}
			calls := []struct {
				fn   string
				call func() error
			}{
				{"ncclAllReduceConfig", func() error { return c.AllReduceWith(cfg, one, one, nccl.Sum, s) }},
				{"ncclBroadcastConfig", func() error { return c.BroadcastWith(cfg, one, one, 0, s) }},
				{"ncclReduceConfig", func() error { return c.ReduceWith(cfg, one, one, nccl.Max, 0, s) }},
				{"ncclAllGatherConfig", func() error { return c.AllGatherWith(cfg, one, two, s) }},
				{"ncclReduceScatterConfig", func() error { return c.ReduceScatterWith(cfg, two, one, nccl.Sum, s) }},
				{"ncclAlltoAllConfig", func() error { return c.AllToAllWith(cfg, two, collBuf(t, 0, f32s(8)...), s) }},
				{"ncclGatherConfig", func() error { return c.GatherWith(cfg, one, two, 0, s) }},
				{"ncclScatterConfig", func() error { return c.ScatterWith(cfg, two, one, 0, s) }},
			}
			size := map[int]int{23100: 40, 23102: 64, 23203: 72}[release]
			for _, tc := range calls {
				if err := tc.call(); err != nil {
					t.Fatalf("%s: %v", tc.fn, err)
				}
				wantFields(t, lastCollConfig(t, tc.fn), fmt.Sprintf("size=%d", size), fmt.Sprintf("version=%d", release),
					"minCTAs=2", "maxCTAs=8", "nvlsCTAs=4", "cga=2", "ext=[]")
				if n := faketest.Calls(t, strings.TrimSuffix(tc.fn, "Config")); n != 0 {
					t.Errorf("%s: the plain function was called %d times", tc.fn, n)
				}
			}
		})
	}
}

// Every field of 2.31.2 and 2.32.3 reaches NCCL; unset ones are
// NCCL_COLLCONFIG_INITIALIZER's values.
func TestCollConfigFields(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		ev, err := cuda.Device(0).NewEventFlags(cuda.EventDisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Destroy()
		policy := nccl.CTAPolicyEfficiency | nccl.CTAPolicyZero
		cfg := &nccl.CollConfig{AlgSelection: "ring+LL128,^nvls", ForceAlgSelection: nccl.Ptr(false), CTAPolicy: &policy,
			UserProfilerTag: 0x1234, LaunchCompletionEvent: ev,
			Ext: []nccl.ConfigExt{{VendorID: 7, OptionID: 1, Int: 42}, {VendorID: 7, OptionID: -2, String: "vendor-text"},
				{VendorID: 8, OptionID: 3, Pointer: 0xdead0}}}
		if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		line := lastCollConfig(t, "ncclAllReduceConfig")
		wantFields(t, line, "size=72", "version=23203", "minCTAs=-2147483648", "alg=ring+LL128,^nvls", "force=0", "cta=3",
			"tag=4660")
		if !strings.Contains(line, " ext=[7:1:0x2a,7:-2:0x") || !strings.Contains(line, ":vendor-text,8:3:0xdead0]") {
			t.Errorf("ext list %q: want the string and the pointer entries in order", line)
		}
		if strings.Contains(line, "event=0 ") || strings.Contains(line, "event=-") {
			t.Errorf("no launch completion event sent: %q", line)
		}
		// Unset: the initializer's values, NULL strings and event.
		if err := c.AllReduceWith(&nccl.CollConfig{}, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "minCTAs=-2147483648", "maxCTAs=-2147483648",
			"nvlsCTAs=-2147483648", "cga=-2147483648", "alg=NULL", "force=1", "cta=-2147483648", "tag=0", "event=0", "ext=[]")
		// The config is NCCL's only during the call: changing it after
		// changes nothing sent before, and it can be sent again.
		cfg.AlgSelection = "tree"
		if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "alg=tree")
	})
}

// A field the loaded release's layout lacks is refused, naming the field,
// its first release and the loaded one; the fields of the first layout
// work on 2.31.0a16.
func TestCollConfigFieldGates(t *testing.T) {
	collConfigFake(t, 23100, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		for name, cfg := range map[string]*nccl.CollConfig{
			"ncclCollConfig_t.algSelection":      {AlgSelection: "ring"},
			"ncclCollConfig_t.forceAlgSelection": {ForceAlgSelection: nccl.Ptr(true)},
			"ncclCollConfig_t.CTAPolicy":         {CTAPolicy: ptrPolicy(nccl.CTAPolicyDefault)},
			"ncclCollConfig_t.userProfilerTag":   {UserProfilerTag: 1},
		} {
			wantUnsupported(t, name, c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}), name, 23102)
		}
		if err := c.AllReduceWith(&nccl.CollConfig{MinCTAs: nccl.Ptr(1), Ext: []nccl.ConfigExt{{VendorID: 1}}}, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("the 2.31.0 fields on 2.31.0a16: %v", err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "size=40", "version=23100", "alg=-", "ext=[1:0:0]")
	})
	collConfigFake(t, 23102, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		ev, err := cuda.Device(0).NewEventFlags(cuda.EventDisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Destroy()
		err = c.AllReduceWith(&nccl.CollConfig{LaunchCompletionEvent: ev}, b, b, nccl.Sum, cuda.Stream{})
		wantUnsupported(t, "launchCompletionEvent", err, "ncclCollConfig_t.launchCompletionEvent", 23203)
		if !strings.Contains(fmt.Sprint(err), "requires NCCL 2.32.3, loaded 2.31.2") {
			t.Errorf("error %q does not say what is required and loaded", err)
		}
		if err := c.AllReduceWith(&nccl.CollConfig{AlgSelection: "ring"}, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "size=64", "version=23102", "alg=ring", "event=-")
	})
}

// Before 2.31 a ...With call with a config is unsupported, naming the C
// function; a nil config is the plain collective on any release.
func TestCollConfigUnsupportedBefore231(t *testing.T) {
	collConfigFake(t, 23007, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := c.AllReduceWith(&nccl.CollConfig{}, b, b, nccl.Sum, cuda.Stream{})
		wantUnsupported(t, "AllReduceWith", err, "ncclAllReduceConfig", 23100)
		if !strings.Contains(fmt.Sprint(err), "ncclAllReduceConfig: requires NCCL 2.31.0, loaded 2.30.7") {
			t.Errorf("error %q", err)
		}
		err = c.ScatterWith(&nccl.CollConfig{}, b, b, 0, cuda.Stream{})
		wantUnsupported(t, "ScatterWith", err, "ncclScatterConfig", 23100)
		if err := c.AllReduceWith(nil, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("AllReduceWith(nil) on 2.30.7: %v", err)
		}
		if n := faketest.Calls(t, "ncclAllReduce"); n != 1 {
			t.Errorf("ncclAllReduce called %d times, want 1 (the nil config)", n)
		}
	})
}

// Bad configs fail with an ArgError naming the field, before NCCL is
// called; the communicator stays usable.
func TestCollConfigBadInput(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		timed, err := cuda.Device(0).NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		defer timed.Destroy()
		ipc, err := cuda.Device(0).NewEventFlags(cuda.EventDisableTiming | cuda.EventInterprocess)
		if err != nil {
			t.Fatal(err)
		}
		defer ipc.Destroy()
		other, err := cuda.Device(1).NewEventFlags(cuda.EventDisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		gone, err := cuda.Device(0).NewEventFlags(cuda.EventDisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		gone.Destroy()
		many := make([]nccl.ConfigExt, 65)
		for _, tc := range []struct {
			cfg   *nccl.CollConfig
			arg   string
			words []string
		}{
			{&nccl.CollConfig{MinCTAs: nccl.Ptr(0)}, "CollConfig.MinCTAs", []string{"at least 1"}},
			{&nccl.CollConfig{MaxCTAs: nccl.Ptr(-1)}, "CollConfig.MaxCTAs", []string{"at least 1"}},
			{&nccl.CollConfig{MinCTAs: nccl.Ptr(9), MaxCTAs: nccl.Ptr(8)}, "CollConfig.MinCTAs", []string{"exceeds MaxCTAs 8"}},
			{&nccl.CollConfig{NVLSCTAs: nccl.Ptr(0)}, "CollConfig.NVLSCTAs", []string{"at least 1"}},
			{&nccl.CollConfig{CGAClusterSize: nccl.Ptr(9)}, "CollConfig.CGAClusterSize", []string{"[0, 8]"}},
			{&nccl.CollConfig{AlgSelection: "ring\x00tree"}, "CollConfig.AlgSelection", []string{"NUL"}},
			{&nccl.CollConfig{AlgSelection: strings.Repeat("r", 16385)}, "CollConfig.AlgSelection", []string{"16384 bytes"}},
			{&nccl.CollConfig{CTAPolicy: ptrPolicy(4)}, "CollConfig.CTAPolicy", []string{"not a combination"}},
			{&nccl.CollConfig{UserProfilerTag: 1 << 63}, "CollConfig.UserProfilerTag", []string{"reserved"}},
			{&nccl.CollConfig{LaunchCompletionEvent: timed}, "CollConfig.LaunchCompletionEvent", []string{"EventDisableTiming"}},
			{&nccl.CollConfig{LaunchCompletionEvent: ipc}, "CollConfig.LaunchCompletionEvent", []string{"EventInterprocess"}},
			{&nccl.CollConfig{LaunchCompletionEvent: other}, "CollConfig.LaunchCompletionEvent", []string{"cuda:1", "cuda:0"}},
			{&nccl.CollConfig{LaunchCompletionEvent: gone}, "CollConfig.LaunchCompletionEvent", []string{"destroyed"}},
			{&nccl.CollConfig{Ext: many}, "CollConfig.Ext", []string{"65 entries", "at most 64"}},
			{&nccl.CollConfig{Ext: []nccl.ConfigExt{{Int: 1, String: "x"}}}, "CollConfig.Ext", []string{"entry 0", "one C union"}},
			{&nccl.CollConfig{Ext: []nccl.ConfigExt{{}, {String: "a\x00"}}}, "CollConfig.Ext", []string{"NUL"}},
		} {
			wantArgErr(t, c.AllReduceWith(tc.cfg, b, b, nccl.Sum, cuda.Stream{}), "AllReduceWith", tc.arg, tc.words...)
		}
		if errors.Is(c.AllReduceWith(&nccl.CollConfig{LaunchCompletionEvent: gone}, b, b, nccl.Sum, cuda.Stream{}), cuda.ErrClosed) == false {
			t.Error("a destroyed event's error does not wrap cuda.ErrClosed")
		}
		noNCCLCall(t, "ncclAllReduceConfig")
		// The buffers are checked as for the plain call, first.
		wantArgErr(t, c.AllReduceWith(&nccl.CollConfig{}, b, collBuf(t, 0, f32s(5)...), nccl.Sum, cuda.Stream{}),
			"AllReduceWith", "recv", "5 elements")
		if err := c.AllReduceWith(&nccl.CollConfig{}, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Errorf("after the refusals: %v", err)
		}
	})
}

// The fake's own validation (STyGIANet/nccl's ncclParseCollConfig) sees
// only what the binding sends: a failure NCCL reports comes back as an
// *nccl.Error naming the Config function, with NCCL's detail.
func TestCollConfigLibraryError(t *testing.T) {
	collConfigFake(t, 23102, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		err := c.AllReduceWith(&nccl.CollConfig{}, b, b, nccl.Sum, cuda.Stream{})
		var ne *nccl.Error
		if !errors.As(err, &ne) || !errors.Is(err, nccl.ErrInvalidUsage) || ne.Op != "AllReduceWith" ||
			!strings.Contains(err.Error(), "injected") {
			t.Errorf("injected failure: %v (%T)", err, err)
		}
	}, "FAKE_NCCL_FAIL=ncclAllReduceConfig=5")
}

// A configured call inside a group is queued like the plain one: the
// group ends it, and the group's communicator list holds the communicator.
func TestCollConfigInGroup(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		kept := -1
		err := nccl.Group(func() error {
			if err := c.AllReduceWith(&nccl.CollConfig{AlgSelection: "ring"}, b, b, nccl.Sum, cuda.Stream{}); err != nil {
				return err
			}
			kept = capi.GroupKept() // the group's thread: Group locks it
			// Other calls reuse the stack the configured call used.
			for range 4 {
				if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "alg=ring")
		// The fake reads the config's algSelection again at the group's
		// end, as NCCL may: the string must still be there.
		var end []string
		for _, l := range faketest.LogLines(t) {
			if strings.HasPrefix(l, "collconfig-groupend ") {
				end = append(end, l)
			}
		}
		if kept != 1 || len(end) != 1 || end[0] != "collconfig-groupend ncclAllReduceConfig alg=ring" {
			t.Errorf("kept %d blocks in the group; at its end the fake read %q; want 1 and the string intact", kept, end)
		}
	})
}

// The plain collective's host path is unchanged: no allocation and one cgo
// call per AllReduce on a release with the Config functions; a configured
// call also makes one cgo call and, with a small config, allocates nothing.
func TestCollConfigHostPathCost(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(1)...)
		plain := func() {
			if err := c.AllReduce(b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(1), AlgSelection: "ring", CTAPolicy: ptrPolicy(nccl.CTAPolicyZero),
			Ext: []nccl.ConfigExt{{VendorID: 1, OptionID: 2, String: "x"}, {VendorID: 1, OptionID: 3, Int: 4}}}
		configured := func() {
			if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		for name, call := range map[string]func(){"AllReduce": plain, "AllReduceWith": configured} {
			call()
			if n := testing.AllocsPerRun(1000, call); n != 0 {
				t.Errorf("%s: %v allocations per call, want 0", name, n)
			}
			before := runtime.NumCgoCall()
			for range 100 {
				call()
			}
			if d := runtime.NumCgoCall() - before; d != 100 {
				t.Errorf("%d cgo calls for 100 %s calls, want 100", d, name)
			}
		}
	})
}

// Past the stack buffers (more than 4 Ext entries, more than 256 bytes of
// strings) a configured call still sends everything, in order.
func TestCollConfigLargeExt(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		long := strings.Repeat("a", 300)
		var ext []nccl.ConfigExt
		var want []string
		for i := range 64 {
			switch i % 3 {
			case 0:
				ext = append(ext, nccl.ConfigExt{VendorID: int32(i), OptionID: 1, Int: int32(i + 100)})
				want = append(want, fmt.Sprintf("%d:1:%#x", i, i+100))
			case 1:
				s := fmt.Sprintf("s%d-%s", i, long[:i])
				ext = append(ext, nccl.ConfigExt{VendorID: int32(i), OptionID: -1, String: s})
				want = append(want, fmt.Sprintf(":%s", s))
			default:
				ext = append(ext, nccl.ConfigExt{VendorID: int32(i), OptionID: 2, Pointer: uintptr(0x1000 * i)})
				want = append(want, fmt.Sprintf("%d:2:%#x", i, 0x1000*i))
			}
		}
		cfg := &nccl.CollConfig{AlgSelection: long, Ext: ext}
		if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		line := lastCollConfig(t, "ncclAllReduceConfig")
		wantFields(t, line, "alg="+long)
		at := 0
		for _, w := range want {
			i := strings.Index(line[at:], w)
			if i < 0 {
				t.Fatalf("ext list %q: %q missing or out of order", line, w)
			}
			at += i + len(w)
		}
	})
}

// The ...With methods hand NCCL the reduction and the root of their
// collective in the right argument (the shim's one call site serves all
// eight): a PreMulSum by 2 scales on one rank (the fake's one-rank path),
// and a non-root rank of a Gather (Scatter) needs no receive (send)
// buffer: the fake checks it only at the root it was given. (Broadcast's
// root is not observable here: off the root the binding passes recv as
// send, which the fake accepts either way.)
func TestCollConfigOpAndRootReachNCCL(t *testing.T) {
	collConfigFake(t, 23100, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		op, err := nccl.PreMulSum(c, float32(2))
		if err != nil {
			t.Fatal(err)
		}
		cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(2)}
		for name, call := range map[string]func(send, recv nccl.Buffer) error{
			"AllReduceWith": func(send, recv nccl.Buffer) error { return c.AllReduceWith(cfg, send, recv, op.Op(), cuda.Stream{}) },
			"ReduceWith":    func(send, recv nccl.Buffer) error { return c.ReduceWith(cfg, send, recv, op.Op(), 0, cuda.Stream{}) },
			"ReduceScatterWith": func(send, recv nccl.Buffer) error {
				return c.ReduceScatterWith(cfg, send, recv, op.Op(), cuda.Stream{})
			},
		} {
			recv := collSlice(t, 0, make([]float32, 2)...)
			if err := call(collBuf(t, 0, float32(1.5), -3), nccl.BufferOf(recv)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := make([]float32, 2)
			if err := recv.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			if got[0] != 3 || got[1] != -6 {
				t.Errorf("%s with PreMulSum(2) of [1.5 -3] on one rank: %v, want [3 -6]", name, got)
			}
		}
	})
	collConfigFake(t, 23100, func(t *testing.T) {
		c := collComm(t, 2, 0, 0)
		cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(2)}
		one := collBuf(t, 0, f32s(4)...)
		for name, call := range map[string]func() error{
			"GatherWith":  func() error { return c.GatherWith(cfg, one, nccl.Buffer{}, 1, cuda.Stream{}) },
			"ScatterWith": func() error { return c.ScatterWith(cfg, nccl.Buffer{}, one, 1, cuda.Stream{}) },
		} {
			if err := call(); err != nil {
				t.Errorf("%s on rank 0 with root 1, no buffer where only the root needs one: %v", name, err)
			}
		}
	})
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/versions"
)

// infoReleases are the releases TestFakeInfoUses checks: the oldest
// supported, every first release of the version table's rows and layouts,
// the requirements compat version, a future 2.31 release (newer than the
// newest requirements layout, with the 2.31 properties), 2.32.3 and a
// future 2.33.0.
func infoReleases() []int {
	rs := []int{int(nccl.MinRelease), versions.DevCommCompat, 23105, 23203, 23300}
	for _, row := range versions.Table {
		rs = append(rs, row.Since)
	}
	for _, l := range versions.DevCommLayouts {
		rs = append(rs, l.From)
	}
	for _, l := range versions.PropsLayouts {
		rs = append(rs, l.From)
	}
	for _, l := range versions.CollConfigLayouts {
		rs = append(rs, l.From)
	}
	// 2.30.0 is the start of a compat range of NCCL's (DevCommLayouts),
	// not a release: the 2.30 series starts at 2.30.3, and the fake models
	// a library reporting 2.30.0 with an 88-byte requirements struct where
	// the layout table starts the 96-byte one.
	rs = slices.DeleteFunc(rs, func(r int) bool { return r == 23000 })
	slices.Sort(rs)
	return slices.Compact(rs)
}

// What the root package does with one struct field set alone, on the fake
// NCCL of one release.
const (
	bindingSends   = "used"     // accepted, and the version it declared has the field
	bindingLacks   = "lacks"    // refused: *UnsupportedError, "requires NCCL x, loaded y"
	bindingRefuses = "not used" // refused (ErrUnsupported) although the release has the field
)

// infoFieldValues is, per C struct, a valid value for each Go field a row
// of the version table gates: a pointer to a value NCCL accepts, so that
// whether the field is sent is all that decides. A row without a value
// fails the test.
var infoFieldValues = map[string]map[string]any{
	"ncclConfig_t": {
		"TrafficClass": nccl.Ptr(0), "CommName": "info-uses", "CollNetEnable": nccl.Ptr(false),
		"CTAPolicy": nccl.Ptr(nccl.CTAPolicyDefault), "ShrinkShare": nccl.Ptr(false), "NVLSCTAs": nccl.Ptr(1),
		"NChannelsPerNetPeer": nccl.Ptr(1), "NVLinkCentricSched": nccl.Ptr(false),
		"GraphUsageMode": nccl.Ptr(nccl.GraphUsageNone), "NumRMACtx": nccl.Ptr(1), "MaxP2PPeers": nccl.Ptr(1),
		"GraphStreamOrdering": nccl.Ptr(true), "LaunchOrderImplicit": nccl.Ptr(false), "NumRMASig": nccl.Ptr(1),
		"RMAEagerInit": nccl.Ptr(false), "HostCFTMode": nccl.Ptr(nccl.HostCFTDisable),
		"NVLSHostMode": nccl.Ptr(nccl.NVLSHostEnable),
	},
	"ncclDevCommRequirements_t": {
		"BarrierCount": nccl.Ptr(0), "RailGINBarrierCount": nccl.Ptr(0), "LSALLA2ABlockCount": nccl.Ptr(0),
		"LSALLA2ASlotCount": nccl.Ptr(0), "GINForceEnable": nccl.Ptr(false), "GINContextCount": nccl.Ptr(4),
		"GINSignalCount": nccl.Ptr(0), "GINCounterCount": nccl.Ptr(0),
		"GINConnectionType": nccl.Ptr(nccl.GINConnectionNone), "GINExclusiveContexts": nccl.Ptr(false),
		"GINQueueDepth": nccl.Ptr(0), "GINTrafficClass": nccl.Ptr(0), "WorldGINBarrierCount": nccl.Ptr(0),
		"GINStrongSignalsRequired": nccl.Ptr(true), "GINVASignalsRequired": nccl.Ptr(true),
		"GINCustomStride": nccl.Ptr(1), "GINType": nccl.Ptr(nccl.GINNone), "UseRuntimeVersion": nccl.Ptr(true),
		"CFTCaps": nccl.Ptr(nccl.CFTNone), "CFTBarrierCount": nccl.Ptr(0),
	},
	"ncclCollConfig_t": {
		"AlgSelection": "ring", "ForceAlgSelection": nccl.Ptr(false), "CTAPolicy": nccl.Ptr(nccl.CTAPolicyDefault),
		"UserProfilerTag": uint64(7),
		// LaunchCompletionEvent: made in the child (an event of the fake
		// driver).
	},
}

// infoJSON is the part of `nccl4go info -json` this test reads, declared
// here so that it reads any version of the report.
type infoJSON struct {
	NCCL struct {
		VersionCode int `json:"version_code"`
		Features    []struct {
			Group string `json:"group"`
			Of    int    `json:"of"`
			Lacks []struct {
				Name string `json:"name"`
			} `json:"lacks"`
			NotUsed []struct {
				Name   string `json:"name"`
				Reason string `json:"reason"`
			} `json:"not_used"`
		} `json:"features"`
	} `json:"nccl"`
}

// `nccl4go info` says of every struct field of the version table (and of
// NCCL_GIN_CONNECTION_CUSTOM_STRIDE, sent only with its stride's field)
// exactly what the root package does with it on the loaded release: "N of M" in
// the text counts the fields it sends (or, for ncclCommProperties_t,
// reads), and the JSON lists each field the release lacks, and each it
// has but the binding does not use with it, with the reason the binding's
// own error gives. Each field is set alone on the fake NCCL of each release
// (infoReleases), and what the binding did is read back: the version the
// fake was sent (its log, DevComm.Declared), or the field decoded
// (Properties), or the error.
func TestFakeInfoUses(t *testing.T) {
	for _, r := range infoReleases() {
		t.Run(nccl.Release(r).String(), func(t *testing.T) {
			// A GIN type, for the CUSTOM_STRIDE connection.
			env := faketest.Env{Release: r, Devices: 1, Extra: []string{"FAKE_NCCL_GIN_TYPE=2"}}
			faketest.Run(t, env, func(t *testing.T) { checkInfoUses(t, r) })
		})
	}
}

func checkInfoUses(t *testing.T, r int) {
	out, _, err := runCLI(t, "info", "-json")
	if err != nil {
		t.Fatal(err)
	}
	var rep infoJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.NCCL.VersionCode != r {
		t.Fatalf("info reports NCCL %d, want %d", rep.NCCL.VersionCode, r)
	}
	says, reasons := map[string]string{}, map[string]string{}
	for _, g := range rep.NCCL.Features {
		for _, l := range g.Lacks {
			says[l.Name] = bindingLacks
		}
		for _, u := range g.NotUsed {
			says[u.Name], reasons[u.Name] = bindingRefuses, u.Reason
		}
	}
	text, _, err := runCLI(t, "info")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (\S+) fields +(\d+ of \d+)`).FindAllStringSubmatch(text, -1) {
		counts[m[1]] = m[2]
	}

	c := infoComm(t)
	check := func(f versions.Feature) string {
		did, errText := bindingUse(t, c, r, f)
		want := says[f.Name()]
		if want == "" {
			want = bindingSends
		}
		if did != want {
			t.Errorf("NCCL %s: info says %s: %s; the binding: %s (%s)", nccl.Release(r), f.Name(), want, did, errText)
		}
		if did == bindingRefuses && want == did && !strings.Contains(errText, reasons[f.Name()]) {
			t.Errorf("NCCL %s: %s: info's reason %q is not the binding's: %s", nccl.Release(r), f.Name(), reasons[f.Name()], errText)
		}
		return did
	}
	// The one flag whose use is not the release's alone.
	check(versions.GINConnectionCustomStride)
	for _, name := range []string{"ncclConfig_t", "ncclDevCommRequirements_t", "ncclCommProperties_t", "ncclCollConfig_t"} {
		fields := versions.Fields(name)
		used := 0
		for _, f := range fields {
			if check(f) == bindingSends {
				used++
			}
		}
		if want := fmt.Sprintf("%d of %d", used, len(fields)); counts[name] != want {
			t.Errorf("NCCL %s: info prints %q for %s fields; the binding uses %s", nccl.Release(r), counts[name], name, want)
		}
	}
}

// infoComm is a communicator of one rank on device 0, for every release.
func infoComm(t *testing.T) *nccl.Communicator {
	t.Helper()
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := nccl.Init(1, 0, id, &nccl.Config{Device: nccl.Ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// bindingUse sets field f alone and says what the root package did with it
// on release r, and the error's text.
func bindingUse(t *testing.T, c *nccl.Communicator, r int, f versions.Feature) (string, string) {
	t.Helper()
	name := versions.Table[f].Struct()
	set := func(p any) {
		v, ok := infoFieldValues[name][f.Field()]
		if !ok {
			t.Fatalf("no test value for %s (%s)", f.Field(), f.Name())
		}
		reflect.ValueOf(p).Elem().FieldByName(f.Field()).Set(reflect.ValueOf(v))
	}
	// declared is the version the fake logged on its last line of prefix.
	declared := func(prefix string) int {
		lines := faketest.LogLines(t)
		for i := len(lines) - 1; i >= 0; i-- {
			if l, ok := strings.CutPrefix(lines[i], prefix); ok {
				_, v, _ := strings.Cut(l, " version=")
				n, err := strconv.Atoi(strings.Fields(v)[0])
				if err != nil {
					t.Fatalf("fake log %q: %v", lines[i], err)
				}
				return n
			}
		}
		t.Fatalf("the fake logged no %q line", prefix)
		return 0
	}
	var err error
	sent := 0
	switch name {
	case "ncclConfig_t":
		cfg := &nccl.Config{Device: nccl.Ptr(0)}
		set(cfg)
		id, idErr := nccl.NewUniqueID()
		if idErr != nil {
			t.Fatal(idErr)
		}
		var c2 *nccl.Communicator
		if c2, err = nccl.Init(1, 0, id, cfg); err == nil {
			sent = declared("config ncclCommInitRankConfig ")
			c2.Destroy()
		}
	case "ncclCollConfig_t":
		cfg := &nccl.CollConfig{}
		if f == versions.CollLaunchCompletionEvent {
			ev, evErr := cuda.Device(0).NewEventFlags(cuda.EventDisableTiming)
			if evErr != nil {
				t.Fatal(evErr)
			}
			defer ev.Destroy()
			cfg.LaunchCompletionEvent = ev
		} else {
			set(cfg)
		}
		buf, allocErr := cuda.AllocFrom(cuda.Device(0), []float32{1, 2, 3, 4})
		if allocErr != nil {
			t.Fatal(allocErr)
		}
		defer buf.Free()
		b := nccl.BufferOf(buf)
		if err = c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err == nil {
			sent = declared("collconfig ncclAllReduceConfig ")
		}
	case "ncclDevCommRequirements_t":
		q := &nccl.DevCommRequirements{}
		set(q)
		var d *nccl.DevComm
		if d, err = c.CreateDevComm(q); err == nil {
			sent = int(d.Declared())
			d.Close()
		}
	case "": // NCCL_GIN_CONNECTION_CUSTOM_STRIDE, whose stride goes in ginCustomStride
		custom := nccl.GINConnectionCustomStride
		var d *nccl.DevComm
		if d, err = c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: &custom}); err == nil {
			sent = int(d.Declared())
			d.Close()
		}
	case "ncclCommProperties_t":
		var p nccl.Properties
		if p, err = c.Properties(); err == nil {
			if !reflect.ValueOf(p).FieldByName(f.Field()).IsNil() {
				return bindingSends, ""
			}
			// Not decoded: the accessor of the field says why.
			res := reflect.ValueOf(c).MethodByName(f.Field()).Call(nil)
			err, _ = res[1].Interface().(error)
			if err == nil {
				t.Fatalf("%s: nil in Properties, but %s() returns no error", f.Name(), f.Field())
			}
		}
	default:
		t.Fatalf("%s: no struct to try", f.Name())
	}
	var ue *nccl.UnsupportedError
	switch {
	case err == nil && sent >= f.Since():
		return bindingSends, ""
	case err == nil:
		return fmt.Sprintf("accepted but dropped (declared %s)", nccl.Release(sent)), ""
	case errors.As(err, &ue) && int(ue.Loaded) == r && int(ue.Since) > r && !f.In(r):
		// The field, or the function that takes the struct: both newer
		// than the release.
		return bindingLacks, err.Error()
	case errors.Is(err, nccl.ErrUnsupported) && f.In(r) && ue == nil:
		return bindingRefuses, err.Error()
	}
	return fmt.Sprintf("failed: %T", err), err.Error()
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/internal/versions"
)

// Tests against the fake libnccl and libcuda: each runs in a child process
// that loads them (2 fake GPUs named "Fake GPU 0" and "Fake GPU 1").

// runCLI runs the command in this (child) process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, &out, &errb)
	t.Logf("nccl4go %s (error: %v)\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	skipWithoutCgo(t)
	return out.String(), errb.String(), err
}

// rankRows returns the table rows of probe's text output, split in cells.
func rankRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "RANK") {
			continue
		}
		var rows [][]string
		for _, r := range lines[i+1:] {
			if r == "" {
				break
			}
			rows = append(rows, strings.Fields(r))
		}
		return rows
	}
	t.Fatalf("no table in:\n%s", out)
	return nil
}

func TestFakeInfo(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803, Version: 22803, Devices: 2}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"NCCL         2.28.3", "CUDA driver  13.0", "GPUs         2\n",
			"Fake GPU 0", "Fake GPU 1", "9.0"} {
			if !strings.Contains(out, want) {
				t.Errorf("info lacks %q", want)
			}
		}
		if strings.Contains(out, "fix:") || strings.Contains(out, "?") {
			t.Errorf("info reports a problem")
		}

		out, _, err = runCLI(t, "info", "-json")
		if err != nil {
			t.Fatal(err)
		}
		var rep infoReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.NCCL.VersionCode != 22803 || rep.NCCL.Path == "" || rep.CUDA.VersionCode != 13000 || rep.CUDA.Path == "" {
			t.Errorf("nccl %+v, cuda %+v", rep.NCCL, rep.CUDA)
		}
		if len(rep.GPUs) != 2 || rep.GPUProblem != nil {
			t.Fatalf("gpus %+v, problem %+v", rep.GPUs, rep.GPUProblem)
		}
		for i, g := range rep.GPUs {
			if g.Index != i || g.Name != fmt.Sprintf("Fake GPU %d", i) || g.PCIBusID == "" || !strings.HasPrefix(g.UUID, "GPU-") ||
				g.ComputeCapability != "9.0" || g.MemoryBytes == 0 || g.Error != "" {
				t.Errorf("GPU %d: %+v", i, g)
			}
		}
	})
}

func TestFakeInfoNoNCCL(t *testing.T) {
	faketest.Run(t, faketest.Env{NoNCCL: true, Devices: 2}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatalf("info failed: %v", err)
		}
		for _, want := range []string{"NCCL         not found", "NCCL_LIBRARY=/path/to/libnccl.so.2", "Fake GPU 1"} {
			if !strings.Contains(out, want) {
				t.Errorf("info lacks %q", want)
			}
		}
		_, _, err = runCLI(t, "probe")
		if err == nil || !strings.Contains(err.Error(), "NCCL: not found") || strings.Contains(err.Error(), "GPU:") {
			t.Errorf("probe error = %v, want only NCCL missing", err)
		}
	})
}

func TestFakeInfoNoCUDA(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Version: 23007, NoCUDA: true}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatalf("info failed: %v", err)
		}
		for _, want := range []string{"NCCL         2.30.7", "CUDA driver  not found", "no GPU"} {
			if !strings.Contains(out, want) {
				t.Errorf("info lacks %q", want)
			}
		}
		_, _, err = runCLI(t, "probe")
		if err == nil || !strings.Contains(err.Error(), "GPU: no GPU") || strings.Contains(err.Error(), "NCCL:") {
			t.Errorf("probe error = %v, want only the GPU missing", err)
		}
	})
}

func TestFakeNoDevice(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Version: 23007, Devices: -1}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatalf("info failed: %v", err)
		}
		if !strings.Contains(out, "no GPU: the CUDA driver reports no device") || !strings.Contains(out, "CUDA driver  13.0") {
			t.Errorf("info does not say no GPU")
		}
		if _, _, err := runCLI(t, "probe"); err == nil || !strings.Contains(err.Error(), "no GPU") {
			t.Errorf("probe error = %v, want no GPU", err)
		}
	})
}

func TestFakeProbeOldNCCL(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803, Version: 22803, Devices: 2}, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "NCCL 2.28.3 (") || !strings.Contains(out, "2 ranks on 2 GPUs") {
			t.Errorf("title: %q", strings.SplitN(out, "\n", 2)[0])
		}
		rows := rankRows(t, out)
		if len(rows) != 2 {
			t.Fatalf("%d rows, want 2", len(rows))
		}
		for i, r := range rows {
			want := fmt.Sprintf("%d 2 %d Fake GPU %d", i, i, i)
			if got := strings.Join(r[:6], " "); got != want {
				t.Errorf("row %d starts %q, want %q", i, got, want)
			}
			if got := strings.Join(r[7:], " "); got != strings.TrimSpace(strings.Repeat("n/a ", 8)) {
				t.Errorf("row %d properties %q, want 8 n/a", i, got)
			}
		}
		if n := strings.Count(out, "note: capability properties need NCCL 2.29.2 (loaded 2.28.3)\n"); n != 1 {
			t.Errorf("%d notes about properties, want 1", n)
		}

		out, _, err = runCLI(t, "probe", "-json", "-devices", "1,0")
		if err != nil {
			t.Fatal(err)
		}
		rep := decodeProbe(t, out)
		if rep.NCCL.Version != "2.28.3" || rep.NCCL.Path == "" || len(rep.Ranks) != 2 {
			t.Fatalf("nccl %+v, %d ranks", rep.NCCL, len(rep.Ranks))
		}
		for i, r := range rep.Ranks {
			if r.Rank != i || r.NRanks != 2 || r.Device != 1-i || r.GPU != fmt.Sprintf("Fake GPU %d", 1-i) {
				t.Errorf("rank %d: %+v", i, r)
			}
			if r.Properties != nil || !strings.Contains(r.PropertiesError, "requires NCCL 2.29.2, loaded 2.28.3") {
				t.Errorf("rank %d: properties %+v, error %q", i, r.Properties, r.PropertiesError)
			}
		}
		if !strings.Contains(out, `"properties": null`) {
			t.Error(`no "properties": null in the JSON`)
		}
	})
}

func TestFakeProbeNewNCCL(t *testing.T) {
	env := faketest.Env{Release: 23007, Version: 23007, Devices: 2, Extra: []string{
		"FAKE_NCCL_GIN_TYPE=2", "FAKE_NCCL_RAILED_GIN_TYPE=3", "FAKE_NCCL_HOST_RMA=1",
		"FAKE_NCCL_LSA_TEAMS=2", "FAKE_NCCL_MULTIMEM=1", "FAKE_NCCL_NVML_DEV=5"}}
	faketest.Run(t, env, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err != nil {
			t.Fatal(err)
		}
		rows := rankRows(t, out)
		if len(rows) != 2 {
			t.Fatalf("%d rows, want 2", len(rows))
		}
		if strings.Contains(out, "n/a") || strings.Contains(out, "note:") {
			t.Errorf("n/a or a note with NCCL 2.30.7")
		}
		for i, r := range rows {
			if len(r) != 15 { // 13 columns; the GPU name "Fake GPU i" is three words
				t.Fatalf("row %d: %d cells %q", i, len(r), r)
			}
			// CUDA DEV, NVML DEV, DEVICE API, MULTIMEM, GIN, LSA TEAMS, HOST RMA, RAILED GIN
			want := fmt.Sprintf("%d 5 yes yes NCCL_GIN_TYPE_PROXY 2 yes NCCL_GIN_TYPE_GDAKI", i)
			if got := strings.Join(r[7:], " "); got != want {
				t.Errorf("row %d properties %q, want %q", i, got, want)
			}
		}

		out, _, err = runCLI(t, "probe", "-json")
		if err != nil {
			t.Fatal(err)
		}
		rep := decodeProbe(t, out)
		if rep.NCCL.Version != "2.30.7" || len(rep.Ranks) != 2 || len(rep.Notes) != 0 {
			t.Fatalf("report %+v", rep)
		}
		for i, r := range rep.Ranks {
			p := r.Properties
			switch {
			case p == nil:
				t.Errorf("rank %d: no properties: %s", i, r.PropertiesError)
			case p.Rank != i || p.NRanks != 2 || p.CUDADevice != r.Device:
				t.Errorf("rank %d: properties %+v disagree with %+v", i, p, r)
			case p.NumLSATeams == nil || p.HostRMASupport == nil || p.RailedGINType == nil:
				t.Errorf("rank %d: later properties missing: %+v", i, p)
			case *p.NumLSATeams != 2 || !*p.HostRMASupport || *p.RailedGINType != "NCCL_GIN_TYPE_GDAKI" || p.GINType != "NCCL_GIN_TYPE_PROXY" || p.NVMLDevice != 5:
				t.Errorf("rank %d: properties %+v, want the fake's knobs", i, p)
			case r.PropertiesError != "":
				t.Errorf("rank %d: properties error %q", i, r.PropertiesError)
			}
		}
	})
}

func TestFakeProbePartialProperties(t *testing.T) {
	// 2.29.3: the properties without the last three.
	faketest.Run(t, faketest.Env{Release: 22903, Version: 22903, Devices: 2}, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rankRows(t, out) {
			if got := strings.Join(r[len(r)-3:], " "); got != "n/a n/a n/a" {
				t.Errorf("row %d ends %q, want n/a n/a n/a", i, got)
			}
			if r[len(r)-4] == "n/a" {
				t.Errorf("row %d: GIN type is n/a", i)
			}
		}
		if !strings.Contains(out, "note: LSA teams, host RMA support and railed GIN type need NCCL 2.29.7 (loaded 2.29.3)") {
			t.Error("no note about the later properties")
		}
	})
}

// destroyed counts the communicators the fake NCCL freed.
func destroyed(t *testing.T) int {
	return faketest.Calls(t, "ncclCommDestroy") + faketest.Calls(t, "ncclCommAbort")
}

func TestFakeProbeDestroysCommunicators(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Devices: 3}, func(t *testing.T) {
		if _, _, err := runCLI(t, "probe"); err != nil {
			t.Fatal(err)
		}
		if n := faketest.Calls(t, "ncclCommDestroy"); n != 3 {
			t.Errorf("%d communicators destroyed, want 3", n)
		}
	})
	// A failure after the communicators exist still destroys them all.
	env := faketest.Env{Release: 23007, Devices: 2, Extra: []string{"FAKE_NCCL_FAIL=ncclCommUserRank=3@2"}}
	faketest.Run(t, env, func(t *testing.T) {
		_, _, err := runCLI(t, "probe")
		if err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Fatalf("probe error = %v, want the failed ncclCommUserRank", err)
		}
		if n := destroyed(t); n != 2 {
			t.Errorf("%d communicators destroyed or aborted, want 2", n)
		}
	})
}

func TestFakeProbePropertiesFail(t *testing.T) {
	env := faketest.Env{Release: 23007, Devices: 2, Extra: []string{"FAKE_NCCL_FAIL=ncclCommQueryProperties=3"}}
	faketest.Run(t, env, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "n/a"); n != 16 {
			t.Errorf("%d n/a cells, want 16", n)
		}
		if n := strings.Count(out, "note: capability properties: nccl: "); n != 1 {
			t.Errorf("%d notes with the failure, want 1", n)
		}
	})
}

func TestFakeProbeInitFails(t *testing.T) {
	env := faketest.Env{Release: 23007, Devices: 2, Extra: []string{"FAKE_NCCL_ASYNC_FAIL=2"}}
	faketest.Run(t, env, func(t *testing.T) {
		_, _, err := runCLI(t, "probe")
		if err == nil || !strings.Contains(err.Error(), "creating the communicator") || !strings.Contains(err.Error(), "system error") {
			t.Fatalf("probe error = %v, want the failed creation", err)
		}
	})
}

func TestFakeProbeTimeout(t *testing.T) {
	env := faketest.Env{Release: 23007, Devices: 2, Extra: []string{"FAKE_NCCL_HANG=1"}}
	faketest.Run(t, env, func(t *testing.T) {
		start := time.Now()
		_, _, err := runCLI(t, "probe", "-timeout", "300ms")
		if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms (raise --timeout)") ||
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("probe error = %v, want a timeout", err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("probe error spans several lines: %q", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("probe took %v to time out after 300ms", d)
		}
		if n := faketest.Calls(t, "ncclCommAbort"); n != 2 {
			t.Errorf("%d communicators aborted, want 2", n)
		}
	})
}

func TestFakeProbeDestroyFails(t *testing.T) {
	env := faketest.Env{Release: 23007, Devices: 2, Extra: []string{"FAKE_NCCL_FAIL=ncclCommDestroy=3@1"}}
	faketest.Run(t, env, func(t *testing.T) {
		out, _, err := runCLI(t, "probe")
		if err == nil || !strings.Contains(err.Error(), "destroying the communicator of rank 0") {
			t.Errorf("probe error = %v, want the failed destruction of rank 0", err)
		}
		if len(rankRows(t, out)) != 2 {
			t.Errorf("the table is not printed before the error")
		}
		if n := faketest.Calls(t, "ncclCommDestroy"); n != 2 {
			t.Errorf("ncclCommDestroy called %d times, want 2 (rank 1 too)", n)
		}
	})
}

// info shows the binding's version, the ABI it was written against, and
// which rows of the version table the loaded release has, by group.
func TestFakeInfoVersions(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Devices: 1}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"nccl4go      " + nccl.BindingVersion() + "  written against NCCL " + nccl.ABIRelease.String() + "'s ABI",
			"NCCL 2.30.7 has, of the features nccl4go gates by release:",
			"lacks ginCustomStride (2.31.0), ginType (2.31.0),", "cftBarrierCount (2.31.2)\n",
			"NCCL_GIN_CONNECTION_CUSTOM_STRIDE",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("info lacks %q", want)
			}
		}
		out, _, err = runCLI(t, "info", "-json")
		if err != nil {
			t.Fatal(err)
		}
		var rep infoReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.NCCL.Binding != nccl.BindingVersion() || rep.NCCL.ABIRelease != nccl.ABIRelease.String() {
			t.Errorf("binding %q ABI %q", rep.NCCL.Binding, rep.NCCL.ABIRelease)
		}
		total := 0
		for i, g := range rep.NCCL.Features {
			total += g.Of
			if g.Has+len(g.Lacks) != g.Of {
				t.Errorf("%s: has %d, lacks %d, of %d", g.Group, g.Has, len(g.Lacks), g.Of)
			}
			for _, l := range g.Lacks {
				if r, err := nccl.ParseRelease(l.Since); err != nil || r <= 23007 {
					t.Errorf("%s: 2.30.7 lacks %s of %s", g.Group, l.Name, l.Since)
				}
			}
			if (g.Group == otherFeatures) != (i == len(rep.NCCL.Features)-1) {
				t.Errorf("group %d is %q: the rest comes last", i, g.Group)
			}
		}
		if total != int(versions.NumFeatures) {
			t.Errorf("the groups hold %d rows, the table %d", total, versions.NumFeatures)
		}
	})
	// 2.31.2 lacks 2.32.3's config field and window flags; 2.32.3 lacks
	// none of them.
	for _, r := range []int{23102, 23203} {
		faketest.Run(t, faketest.Env{Release: r, Devices: 1}, func(t *testing.T) {
			out, _, err := runCLI(t, "info")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"nvlsHostMode (2.32.3)", "NCCL_WIN_GIN_ONLY (2.32.3)", "NCCL_WIN_CFT_COUNTED (2.32.3)"} {
				if got := strings.Contains(out, name); got != (r < 23203) {
					t.Errorf("NCCL %s: info lists %q as lacking: %v", nccl.Release(r), name, got)
				}
			}
		})
	}
	faketest.Run(t, faketest.Env{NoNCCL: true, Devices: 1}, func(t *testing.T) {
		out, _, err := runCLI(t, "info")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "written against NCCL "+nccl.ABIRelease.String()+"'s ABI") || strings.Contains(out, " has, of the features") {
			t.Errorf("without NCCL:\n%s", out)
		}
	})
}

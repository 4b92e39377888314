package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// These tests print made-up reports: no library is loaded.

func TestPrintProbeWithProperties(t *testing.T) {
	teams, rma, railed := 1, true, nccl.GINNone
	rep := probeReport{NCCL: probeNCCL{Version: "2.30.7", Path: "/usr/lib/libnccl.so.2"}}
	for r := range 2 {
		rep.Ranks = append(rep.Ranks, probeRank{
			Rank: r, NRanks: 2, Device: r, GPU: "NVIDIA H200", PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x19+r),
			Properties: &nccl.Properties{Rank: r, NRanks: 2, CUDADevice: r, NVMLDevice: 7 - r,
				DeviceAPISupport: true, GINType: nccl.GINProxy,
				NumLSATeams: &teams, HostRMASupport: &rma, RailedGINType: &railed, Declared: 23007},
		})
	}
	var b bytes.Buffer
	if err := printProbe(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if want := "NCCL 2.30.7 (/usr/lib/libnccl.so.2): 2 ranks on 2 GPUs"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if len(lines) != 5 { // title, blank, header, 2 ranks
		t.Fatalf("%d lines, want 5", len(lines))
	}
	header := strings.Fields(strings.Join(strings.Fields(lines[2]), " "))
	if header[0] != "RANK" || !strings.Contains(lines[2], "RAILED GIN") {
		t.Errorf("header %q", lines[2])
	}
	want := [][]string{
		{"0", "2", "0", "NVIDIA", "H200", "0000:19:00.0", "0", "7", "yes", "no", "NCCL_GIN_TYPE_PROXY", "1", "yes", "NCCL_GIN_TYPE_NONE"},
		{"1", "2", "1", "NVIDIA", "H200", "0000:1a:00.0", "1", "6", "yes", "no", "NCCL_GIN_TYPE_PROXY", "1", "yes", "NCCL_GIN_TYPE_NONE"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[3+i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("rank %d row %q, want %q", i, got, w)
		}
	}
	// Columns line up: every cell of the "GIN" column starts where its header does.
	col := strings.Index(lines[2], "GIN ")
	for _, l := range lines[3:] {
		if !strings.HasPrefix(l[col:], "NCCL_GIN_TYPE_PROXY") {
			t.Errorf("GIN column not aligned at %d in %q", col, l)
		}
	}
	if strings.Contains(out, "n/a") || strings.Contains(out, "note:") {
		t.Errorf("unexpected n/a or note:\n%s", out)
	}
}

func TestPrintProbeWithoutProperties(t *testing.T) {
	note := unsupportedNote("capability properties",
		&nccl.UnsupportedError{Feature: "ncclCommQueryProperties", Since: 22902, Loaded: 22803})
	rep := probeReport{
		NCCL:  probeNCCL{Version: "2.28.3", Path: "/x/libnccl.so.2"},
		Ranks: []probeRank{{Rank: 0, NRanks: 1, Device: 0, GPU: "Fake GPU", PCIBusID: "0000:01:00.0", PropertiesError: "x"}},
		Notes: []string{note},
	}
	var b bytes.Buffer
	if err := printProbe(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	if !strings.Contains(out, "1 rank on 1 GPU\n") {
		t.Errorf("no singular title:\n%s", out)
	}
	if n := strings.Count(out, "n/a"); n != 8 {
		t.Errorf("%d n/a cells, want 8:\n%s", n, out)
	}
	if !strings.Contains(out, "note: capability properties need NCCL 2.29.2 (loaded 2.28.3)\n") {
		t.Errorf("no note:\n%s", out)
	}
}

func TestPrintProbePartialProperties(t *testing.T) {
	// 2.29.2 to 2.29.6: the first properties only.
	rep := probeReport{
		NCCL: probeNCCL{Version: "2.29.3", Path: "/x/libnccl.so.2"},
		Ranks: []probeRank{{Rank: 0, NRanks: 1, GPU: "G", PCIBusID: "b",
			Properties: &nccl.Properties{NRanks: 1, MultimemSupport: true, GINType: nccl.GINGDAKI}}},
	}
	var b bytes.Buffer
	if err := printProbe(&b, rep); err != nil {
		t.Fatal(err)
	}
	row := strings.Fields(strings.Split(b.String(), "\n")[3])
	if want := "0 1 0 G b 0 0 no yes NCCL_GIN_TYPE_GDAKI n/a n/a n/a"; strings.Join(row, " ") != want {
		t.Errorf("row %q, want %q", row, want)
	}
}

func TestProbeJSONShape(t *testing.T) {
	teams, rma, railed := 2, false, nccl.GINGDAKI
	rep := probeReport{
		NCCL: probeNCCL{Version: "2.30.7", Path: "/p"},
		Ranks: []probeRank{
			{Rank: 0, NRanks: 2, GPU: "G", Properties: &nccl.Properties{NRanks: 2, GINType: nccl.GINProxy,
				NumLSATeams: &teams, HostRMASupport: &rma, RailedGINType: &railed}},
			{Rank: 1, NRanks: 2, Device: 1, GPU: "G", PropertiesError: "nccl: ncclCommQueryProperties: requires NCCL 2.29.2, loaded 2.28.3"},
		},
	}
	var b bytes.Buffer
	if err := writeJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		NCCL  map[string]string `json:"nccl"`
		Ranks []map[string]any  `json:"ranks"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.NCCL["version"] != "2.30.7" || doc.NCCL["path"] != "/p" {
		t.Errorf("nccl = %v", doc.NCCL)
	}
	props, ok := doc.Ranks[0]["properties"].(map[string]any)
	if !ok {
		t.Fatalf("rank 0 properties = %v", doc.Ranks[0]["properties"])
	}
	for k, want := range map[string]any{"gin_type": "NCCL_GIN_TYPE_PROXY", "railed_gin_type": "NCCL_GIN_TYPE_GDAKI", "num_lsa_teams": 2.0, "host_rma_support": false} {
		if props[k] != want {
			t.Errorf("properties.%s = %v, want %v", k, props[k], want)
		}
	}
	if _, has := doc.Ranks[0]["properties_error"]; has {
		t.Error("rank 0 has properties_error")
	}
	if v, has := doc.Ranks[1]["properties"]; !has || v != nil {
		t.Errorf("rank 1 properties = %v (present %v), want null", v, has)
	}
	if s, _ := doc.Ranks[1]["properties_error"].(string); !strings.Contains(s, "2.29.2") {
		t.Errorf("rank 1 properties_error = %q", s)
	}
}

func TestPrintInfo(t *testing.T) {
	rep := infoReport{
		NCCL: ncclInfo{Path: "/usr/lib/libnccl.so.2", Version: "2.28.3", VersionCode: 22803},
		CUDA: driverInfo{Path: "/usr/lib/libcuda.so.1", Version: "13.0", VersionCode: 13000},
		GPUs: []gpuInfo{
			{Index: 0, Name: "NVIDIA H200", PCIBusID: "0000:19:00.0", UUID: "GPU-1", ComputeCapability: "9.0", MemoryBytes: 150 << 30},
			{Index: 1, Name: "NVIDIA H200", Error: "cuda: UUID: boom"},
		},
	}
	var b bytes.Buffer
	if err := printInfo(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"NCCL         2.28.3  /usr/lib/libnccl.so.2\n",
		"CUDA driver  13.0    /usr/lib/libcuda.so.1\n",
		"GPUs         2\n",
		"GPU  NAME         PCI BUS ID    UUID   CC   MEMORY\n",
		"0    NVIDIA H200  0000:19:00.0  GPU-1  9.0  150.0 GiB\n",
		"1    NVIDIA H200  ?             ?      ?    ?\n",
		"GPU 1: cuda: UUID: boom\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q", want)
		}
	}
}

func TestPrintInfoProblems(t *testing.T) {
	rep := infoReport{
		NCCL:       ncclInfo{Problem: &problem{Reason: "not found: tried x", Fix: "install NCCL"}},
		CUDA:       driverInfo{Path: "/l/libcuda.so.1", Version: "12.4"},
		GPUProblem: &problem{Reason: "no GPU: the CUDA driver reports no device", Fix: "check nvidia-smi"},
	}
	var b bytes.Buffer
	if err := printInfo(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := "NCCL         not found: tried x\n" +
		"             fix: install NCCL\n" +
		"CUDA driver  12.4  /l/libcuda.so.1\n" +
		"GPUs         no GPU: the CUDA driver reports no device\n" +
		"             fix: check nvidia-smi\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestExplain(t *testing.T) {
	saved := cannotLoadC
	defer func() { cannotLoadC = saved }()
	cannotLoadC = false // the path of a build that loads libraries, whatever this one is
	notFound := fmt.Errorf("%w: tried /a/libnccl.so.2 (/a/libnccl.so.2: cannot open shared object file); "+
		"install NCCL (libnccl2), then set NCCL_LIBRARY to its libnccl.so.2 or call nccl.Load(path)", nccl.ErrLibraryNotFound)
	p := explainNCCL(notFound)
	if p.Reason != "not found: tried /a/libnccl.so.2 (/a/libnccl.so.2: cannot open shared object file)" {
		t.Errorf("reason %q", p.Reason)
	}
	if !strings.Contains(p.Fix, "NCCL_LIBRARY=/path/to/libnccl.so.2") {
		t.Errorf("fix %q", p.Fix)
	}
	old := explainNCCL(&nccl.UnsupportedError{Feature: "NCCL 2.18.1 at /x", Since: 21901, Loaded: 21801})
	if !strings.Contains(old.Reason, "2.18.1 is too old") || !strings.Contains(old.Reason, "2.19.1") {
		t.Errorf("too old: %+v", old)
	}
	if p := explainNCCL(errors.New("weird")); p.Reason != "weird" {
		t.Errorf("other: %+v", p)
	}
	if p := explainGPUs(cuda.ErrNoDevice); !strings.HasPrefix(p.Reason, "no GPU") || !strings.Contains(p.Fix, "nvidia-smi") {
		t.Errorf("no device: %+v", p)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	if p := explainGPUs(cuda.ErrNoDevice); !strings.Contains(p.Fix, `CUDA_VISIBLE_DEVICES=""`) {
		t.Errorf("hidden devices: %+v", p)
	}
	cudaMissing := fmt.Errorf("%w: tried /b/libcuda.so.1 (nope); install the NVIDIA driver", cuda.ErrLibraryNotFound)
	if p := explainGPUs(cudaMissing); !strings.Contains(p.Reason, "tried /b/libcuda.so.1 (nope)") || !strings.Contains(p.Fix, cudaLibraryEnv) {
		t.Errorf("no driver: %+v", p)
	}
	noCgo := fmt.Errorf("%w: tried libnccl.so.2 (nccl4go was built without cgo (CGO_ENABLED=0) or not for Linux: "+
		"it cannot load C libraries); install NCCL", nccl.ErrLibraryNotFound)
	cannotLoadC = true // the path of a build without cgo
	for _, p := range []*problem{explainNCCL(noCgo), explainCUDA(noCgo), explainGPUs(noCgo)} {
		if !strings.Contains(p.Reason, "cannot be loaded: tried libnccl.so.2 (nccl4go was built without cgo") || p.Fix != rebuild {
			t.Errorf("without cgo: %+v", p)
		}
	}
	if got := tried(errors.New("no pattern")); got != "no pattern" {
		t.Errorf("tried fallback = %q", got)
	}
}

// Whether this build can load C libraries is known from the build, not
// read from an error's text: a library path that happens to say "built
// without cgo" gets the fix of a missing library, not a rebuild (it got
// "rebuild nccl4go with cgo").
func TestExplainNoCgoFromBuildNotText(t *testing.T) {
	if !loadsCLibraries {
		t.Skip("this build cannot load C libraries: every load failure's fix is a rebuild")
	}
	err := fmt.Errorf("%w: tried /opt/built without cgo/libnccl.so.2 (/opt/built without cgo/libnccl.so.2: "+
		"cannot open shared object file)", nccl.ErrLibraryNotFound)
	if p := explainNCCL(err); p.Fix == rebuild || !strings.Contains(p.Fix, "NCCL_LIBRARY=") {
		t.Errorf("explainNCCL = %+v, want the missing library's fix", p)
	}
	cerr := fmt.Errorf("%w: tried /opt/built without cgo/libcuda.so.1 (nope)", cuda.ErrLibraryNotFound)
	if p := explainCUDA(cerr); p.Fix == rebuild {
		t.Errorf("explainCUDA = %+v, want the missing driver's fix", p)
	}
	if p := explainGPUs(cerr); p.Fix == rebuild {
		t.Errorf("explainGPUs = %+v, want the missing driver's fix", p)
	}
}

func TestMissingError(t *testing.T) {
	e := &missingError{what: "probe", problems: []labeled{
		{"NCCL", &problem{Reason: "not found", Fix: "install it"}},
		{"GPU", &problem{Reason: "no GPU"}},
	}}
	want := "cannot probe:\n  NCCL: not found\n        fix: install it\n  GPU: no GPU"
	if e.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", e.Error(), want)
	}
}

func TestUnsupportedNote(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&nccl.UnsupportedError{Feature: "ncclCommQueryProperties", Since: 22902, Loaded: 22803},
			"capability properties need NCCL 2.29.2 (loaded 2.28.3)"},
		{fmt.Errorf("wrapped: %w", &nccl.UnsupportedError{Since: 22907, Loaded: 22903}),
			"capability properties need NCCL 2.29.7 (loaded 2.29.3)"},
		{errors.New("boom"), "capability properties: boom"},
	} {
		if got := unsupportedNote("capability properties", tc.err); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestDeviceList(t *testing.T) {
	var d deviceList
	if err := d.Set("0, 2,1"); err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "0,2,1" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"", "x", "1,", "-2", "1.5"} {
		if err := d.Set(bad); err == nil {
			t.Errorf("Set(%q) succeeded", bad)
		}
	}
}

func TestFormatGiB(t *testing.T) {
	for _, tc := range []struct {
		bytes uint64
		want  string
	}{{0, "0.0 GiB"}, {1 << 30, "1.0 GiB"}, {150122553344, "139.8 GiB"}, {80 << 30, "80.0 GiB"}} {
		if got := formatGiB(tc.bytes); got != tc.want {
			t.Errorf("formatGiB(%d) = %q, want %q", tc.bytes, got, tc.want)
		}
	}
}

func TestCondense(t *testing.T) {
	single := errors.New("one line")
	if got := condense(single); got != single {
		t.Errorf("condense changed a one-line error: %v", got)
	}
	inProgress := &nccl.Error{Op: "GroupEnd", Code: nccl.InProgress, Detail: "aborted"}
	joined := errors.Join(
		errors.Join(context.DeadlineExceeded, fmt.Errorf("%v: %w", inProgress, context.DeadlineExceeded)),
		errors.Join(context.DeadlineExceeded, fmt.Errorf("%v: %w", inProgress, context.DeadlineExceeded)))
	got := condense(joined)
	if want := "nccl: GroupEnd: operation in progress: aborted: context deadline exceeded"; got.Error() != want {
		t.Errorf("condense = %q, want %q", got, want)
	}
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Error("condensed error lost context.DeadlineExceeded")
	}
	two := condense(errors.Join(errors.New("a"), errors.New("b"), errors.New("a")))
	if two.Error() != "a; b" {
		t.Errorf("condense = %q, want %q", two, "a; b")
	}
}

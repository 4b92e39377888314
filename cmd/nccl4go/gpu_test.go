package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
)

// GPU tests: they load the real libraries in this process and skip, saying
// why, where there is no GPU or NCCL.

func TestGPUInfo(t *testing.T) {
	r := gputest.Require(t)
	name, err := cuda.Device(0).Name()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"info"}, &out, &errb); err != nil {
		t.Fatalf("info: %v\n%s", err, errb.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"NCCL         " + r.String(), "CUDA driver", name, "GPU  NAME", "GiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("info output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "fix:") {
		t.Errorf("info reports a problem on a GPU machine:\n%s", out.String())
	}

	out.Reset()
	if err := run(context.Background(), []string{"info", "-json"}, &out, &errb); err != nil {
		t.Fatalf("info -json: %v", err)
	}
	var rep infoReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("info -json does not parse: %v\n%s", err, out.String())
	}
	n, _ := cuda.Count()
	if rep.NCCL.VersionCode != int(r) || rep.NCCL.Path == "" || rep.CUDA.VersionCode == 0 || len(rep.GPUs) != n {
		t.Errorf("info -json: nccl %+v, cuda %+v, %d GPUs (want %d)", rep.NCCL, rep.CUDA, len(rep.GPUs), n)
	}
	if g := rep.GPUs[0]; g.Name != name || !strings.HasPrefix(g.UUID, "GPU-") || g.MemoryGiB <= 0 || g.Error != "" {
		t.Errorf("GPU 0: %+v", g)
	}
}

func TestGPUProbe(t *testing.T) {
	r := gputest.Require(t)
	name, err := cuda.Device(0).Name()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"probe", "-devices", "0"}, &out, &errb); err != nil {
		t.Fatalf("probe: %v\n%s", err, errb.String())
	}
	t.Logf("\n%s", out.String())
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "NCCL "+r.String()) || !strings.Contains(lines[0], "1 rank on 1 GPU") {
		t.Errorf("title %q", lines[0])
	}
	if len(lines) < 4 || !strings.HasPrefix(lines[2], "RANK") {
		t.Fatalf("no table:\n%s", out.String())
	}
	row := lines[3]
	if f := strings.Fields(row); len(f) < 3 || f[0] != "0" || f[1] != "1" || f[2] != "0" || !strings.Contains(row, name) {
		t.Errorf("rank 0 row %q: want rank 0, nranks 1, device 0, %q", row, name)
	}
	hasProps := r >= 22902
	// Before 2.29.7 at least the later properties are n/a.
	if got, want := strings.Contains(row, "n/a"), r < 22907; got != want {
		t.Errorf("NCCL %s: row %q has n/a = %v, want %v", r, row, got, want)
	}
	if note := strings.Contains(out.String(), "capability properties need NCCL 2.29.2"); note == hasProps {
		t.Errorf("NCCL %s: note about properties = %v", r, note)
	}
}

func TestGPUProbeJSON(t *testing.T) {
	r := gputest.Require(t)
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"probe", "-json"}, &out, &errb); err != nil {
		t.Fatalf("probe -json: %v\n%s", err, errb.String())
	}
	rep := decodeProbe(t, out.String())
	n, _ := cuda.Count()
	if rep.NCCL.Version != r.String() || rep.NCCL.Path == "" || len(rep.Ranks) != n {
		t.Fatalf("nccl %+v, %d ranks (want %d)", rep.NCCL, len(rep.Ranks), n)
	}
	for i, rk := range rep.Ranks {
		if rk.Rank != i || rk.NRanks != n || rk.GPU == "" || rk.PCIBusID == "" {
			t.Errorf("rank %d: %+v", i, rk)
		}
		switch {
		case r < 22902:
			if rk.Properties != nil || !strings.Contains(rk.PropertiesError, "2.29.2") {
				t.Errorf("rank %d on NCCL %s: properties %+v, error %q", i, r, rk.Properties, rk.PropertiesError)
			}
		case rk.Properties == nil:
			t.Errorf("rank %d on NCCL %s: no properties (%s)", i, r, rk.PropertiesError)
		case rk.Properties.Rank != i || rk.Properties.CUDADevice != rk.Device || rk.Properties.GINType == "":
			t.Errorf("rank %d: properties %+v disagree with identity %+v", i, rk.Properties, rk)
		case (r >= 22907) != (rk.Properties.NumLSATeams != nil):
			t.Errorf("rank %d on NCCL %s: num_lsa_teams %v", i, r, rk.Properties.NumLSATeams)
		}
	}
}

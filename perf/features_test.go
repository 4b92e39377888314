package perf

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// -u, -R 1, -R 2 and -M on the fake: results still right, the buffers
// misaligned by whole elements, registered, and the memory line printed.
func TestUnalignedRegisteredMemoryReport(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := LocalWorld(context.Background(), []int{0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, tc := range []struct {
			name string
			mod  func(o *Options)
			want string
		}{
			{"-u 3", func(o *Options) { o.Unaligned, o.Type = 3, "all" }, "unalign: 3"},
			{"-R 1", func(o *Options) { o.Register = 1 }, "Out of bounds values : 0 OK"},
			{"-R 2", func(o *Options) { o.Register = 2 }, "Out of bounds values : 0 OK"},
			{"-M 1", func(o *Options) { o.MemoryReport = true }, "# GPU memory usage     : Initialization "},
		} {
			o := DefaultOptions("all_gather")
			o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters = 1024, 64<<10, 8, 2
			tc.mod(&o)
			var out bytes.Buffer
			rep, err := Run(context.Background(), o, w, &TableWriter{W: &out})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if rep.Errors != 0 || !strings.Contains(out.String(), tc.want) {
				t.Errorf("%s: %d errors, no %q in\n%s", tc.name, rep.Errors, tc.want, out.String())
			}
			if o.MemoryReport && (rep.Memory == nil || rep.Memory.Buffers < 2*64<<10) {
				t.Errorf("-M: %+v, want at least the two 64 KiB buffers", rep.Memory)
			}
		}
	})
}

// The misalignment is whole elements of each type, from the allocation.
func TestUnalignedOffsets(t *testing.T) {
	b := &bench{opts: Options{Unaligned: 3}, ranks: []*rankState{{sendAlloc: 0x10000, recvAlloc: 0x20000}}}
	for _, tc := range []struct {
		dt   string
		want uintptr
	}{{"int8", 3}, {"half", 6}, {"float", 12}, {"double", 24}} {
		dt, _ := lookupType(tc.dt)
		b.misalign(dt)
		if r := b.ranks[0]; r.send != 0x10000+tc.want || r.recv != 0x20000+tc.want {
			t.Errorf("%s: send %#x recv %#x, want +%d", tc.dt, r.send, r.recv, tc.want)
		}
	}
}

// -x sets the communicator's CTA policy; -1 leaves NCCL's default.
func TestCommConfigCTAPolicy(t *testing.T) {
	o := DefaultOptions("all_reduce")
	if cfg := o.CommConfig(); cfg.CTAPolicy != nil {
		t.Errorf("default: CTA policy %v, want unset", *cfg.CTAPolicy)
	}
	o.CTAPolicy = 1
	if cfg := o.CommConfig(); cfg.CTAPolicy == nil || *cfg.CTAPolicy != nccl.CTAPolicyEfficiency {
		t.Errorf("-x 1: CTA policy %v", cfg.CTAPolicy)
	}
}

// Options.Ceiling: on one rank every row gets the device memcpy limit of
// its bytes; hypercube (no bytes moved on one rank) none.
func TestCeilingOneRank(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := LocalWorld(context.Background(), []int{0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, test := range []string{"all_reduce", "all_gather", "hypercube"} {
			o := DefaultOptions(test)
			o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Ceiling = 1024, 64<<10, 8, 3, true
			rep, err := Run(context.Background(), o, w, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Rows {
				c := r.Ceiling
				switch {
				case test == "hypercube" && c != nil:
					t.Errorf("hypercube: ceiling %+v, want none", c)
				case test != "hypercube" && (c == nil || c.Path != "device memcpy" || !(c.AlgBW > 0)):
					t.Errorf("%s %d: ceiling %+v", test, r.Size, c)
				}
			}
		}
	})
}

// NCCL_TESTS_SPLIT_MASK and NCCL_TESTS_SPLIT give nccl-tests' colours.
func TestSplitColor(t *testing.T) {
	env := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		key, val    string
		proc, color int
	}{
		{"NCCL_TESTS_SPLIT_MASK", "0x6", 7, 6},
		{"NCCL_TESTS_SPLIT_MASK", "3", 5, 1},
		{"NCCL_TESTS_SPLIT", "AND 1", 5, 1},
		{"NCCL_TESTS_SPLIT", "&0x2", 6, 2},
		{"NCCL_TESTS_SPLIT", "or 8", 5, 13},
		{"NCCL_TESTS_SPLIT", "|1", 4, 5},
		{"NCCL_TESTS_SPLIT", "MOD 4", 7, 3},
		{"NCCL_TESTS_SPLIT", "%2", 7, 1},
		{"NCCL_TESTS_SPLIT", "DIV 4", 7, 1},
		{"NCCL_TESTS_SPLIT", "/8", 17, 2},
	} {
		c, split, err := SplitColor(tc.proc, env(tc.key, tc.val))
		if err != nil || !split || c != tc.color {
			t.Errorf("%s=%q, process %d: colour %d %v %v, want %d", tc.key, tc.val, tc.proc, c, split, err, tc.color)
		}
	}
	if _, split, err := SplitColor(3, env("X", "")); split || err != nil {
		t.Errorf("no variable: split %v, %v", split, err)
	}
	for _, bad := range []string{"XOR 1", "MOD 0", "DIV x", "AND"} {
		if _, _, err := SplitColor(3, env("NCCL_TESTS_SPLIT", bad)); err == nil {
			t.Errorf("NCCL_TESTS_SPLIT=%q accepted", bad)
		}
	}
	if _, _, err := SplitColor(3, env("NCCL_TESTS_SPLIT_MASK", "zz")); err == nil {
		t.Error("NCCL_TESTS_SPLIT_MASK=zz accepted")
	}
}

// Every unsupported feature says why; none of the options done is listed.
func TestUnsupportedListed(t *testing.T) {
	done := map[string]bool{"-I": true, "-K": true, "-R": true, "-S": true, "-M": true, "-u": true, "-x": true, "-t": true}
	for _, f := range Unsupported {
		if f.Name == "" || len(f.Reason) < 20 {
			t.Errorf("%+v: no name or reason", f)
		}
		if done[f.Flag] || strings.Contains(f.Name, "SPLIT") || strings.Contains(f.Name, "SPREAD") {
			t.Errorf("%s %s is listed unsupported but done", f.Flag, f.Name)
		}
	}
	if _, ok := lookupTest("alltoallv"); !ok {
		t.Error("alltoallv missing")
	}
}

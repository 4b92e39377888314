package perf

import (
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/trace"
)

// perf speaks nccl-tests' words ("half", "all_reduce") for the module's
// enums; these tests fail when the module gains a data type or a
// collective that perf does not know.

// missingTests is the collectives of ops (trace's names) that have no test
// here: nccl-tests names its tests as the operation in snake case, and
// tests Send and Recv together as sendrecv.
func missingTests(ops []string) (missing []string) {
	for _, op := range ops {
		name := strings.ToLower(op)
		if op == "Send" || op == "Recv" {
			name = "sendrecv"
		}
		found := false
		for n := range collectives {
			if strings.ReplaceAll(n, "_", "") == name {
				found = true
			}
		}
		if !found {
			missing = append(missing, op)
		}
	}
	return missing
}

// hotPathOps is every operation of trace that the binding's collectives
// and point-to-point calls record: collectives carrying data, Send, Recv.
func hotPathOps() []string {
	var ops []string
	for o := trace.Op(1); !strings.HasPrefix(o.String(), "Op("); o++ {
		if (o.Class() == trace.Collective && o.HasData()) || o == trace.Send || o == trace.Recv {
			ops = append(ops, o.String())
		}
	}
	return ops
}

// Step 9 of the root package's collKind checklist.
func TestEveryCollectiveHasATest(t *testing.T) {
	ops := hotPathOps()
	if len(ops) < 10 {
		t.Fatalf("trace lists %d hot-path operations: %v", len(ops), ops)
	}
	if m := missingTests(ops); len(m) != 0 {
		t.Errorf("no perf test for %v (add it, or exempt it here with nccl-tests' reason)", m)
	}
	// The check fires for a collective perf does not know.
	if m := missingTests(append(ops, "AllPermute")); !slices.Equal(m, []string{"AllPermute"}) {
		t.Errorf("a pretend AllPermute: missing %v", m)
	}
}

// Every data type of the module has one nccl-tests name, sizes come from
// the module (DataType.Size), and the float types have a bit layout.
func TestEveryDataTypeHasANcclTestsName(t *testing.T) {
	seen := map[nccl.DataType]string{}
	for _, ty := range types {
		if !ty.dt.Valid() {
			t.Errorf("%s: %v is not a data type", ty.name, ty.dt)
		}
		if prev, dup := seen[ty.dt]; dup {
			t.Errorf("%v is both %s and %s", ty.dt, prev, ty.name)
		}
		seen[ty.dt] = ty.name
	}
	for dt := nccl.DataType(0); dt.Valid(); dt++ {
		if _, ok := seen[dt]; !ok {
			t.Errorf("%v has no nccl-tests name in types", dt)
		}
		_, float := layoutOf(dt)
		if isFloat := strings.Contains(dt.String(), "float"); float != isFloat {
			t.Errorf("%v: layoutOf says float %v", dt, float)
		}
		if _, err := newPreMulSum(nil, dt, 1); err != nil && strings.Contains(err.Error(), "no PreMulSum") {
			t.Errorf("%v: %v", dt, err)
		}
	}
}

package nccl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/trace"
)

// One data type enum (cuda.DType, which DataType is) and one reduction
// operator enum (RedOp); the flight recorder, which imports no cgo
// package, keeps both in a byte with its own names. These tests fail when
// a value is added on one side only.

func TestTraceVocabulary(t *testing.T) {
	n := 0
	for dt := DataType(0); dt.Valid(); dt++ {
		n++
		rt := recType(dt)
		if rt.String() != dt.String() || rt.Size() != dt.Size() || dt.Size() == 0 {
			t.Errorf("%s (size %d): the recorder says %q (size %d)", dt, dt.Size(), rt, rt.Size())
		}
		if back, ok := trace.ParseDataType(dt.String()); !ok || back != rt {
			t.Errorf("trace.ParseDataType(%q) = %v, %v", dt, back, ok)
		}
		if dataTypeSince(dt) < MinRelease || isFloat8(dt) != strings.HasPrefix(dt.String(), "float8") {
			t.Errorf("%s: since %s, isFloat8 %v", dt, dataTypeSince(dt), isFloat8(dt))
		}
		if c := dataTypeCName(dt); !strings.EqualFold(c, "nccl"+dt.String()) {
			t.Errorf("%s: C name %q", dt, c)
		}
	}
	if n != 12 {
		t.Errorf("%d data types, want NCCL's 12", n)
	}
	// A value the root does not know is unknown to the recorder too.
	if rt := recType(DataType(n)); rt.Size() != 0 || !strings.HasPrefix(rt.String(), "DataType(") {
		t.Errorf("the recorder knows %v (size %d), which DataType does not", rt, rt.Size())
	}

	for o := RedOp(0); o < numBuiltinOps; o++ {
		ro := recOp(o)
		if !ro.Builtin() || !strings.EqualFold("nccl"+ro.String(), o.String()) {
			t.Errorf("%s: the recorder says %q (builtin %v)", o, ro, ro.Builtin())
		}
		if back, ok := trace.ParseRedOp(ro.String()); !ok || back != ro {
			t.Errorf("trace.ParseRedOp(%q) = %v, %v", ro, back, ok)
		}
	}
	for _, o := range []RedOp{numBuiltinOps, 255, 256, 1 << 20} {
		if ro := recOp(o); ro.Builtin() || o.Builtin() {
			t.Errorf("custom operator %d: recorded as %v (builtin %v)", int32(o), ro, ro.Builtin())
		}
	}
}

// The element types of device memory are NCCL's: DataTypeOf's cast is gone,
// a Slice's DType is a DataType.
func TestSliceTypeIsDataType(t *testing.T) {
	var dt DataType = cuda.DTypeOf[cuda.BFloat16]()
	if dt != BFloat16 || BufferOf(cuda.Slice[float32]{}).Type != Float32 {
		t.Errorf("DTypeOf[BFloat16] = %v; want %v", dt, BFloat16)
	}
}

// dtypeConsts is the names of the constants of the const block of file
// whose first constant is first, and the cuda.X each one's value names
// (empty for other values).
func dtypeConsts(t *testing.T, file, first string) (names, values []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) == 0 || g.Specs[0].(*ast.ValueSpec).Names[0].Name != first {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			v := ""
			if len(vs.Values) == 1 {
				if sel, ok := vs.Values[0].(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cuda" {
						v = sel.Sel.Name
					}
				}
			}
			names, values = append(names, vs.Names[0].Name), append(values, v)
		}
	}
	return names, values
}

// Every cuda.DType constant is re-exported by this package, under the name
// NCCL's users know, in cuda's order.
func TestDataTypesReexported(t *testing.T) {
	cudaNames, _ := dtypeConsts(t, "cuda/dtype.go", "Int8")
	_, reexported := dtypeConsts(t, "types.go", "Int8")
	if len(cudaNames) != 12 || !slices.Equal(cudaNames, reexported) {
		t.Errorf("cuda's DType constants %v, re-exported %v", cudaNames, reexported)
	}
}

// The recorder's operations split into those queued on a CUDA stream
// (collectives and point-to-point calls: they carry data or pair ranks)
// and lifecycle ones (lifecycleOps), which run in NCCL's call on no stream.
// A new operation of trace is classified here or this test fails.
func TestLifecycleOpsCoverTrace(t *testing.T) {
	n := 0
	for o := trace.Op(1); !strings.HasPrefix(o.String(), "Op("); o++ {
		n++
		onStream := o.HasData() || o.Class() == trace.PointToPoint
		if lifecycleOps[o] == onStream {
			t.Errorf("%v: lifecycleOps says %v, but it runs on a stream: %v", o, lifecycleOps[o], onStream)
		}
	}
	if n < 21 {
		t.Errorf("trace names %d operations", n)
	}
}

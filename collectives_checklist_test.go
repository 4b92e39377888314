package nccl

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// The checklist of collKind's comment, one check per step. Step 1 (a kind
// without a row) fails the build; step 9 (perf) is perf's
// TestEveryCollectiveHasATest. Each check returns the problems it finds,
// so that TestCollectiveChecklistCatchesOmissions can run it on a pretend
// kind and see it fire.

// checkRow is one kind and its row, as the checks see it.
type checkRow struct {
	kind collKind
	info collInfo
}

func realRows() []checkRow {
	rows := make([]checkRow, 0, numKinds)
	for k := range numKinds {
		rows = append(rows, checkRow{k, colls[k]})
	}
	return rows
}

// checkTraceOps is step 2: each row's recorder operation exists, names the
// call, is matched across ranks as a collective or point-to-point call,
// carries data, and belongs to one row only.
func checkTraceOps(rows []checkRow) (problems []string) {
	seen := map[trace.Op]collKind{}
	for _, r := range rows {
		op := r.info.op
		if strings.HasPrefix(op.String(), "Op(") || op.String() == "" {
			problems = append(problems, fmt.Sprintf("step 2: kind %d: %v is not an operation of trace/op.go", r.kind, op))
			continue
		}
		if c := op.Class(); c != trace.Collective && c != trace.PointToPoint {
			problems = append(problems, fmt.Sprintf("step 2: %v: class %v, want collective or p2p", op, c))
		}
		if !op.HasData() {
			problems = append(problems, fmt.Sprintf("step 2: %v: trace says it carries no data", op))
		}
		if k, dup := seen[op]; dup {
			problems = append(problems, fmt.Sprintf("step 2: kinds %d and %d are both %v", k, r.kind, op))
		}
		seen[op] = r.kind
		if r.info.name != op.String() {
			problems = append(problems, fmt.Sprintf("step 2: kind %d: name %q, its operation says %q", r.kind, r.info.name, op))
		}
	}
	return problems
}

// checkSymbols is step 3: each row's C function is in the shim's list and
// is the operation's NCCL function (the names agree but for case:
// ncclAlltoAll).
func checkSymbols(rows []checkRow) (problems []string) {
	for _, r := range rows {
		if uint(r.info.sym) >= capi.NumSyms {
			problems = append(problems, fmt.Sprintf("step 3: %s: %v is not in internal/capi's list", r.info.name, r.info.sym))
			continue
		}
		if fn := r.info.sym.String(); !strings.EqualFold(fn, "nccl"+r.info.name) || r.info.fn != fn {
			problems = append(problems, fmt.Sprintf("step 3: %s: C function %s (%q), want nccl%s", r.info.name, fn, r.info.fn, r.info.name))
		}
	}
	return problems
}

// methodDocs is every Communicator method's doc comment, by name.
func methodDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Communicator" {
					docs[fd.Name.Name] = fd.Doc.Text()
				}
			}
		}
	}
	return docs
}

// checkMethods is step 6: a Communicator method named as the operation,
// whose doc names the C function.
func checkMethods(rows []checkRow, docs map[string]string) (problems []string) {
	ct := reflect.TypeFor[*Communicator]()
	for _, r := range rows {
		if _, ok := ct.MethodByName(r.info.name); !ok {
			problems = append(problems, fmt.Sprintf("step 6: no method Communicator.%s", r.info.name))
			continue
		}
		if !strings.Contains(docs[r.info.name], "("+r.info.fn+")") {
			problems = append(problems, fmt.Sprintf("step 6: the doc of Communicator.%s does not name (%s)", r.info.name, r.info.fn))
		}
	}
	return problems
}

// checkFake is step 7: the fake NCCL defines the C function.
func checkFake(rows []checkRow, fake string) (problems []string) {
	for _, r := range rows {
		if !strings.Contains(fake, "EXPORT int "+r.info.fn+"(") {
			problems = append(problems, fmt.Sprintf("step 7: the fake NCCL has no %s", r.info.fn))
		}
	}
	return problems
}

// checkReadme is step 8: README's table has the row of each kind, first
// release included ("any" for one every loadable NCCL has).
func checkReadme(rows []checkRow, readme string) (problems []string) {
	for _, r := range rows {
		since := "?"
		if uint(r.info.sym) < capi.NumSyms {
			since = "any"
			if s := Release(capi.SymSince[r.info.sym]); s > MinRelease {
				since = s.String()
			}
		}
		row := fmt.Sprintf("| `%s` | `%s` | %s |", r.info.name, r.info.fn, since)
		if !strings.Contains(readme, row) {
			problems = append(problems, fmt.Sprintf("step 8: README.md lacks the row %s", row))
		}
	}
	return problems
}

// checkCalls is steps 4, 5 and 7's behaviour, in a fake-library child: a
// call with buffers that fit no rule is refused by validateLocked (an
// *ArgError, no C call), and a good call (one of three shapes: n, n; 1, n;
// n, 1 elements, root or peer 1) reaches the C function and returns nil.
// c is rank 0 of 2.
func checkCalls(t *testing.T, c *Communicator, rows []checkRow) (problems []string) {
	s2, s1 := collAlloc(t, 2), collAlloc(t, 1)
	r2, r1 := collAlloc(t, 2), collAlloc(t, 1)
	for _, r := range rows {
		call := func(send, recv Buffer) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("run panicked: %v", p)
				}
			}()
			return c.run(&collCall{kind: r.kind, send: send, recv: recv, op: Sum, root: 1})
		}
		var ae *ArgError
		if err := call(Buffer{}, Buffer{}); !errors.As(err, &ae) {
			problems = append(problems, fmt.Sprintf("step 5: kind %d (%s): zero buffers gave %v, want validateLocked's *ArgError", r.kind, r.info.name, err))
		}
		before := faketest.Calls(t, r.info.fn)
		var errs []error
		ok := false
		for _, sh := range [][2]Buffer{{s2, r2}, {s1, r2}, {s2, r1}} {
			err := call(sh[0], sh[1])
			if err == nil {
				ok = true
				break
			}
			errs = append(errs, err)
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("steps 4, 5: kind %d (%s): no good call went through: %v", r.kind, r.info.name, errors.Join(errs...)))
		case faketest.Calls(t, r.info.fn) != before+1:
			problems = append(problems, fmt.Sprintf("step 4: kind %d (%s): run did not call %s", r.kind, r.info.name, r.info.fn))
		}
	}
	return problems
}

func collAlloc(t *testing.T, n int) Buffer {
	t.Helper()
	s, err := cuda.Alloc[float32](0, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Free() })
	return BufferOf(s)
}

// staticChecks runs the checks that need no library.
func staticChecks(t *testing.T, rows []checkRow) []string {
	fake, err := os.ReadFile("internal/faketest/testdata/fakenccl.c")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var p []string
	p = append(p, checkTraceOps(rows)...)
	p = append(p, checkSymbols(rows)...)
	p = append(p, checkMethods(rows, methodDocs(t))...)
	p = append(p, checkFake(rows, string(fake))...)
	p = append(p, checkReadme(rows, string(readme))...)
	return p
}

// twoRankComm is rank 0 of a two-rank fake communicator.
func twoRankComm(t *testing.T) *Communicator {
	t.Helper()
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Init(2, 0, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort() })
	return c
}

func TestCollectiveChecklist(t *testing.T) {
	if !faketest.InChild() {
		for _, p := range staticChecks(t, realRows()) {
			t.Error(p)
		}
	}
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		for _, p := range checkCalls(t, twoRankComm(t), realRows()) {
			t.Error(p)
		}
	})
}

// pretend is a collective added to the kinds and nowhere else: a kind past
// the last, a row naming an operation trace does not have and a C function
// the shim does not list.
var pretend = checkRow{kind: numKinds, info: collInfo{op: trace.Op(200), sym: capi.NumSyms, name: "AllPermute", fn: "ncclAllPermute"}}

// Adding a kind and forgetting every other step: each check fires, once.
func TestCollectiveChecklistCatchesOmissions(t *testing.T) {
	if !faketest.InChild() {
		got := staticChecks(t, []checkRow{pretend})
		want := []string{
			"step 2: kind 10: Op(200) is not an operation of trace/op.go",
			"step 3: AllPermute: Sym(" + fmt.Sprint(int(capi.NumSyms)) + ") is not in internal/capi's list",
			"step 6: no method Communicator.AllPermute",
			"step 7: the fake NCCL has no ncclAllPermute",
			"step 8: README.md lacks the row | `AllPermute` | `ncclAllPermute` | ? |",
		}
		if !slices.Equal(got, want) {
			t.Errorf("the checks found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
		// A row with a real operation and C function, but the wrong ones
		// for its name, and a second row for an operation already taken.
		mixed := []checkRow{
			{kAllReduce, colls[kAllReduce]},
			{numKinds, collInfo{op: trace.AllReduce, sym: capi.SymBroadcast, name: "AllReduce", fn: "ncclBroadcast"}},
			{numKinds + 1, collInfo{op: trace.Signal, sym: capi.SymSignal, name: "Signal", fn: "ncclSignal"}},
		}
		got = append(checkTraceOps(mixed), checkSymbols(mixed)...)
		want = []string{
			"step 2: kinds 0 and 10 are both AllReduce",
			"step 2: Signal: trace says it carries no data",
			"step 3: AllReduce: C function ncclBroadcast (\"ncclBroadcast\"), want ncclAllReduce",
		}
		if !slices.Equal(got, want) {
			t.Errorf("the checks found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		got := checkCalls(t, twoRankComm(t), []checkRow{pretend})
		if len(got) != 2 || !strings.HasPrefix(got[0], "step 5: kind 10 (AllPermute)") || !strings.HasPrefix(got[1], "steps 4, 5: kind 10 (AllPermute): no good call") {
			t.Errorf("checkCalls on the pretend kind found %q, want steps 5 and 4 to fire", got)
		}
	})
}

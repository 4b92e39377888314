package nccl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The wait protocol has one place (call.go's header): no loop outside
// retry waits on a communicator (awaitPending, wait's own half for a
// pending child, waits on the parent), and only start and call run
// attempt, so no caller spells the retry(attempt(...)) pair itself.
func TestOneWaitProtocol(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	loopsWaiting := map[string]bool{"retry": true, "awaitPending": true}
	runsAttempt := map[string]bool{"start": true, "call": true}
	called := func(n ast.Node, name string) bool {
		found := false
		ast.Inspect(n, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == name {
					found = true
				}
			}
			return !found
		})
		return found
	}
	checked := 0
	for _, f := range pkgs["nccl"].Files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			name := fn.Name.Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if loop, ok := n.(*ast.ForStmt); ok && !loopsWaiting[name] && (called(loop.Body, "wait") || called(loop.Body, "retry")) {
					t.Errorf("%s: %s has a wait loop of its own: use retry (call.go)", fset.Position(loop.Pos()), name)
				}
				return true
			})
			if !runsAttempt[name] && called(fn.Body, "attempt") {
				t.Errorf("%s: %s calls attempt: use start or call (call.go)", fset.Position(fn.Pos()), name)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d functions: the parse missed the package", checked)
	}
}

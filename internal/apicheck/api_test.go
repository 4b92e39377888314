package apicheck

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the api/*.txt allowlists from the source")

// root is the module's root directory, seen from this package's.
const root = "../.."

// TestAPI fails when a public package exports an identifier its allowlist
// (api/PKG.txt) does not name, or no longer exports one it names. An
// export that only sibling packages call belongs under internal/ (see
// internal/cudabridge); one that users call goes into the list, with a
// reason in the review. go test ./internal/apicheck -update rewrites the
// lists from the source.
func TestAPI(t *testing.T) {
	pkgs, err := publicPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no public packages found")
	}
	names := map[string]bool{}
	for _, dir := range pkgs {
		name := listName(dir)
		names[name+".txt"] = true
		got, err := exported(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, "api", name+".txt")
		if *update {
			text := fmt.Sprintf("# Public API of %s: every exported identifier, one a line.\n# Checked by internal/apicheck; see its TestAPI.\n%s\n", importPath(dir), strings.Join(got, "\n"))
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := readList(path)
		if err != nil {
			t.Errorf("%s: %v (a new public package needs its allowlist: go test ./internal/apicheck -update, then review it)", importPath(dir), err)
			continue
		}
		for _, id := range got {
			if !slices.Contains(want, id) {
				t.Errorf("%s exports %q, which api/%s.txt does not allow: move it under internal/ if only this module calls it, or add it to the list if users call it", importPath(dir), id, name)
			}
		}
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Errorf("%s no longer exports %q: remove it from api/%s.txt", importPath(dir), id, name)
			}
		}
	}
	if *update {
		return
	}
	lists, err := filepath.Glob(filepath.Join(root, "api", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		if !names[filepath.Base(l)] {
			t.Errorf("%s names no public package: remove it", l)
		}
	}
}

// TestExportedSeesEveryKind: the lister reports each kind of exported
// identifier (so an export cannot slip past the allowlist by its kind) and
// no unexported one.
func TestExportedSeesEveryKind(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const C, c = 1, 2
var V, v int
type T struct {
	F int
	f int
	Embedded
	*Ptr
}
type Embedded struct{}
type Ptr struct{}
type I interface {
	M()
	m()
}
type t struct{ G int }
func F() {}
func f() {}
func (T) M() {}
func (*T) P() {}
func (T) m() {}
func (t) X() {}
func G[E any](e E) {}
type S[E any] []E
func (S[E]) Len() int { return 0 }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Test files are not API.
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\nfunc Test() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exported(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"const C", "field T.Embedded", "field T.F", "field T.Ptr", "func F", "func G",
		"method I.M", "method S.Len", "method T.M", "method T.P",
		"type Embedded", "type I", "type Ptr", "type S", "type T", "var V",
	}
	if !slices.Equal(got, want) {
		t.Errorf("exported =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// publicPackages lists the module's directories (relative to root) that
// hold an importable, non-internal package: not internal/, testdata/,
// examples/ or a main package.
func publicPackages(root string) ([]string, error) {
	all, err := goDirs(root, "internal", "examples")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, dir := range all {
		name, err := packageName(dir)
		if err != nil {
			return nil, err
		}
		if name != "main" {
			rel, _ := filepath.Rel(root, dir)
			dirs = append(dirs, rel)
		}
	}
	return dirs, nil
}

// packageName is the package of the non-test Go files in dir ("" for none).
func packageName(dir string) (string, error) {
	files, err := goFiles(dir)
	if err != nil || len(files) == 0 {
		return "", err
	}
	f, err := parser.ParseFile(token.NewFileSet(), files[0], nil, parser.PackageClauseOnly)
	if err != nil {
		return "", err
	}
	return f.Name.Name, nil
}

func goFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files, nil
}

// exported lists the exported identifiers of the package in dir, sorted,
// one "KIND NAME" each: const, var, func, type, method TYPE.NAME (of a
// type's method set or an interface's methods) and field TYPE.NAME. Files
// for every platform count (build constraints are ignored: the API must not
// differ between platforms).
func exported(dir string) ([]string, error) {
	files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	add := func(kind, name string) { set[kind+" "+name] = true }
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add("func", d.Name.Name)
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					add("method", recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						kind := "var"
						if d.Tok == token.CONST {
							kind = "const"
						}
						for _, n := range s.Names {
							if n.IsExported() {
								add(kind, n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						add("type", s.Name.Name)
						members(s.Name.Name, s.Type, add)
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// members adds the exported fields of a struct type and the exported
// methods of an interface type named name.
func members(name string, typ ast.Expr, add func(kind, name string)) {
	switch t := typ.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 { // embedded: named by its type
				if n := recvName(f.Type); ast.IsExported(n) {
					add("field", name+"."+n)
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					add("field", name+"."+n.Name)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					add("method", name+"."+n.Name)
				}
			}
		}
	}
}

// recvName is the type name of a receiver or embedded field: T, *T, T[E],
// pkg.T.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// listName is the allowlist's file name for the package in dir: "nccl"
// for the root, the path with "/" as "-" otherwise.
func listName(dir string) string {
	if dir == "." {
		return "nccl"
	}
	return strings.ReplaceAll(filepath.ToSlash(dir), "/", "-")
}

func importPath(dir string) string {
	const module = "github.com/nccl4go/nccl"
	if dir == "." {
		return module
	}
	return module + "/" + filepath.ToSlash(dir)
}

// readList reads an allowlist: one identifier a line; # starts a comment.
func readList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ids = append(ids, line)
	}
	return ids, nil
}

package apicheck

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/nccl4go/nccl"

// TestDocLinks fails when a doc comment of the module holds a Go doc link
// ([Name], [Type.Method], [pkg.Name]) that names nothing: go vet does not
// check links, and pkg.go.dev shows a dangling one as plain text, so a
// rename would silently unlink the docs. It reads every package of the
// module (internal ones and commands included, tests excluded), treats
// every bracketed exported-looking name as the link go/doc would make of
// it, and resolves it against the declarations of the package it names
// (this module's or the standard library's).
func TestDocLinks(t *testing.T) {
	dirs, err := goDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	idx := newSymIndex()
	n := 0
	for _, dir := range dirs {
		bad, links, err := checkDocLinks(idx, dir)
		if err != nil {
			t.Fatal(err)
		}
		n += links
		for _, b := range bad {
			t.Error(b)
		}
	}
	if n == 0 {
		t.Fatal("no doc links found: the checker reads nothing")
	}
	t.Logf("%d doc links checked in %d packages", n, len(dirs))
}

// TestDocLinksCatchesDangling: the checker flags a link to a name the
// package lacks, a method the type lacks and a name another package lacks,
// and accepts what exists (fields and methods included).
func TestDocLinksCatchesDangling(t *testing.T) {
	dir := t.TempDir()
	src := `// Package p: see [T.M], [T.F], [p.T], [strings.Cut], [Gone], [T.Gone] and [strings.Gone].
package p

import "strings"

// T is a type; [F] makes one. Plain [brackets], [i] and [ARGS] are not links.
type T struct{ F int }

// M returns [T] itself, unlike [T.Renamed].
func (T) M() T { return T{} }

// F uses [strings.Builder].
func F() { _ = strings.Cut }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, links, err := checkDocLinks(newSymIndex(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bad {
		got = append(got, b[strings.LastIndex(b, "[")+1:strings.LastIndex(b, "]")])
	}
	want := []string{"Gone", "T.Gone", "T.Renamed", "strings.Gone"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("flagged %q, want %q", got, want)
	}
	if links != 11 {
		t.Errorf("links = %d, want 11", links)
	}
}

// goDirs lists the module's directories holding non-test Go files, but
// for testdata, hidden ones and those named in skip (with what they hold).
func goDirs(root string, skip ...string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		base := d.Name()
		if p != root && (base == "testdata" || slices.Contains(skip, base) || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
			return filepath.SkipDir
		}
		files, err := goFiles(p)
		if err != nil {
			return err
		}
		if len(files) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs, err
}

// symIndex caches the declared names of packages by import path.
type symIndex struct {
	syms map[string]map[string]bool
}

func newSymIndex() *symIndex { return &symIndex{syms: map[string]map[string]bool{}} }

// of returns the names declared in the package at import path ip: "Name"
// for top-level ones, "Type.Name" for methods, struct fields and interface
// methods. nil when the package cannot be found.
func (x *symIndex) of(ip string) map[string]bool {
	if s, ok := x.syms[ip]; ok {
		return s
	}
	var dir string
	switch {
	case ip == modulePath:
		dir = root
	case strings.HasPrefix(ip, modulePath+"/"):
		dir = filepath.Join(root, strings.TrimPrefix(ip, modulePath+"/"))
	default:
		dir = filepath.Join(runtime.GOROOT(), "src", ip)
	}
	files, _ := parseDir(dir)
	if len(files) == 0 {
		x.syms[ip] = nil
		return nil
	}
	s := declared(files)
	x.syms[ip] = s
	return s
}

func parseDir(dir string) ([]*ast.File, error) {
	paths, err := goFiles(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// declared collects the names a doc link may name in files (all build
// variants together: a link resolves if any variant declares the name).
func declared(files []*ast.File) map[string]bool {
	s := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					s[d.Name.Name] = true
					continue
				}
				s[recvName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						s[sp.Name.Name] = true
						members(sp.Name.Name, sp.Type, func(_, n string) { s[n] = true })
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							s[n.Name] = true
						}
					}
				}
			}
		}
	}
	return s
}

// checkDocLinks parses the package in dir and returns one message per doc
// link that resolves to nothing, and the number of links read.
func checkDocLinks(idx *symIndex, dir string) (bad []string, links int, err error) {
	files, err := parseDir(dir)
	if err != nil || len(files) == 0 {
		return nil, 0, err
	}
	own := declared(files)
	// Imports by name, as go/doc resolves [pkg.Name]: the package's own
	// imports, then this module's packages by their last element.
	imports := map[string]string{}
	for _, f := range files {
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			name := path.Base(ip)
			if im.Name != nil {
				name = im.Name.Name
			}
			if name != "_" && name != "." {
				imports[name] = ip
			}
		}
	}
	p := &comment.Parser{
		LookupPackage: func(name string) (string, bool) {
			if ip, ok := imports[name]; ok {
				return ip, true
			}
			return "", name == files[0].Name.Name // [p.Name] in package p
		},
		// Every exported-looking name is a link candidate, so that a
		// dangling one is seen (go/doc would print it as plain text).
		// An all-capitals word of two letters or more ([GROUP]) is a
		// placeholder in usage text, not a name.
		LookupSym: func(recv, name string) bool {
			placeholder := recv == "" && len(name) > 1 && strings.ToUpper(name) == name
			return token.IsExported(name) && !placeholder
		},
	}
	var docs []*ast.CommentGroup
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.File:
				docs = append(docs, n.Doc)
			case *ast.GenDecl:
				docs = append(docs, n.Doc)
			case *ast.FuncDecl:
				docs = append(docs, n.Doc)
				return false
			case *ast.TypeSpec:
				docs = append(docs, n.Doc)
			case *ast.ValueSpec:
				docs = append(docs, n.Doc)
			case *ast.Field:
				docs = append(docs, n.Doc)
			}
			return true
		})
	}
	seen := map[string]bool{}
	for _, g := range docs {
		if g == nil {
			continue
		}
		d := p.Parse(g.Text())
		var walk func(ts []comment.Text)
		walk = func(ts []comment.Text) {
			for _, t := range ts {
				switch t := t.(type) {
				case *comment.DocLink:
					links++
					name := t.Name
					if t.Recv != "" {
						name = t.Recv + "." + t.Name
					}
					ok := false
					switch {
					case t.ImportPath == "":
						ok = own[name]
					default:
						s := idx.of(t.ImportPath)
						ok = s != nil && (name == "" || s[name])
					}
					if !ok {
						shown := name
						if t.ImportPath != "" {
							shown = path.Base(t.ImportPath) + "." + name
						}
						msg := fmt.Sprintf("%s: doc link [%s] names nothing", relDir(dir), shown)
						if !seen[msg] {
							seen[msg] = true
							bad = append(bad, msg)
						}
					}
				case *comment.Link:
					walk(t.Text)
				case *comment.Italic, comment.Plain:
				}
			}
		}
		for _, b := range d.Content {
			switch b := b.(type) {
			case *comment.Paragraph:
				walk(b.Text)
			case *comment.Heading:
				walk(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					for _, c := range it.Content {
						if para, ok := c.(*comment.Paragraph); ok {
							walk(para.Text)
						}
					}
				}
			}
		}
	}
	sort.Strings(bad)
	return bad, links, nil
}

func relDir(dir string) string {
	r, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(r, "..") {
		return filepath.Base(dir)
	}
	return r
}

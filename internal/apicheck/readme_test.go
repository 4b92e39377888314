package apicheck

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestREADMESnippets type-checks every ```go block of the READMEs against
// the module as it is, so that a snippet cannot name a function, method,
// field or constant that was renamed or removed, nor call one with the
// wrong arguments. A snippet is a fragment: its statements become the body
// of a function returning error, with the imports it names (its own import
// block, or those of the package names it uses). Its free variables (nranks,
// buf, ...) are undefined on purpose: errors about them and about unused
// variables are ignored, every other error fails.
func TestREADMESnippets(t *testing.T) {
	readmes, _ := filepath.Glob(filepath.Join(root, "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "README.md"))
	readmes = append(readmes, more...)
	n := 0
	for _, path := range readmes {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range goBlocks(string(src)) {
			n++
			for _, e := range checkSnippet(t, b.text) {
				t.Errorf("%s:%d: %s", relDir(path), b.line, e)
			}
		}
	}
	if n == 0 {
		t.Fatal("no ```go blocks found in the READMEs")
	}
	t.Logf("%d snippets checked", n)
}

// TestREADMESnippetsCatchesRenames: the check fails a snippet that calls a
// function the module lacks or passes a wrong argument, and passes one whose
// only problems are its free variables.
func TestREADMESnippetsCatchesRenames(t *testing.T) {
	for src, want := range map[string]int{
		"c, err := nccl.Init(nranks, rank, id, nil)\n_ = c\nreturn err":                0,
		"c, _ := nccl.Init(nranks, rank, id, nil)\n_ = c.Ptr()":                        1,
		"_ = nccl.NoSuchFunction()":                                                    1,
		"_, err := nccl.Init(\"four\", rank, id, nil)\nreturn err":                     1,
		"for step := range steps {\n\tif err := comm.Wait(ctx); err != nil { ... }\n}": 0,
	} {
		if got := checkSnippet(t, src); len(got) != want {
			t.Errorf("snippet\n%s\ngave %d errors %q, want %d", src, len(got), got, want)
		}
	}
}

type block struct {
	line int
	text string
}

func goBlocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		out = append(out, block{start + 1, strings.Join(lines[start:i], "\n")})
	}
	return out
}

var (
	importBlock = regexp.MustCompile(`(?s)^\s*import \((.*?)\)\n`)
	pkgUse      = regexp.MustCompile(`\b(nccl|cuda|rendezvous|perf|watchdog|trace|nvrtc|devapi|context|time|log|fmt|os|errors)\.`)
	stdPath     = map[string]string{"context": "context", "time": "time", "log": "log", "fmt": "fmt", "os": "os", "errors": "errors"}
	// Errors a fragment has by being one.
	fragmentErr = regexp.MustCompile(`^(undefined: [a-z]\w*|declared and not used: \w+|\w+ declared and not used)$`)
)

// checkSnippet type-checks one snippet and returns its errors, less those
// a fragment has by being one.
func checkSnippet(t *testing.T, snippet string) []string {
	t.Helper()
	body := strings.ReplaceAll(snippet, "{ ... }", "{}")
	imports := map[string]bool{}
	if m := importBlock.FindStringSubmatch(body); m != nil {
		for _, l := range strings.Fields(m[1]) {
			imports[l] = true
		}
		body = body[len(m[0]):]
	}
	for _, m := range pkgUse.FindAllStringSubmatch(body, -1) {
		p, ok := stdPath[m[1]]
		if !ok {
			p = modulePath + "/" + m[1]
			if m[1] == "nccl" {
				p = modulePath
			}
		}
		imports[`"`+p+`"`] = true
	}
	var src strings.Builder
	src.WriteString("package snippet\n\n")
	for im := range imports {
		p := strings.Trim(im, `"`)
		name := filepath.Base(p)
		if p == modulePath {
			name = "nccl"
		}
		src.WriteString("import " + name + " " + im + "\n")
	}
	src.WriteString("\nfunc _() error {\n" + body + "\nreturn nil\n}\n")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "readme_snippet.go", src.String(), 0)
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	imp, err := exportImporter(fset)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			msg := err.(types.Error).Msg
			if !fragmentErr.MatchString(msg) && !strings.Contains(msg, "imported and not used") {
				errs = append(errs, msg)
			}
		},
	}
	conf.Check("snippet", fset, []*ast.File{f}, nil)
	return errs
}

var exports struct {
	sync.Once
	files map[string]string // import path -> export data file
	err   error
}

// exportImporter imports the module's packages and their dependencies from
// the export data the go command builds (go list -export, from the build
// cache), once per test binary.
func exportImporter(fset *token.FileSet) (types.Importer, error) {
	exports.Do(func() {
		cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", "./...")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			exports.err = fmt.Errorf("go list -export: %v", err)
			return
		}
		exports.files = map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if ip, file, ok := strings.Cut(l, "="); ok && file != "" {
				exports.files[ip] = file
			}
		}
	})
	if exports.err != nil {
		return nil, exports.err
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports.files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}), nil
}

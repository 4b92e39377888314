package nccl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// readmeTableProblems checks the README's config and window tables: every
// Config field is in a row (the always-there ones in the "any" row), each
// gated one with its C name and its release from the version table; every
// exported WindowFlag constant has a row with its release (the flag's row
// of the table, or RegisterWindow's first release).
func readmeTableProblems(readme string, windowConsts []string) []string {
	var out []string
	s := gatedStructs["ncclConfig_t"]
	for _, f := range versions.Fields("ncclConfig_t") {
		row := fmt.Sprintf("| `%s` | `%s` | %s |", f.Field(), strings.TrimPrefix(f.Name(), "ncclConfig_t."), Release(f.Since()))
		if !strings.Contains(readme, row) {
			out = append(out, "README lacks the config row "+row)
		}
	}
	var always []string
	for _, name := range s.always {
		if name != "Device" { // the binding's own, said in the text
			always = append(always, "`"+name+"`")
		}
	}
	if row := "| " + strings.Join(always, ", ") + " | `blocking` to `splitShare` | any |"; !strings.Contains(readme, row) {
		out = append(out, "README lacks the config row "+row)
	}
	if n := reflect.TypeFor[Config]().NumField(); n != len(s.always)+len(versions.Fields("ncclConfig_t")) {
		out = append(out, fmt.Sprintf("Config has %d fields, the README's table %d", n, len(s.always)+len(versions.Fields("ncclConfig_t"))))
	}
	gated := map[string]versions.Feature{}
	for _, g := range windowFlagGates {
		for _, c := range windowConsts {
			if windowFlagValue(c) == g.flag {
				gated[c] = g.f
			}
		}
	}
	for _, c := range windowConsts {
		cname, since := "NCCL_WIN_DEFAULT", symSince(capi.SymCommWindowRegister)
		switch f, ok := gated[c]; {
		case ok:
			cname, since = f.Name(), Release(f.Since())
		case c == "WindowCollSymmetric":
			cname = "NCCL_WIN_COLL_SYMMETRIC"
		case c != "WindowDefault":
			out = append(out, "window flag "+c+" is neither in every release nor gated by windowFlagGates")
		}
		if row := fmt.Sprintf("| `%s` | `%s` | %s |", c, cname, since); !strings.Contains(readme, row) {
			out = append(out, "README lacks the window row "+row)
		}
	}
	return out
}

// windowFlagValue is the value of the exported WindowFlag constant name.
func windowFlagValue(name string) WindowFlag {
	return map[string]WindowFlag{"WindowDefault": WindowDefault, "WindowCollSymmetric": WindowCollSymmetric,
		"WindowStrictOrdering": WindowStrictOrdering, "WindowGINOnly": WindowGINOnly, "WindowCFTCounted": WindowCFTCounted}[name]
}

// windowFlagConsts are the exported constants of type WindowFlag in window.go.
func windowFlagConsts(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "window.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "WindowFlag" {
				continue
			}
			for _, n := range vs.Names {
				if n.IsExported() {
					out = append(out, n.Name)
				}
			}
		}
	}
	return out
}

// The README's tables of Config fields and window flags list every one
// with the release the version table gives.
func TestREADMEConfigAndWindowTables(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	consts := windowFlagConsts(t)
	if len(consts) != 5 {
		t.Errorf("window.go's WindowFlag constants: %q", consts)
	}
	for _, c := range consts {
		if _, ok := map[string]bool{"WindowDefault": true}[c]; !ok && windowFlagValue(c) == 0 {
			t.Errorf("windowFlagValue does not know %s", c)
		}
	}
	for _, p := range readmeTableProblems(string(readme), consts) {
		t.Error(p)
	}
	// The check catches a missing row and a wrong release.
	broken := strings.Replace(string(readme), "| `NVLSHostMode` | `nvlsHostMode` | 2.32.3 |", "| `NVLSHostMode` | `nvlsHostMode` | 2.32.0 |", 1)
	broken = strings.Replace(broken, "| `WindowGINOnly` | `NCCL_WIN_GIN_ONLY` | 2.32.3 |\n", "", 1)
	if p := readmeTableProblems(broken, consts); len(p) != 2 {
		t.Errorf("a wrong release and a missing row gave %q, want 2 problems", p)
	}
}

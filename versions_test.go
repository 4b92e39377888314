package nccl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// The checklist of a release's new struct field: a row in the version table
// of internal/versions naming the Go field, the Go field documented with the
// row's release, shim.h's struct comment with the same release, and the code
// that encodes it. These tests fail for each part left out.

// A struct of the binding whose fields newer than the struct itself are
// gated by rows of the version table.
type gatedStruct struct {
	typ   reflect.Type
	file  string // the Go file declaring it
	floor Release
	// always are the fields every release that can use the struct has (or
	// the binding's own, such as Config.Device): they need no row. New
	// fields are newer than the floor, so this list does not grow.
	always []string
}

var gatedStructs = map[string]gatedStruct{
	// Config: every supported release; blocking to splitShare came before
	// the oldest supported release.
	"ncclConfig_t": {reflect.TypeFor[Config](), "config.go", MinRelease,
		[]string{"Device", "Blocking", "CGAClusterSize", "MinCTAs", "MaxCTAs", "NetName", "SplitShare"}},
	// DevCommRequirements: from ncclDevCommCreate's first release.
	"ncclDevCommRequirements_t": {reflect.TypeFor[DevCommRequirements](), "devcomm.go", symSince(capi.SymDevCommCreate),
		[]string{"LSAMultimem", "LSABarrierCount", "Resources", "Teams"}},
	// Properties: from ncclCommQueryProperties' first release.
	"ncclCommProperties_t": {reflect.TypeFor[Properties](), "properties.go", symSince(capi.SymCommQueryProperties),
		[]string{"Rank", "NRanks", "CUDADevice", "NVMLDevice", "DeviceAPISupport", "MultimemSupport", "GINType", "Declared"}},
	// CollConfig: from the nccl*Config functions' first release.
	"ncclCollConfig_t": {reflect.TypeFor[CollConfig](), "collconfig.go", symSince(capi.SymAllReduceConfig),
		[]string{"MinCTAs", "MaxCTAs", "NVLSCTAs", "CGAClusterSize", "Ext"}},
}

// rowsOf is the version table's rows for C struct name, in table order.
func rowsOf(name string) []versions.Row {
	var out []versions.Row
	for _, f := range versions.Fields(name) {
		out = append(out, versions.Table[f])
	}
	return out
}

// gateProblems checks that rows gate struct typ completely: every field is
// in always or named by exactly one row, every row names a field that is
// not in always, and rows follow the struct's field order with releases
// that never decrease (a versioned struct grows at its end).
func gateProblems(typ reflect.Type, rows []versions.Row, always []string) []string {
	var out []string
	named := map[string]int{}
	last, lastRelease := -1, 0
	for _, row := range rows {
		named[row.Field]++
		sf, ok := typ.FieldByName(row.Field)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("row %s names %s.%s, which does not exist", row.Name, typ.Name(), row.Field))
			continue
		case slices.Contains(always, row.Field):
			out = append(out, fmt.Sprintf("row %s gates %s.%s, which is listed as in every release", row.Name, typ.Name(), row.Field))
		}
		if sf.Index[0] <= last || row.Since < lastRelease {
			out = append(out, fmt.Sprintf("row %s (%s.%s, %d) is out of order: rows follow the struct's fields, releases never decrease",
				row.Name, typ.Name(), row.Field, row.Since))
		}
		last, lastRelease = sf.Index[0], row.Since
	}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		switch n := named[name]; {
		case n == 0 && !slices.Contains(always, name):
			out = append(out, fmt.Sprintf("%s.%s has no row in the version table (internal/versions)", typ.Name(), name))
		case n > 1:
			out = append(out, fmt.Sprintf("%s.%s has %d rows", typ.Name(), name, n))
		}
	}
	for _, name := range always {
		if _, ok := typ.FieldByName(name); !ok {
			out = append(out, fmt.Sprintf("%s.%s, listed as in every release, does not exist", typ.Name(), name))
		}
	}
	return out
}

// Every field of Config, DevCommRequirements and Properties is gated by a
// row of the version table or is in every release that can use the
// struct; the encoder binds every row.
func TestStructGatesComplete(t *testing.T) {
	for name, s := range gatedStructs {
		for _, p := range gateProblems(s.typ, rowsOf(name), s.always) {
			t.Error(p)
		}
		if got, want := len(gatesOf(s.typ)), len(versions.Fields(name)); got != want {
			t.Errorf("%s: checkFields binds %d rows of %d", name, got, want)
		}
	}
	for f := range versions.NumFeatures {
		if s := versions.Table[f].Struct(); s != "" {
			if _, ok := gatedStructs[s]; !ok {
				t.Errorf("row %s: no struct of the binding carries %s", versions.Table[f].Name, s)
			}
		}
	}
}

// The checklist catches each omission: a new field without a row, a row
// without a field, rows out of order. (A test-only extension of Config and
// of the table, as a 2.31 field would add them.)
func TestStructGatesCatchOmissions(t *testing.T) {
	s := gatedStructs["ncclConfig_t"]
	rows := rowsOf("ncclConfig_t")
	var fields []reflect.StructField
	for i := range s.typ.NumField() {
		fields = append(fields, s.typ.Field(i))
	}
	withNew := reflect.StructOf(append(fields, reflect.StructField{Name: "NewField", Type: reflect.TypeFor[*int]()}))
	newRow := versions.Row{Name: "ncclConfig_t.newField", Since: 23300, Field: "NewField"}

	want := func(what string, problems []string, substr string) {
		t.Helper()
		for _, p := range problems {
			if strings.Contains(p, substr) {
				return
			}
		}
		t.Errorf("%s: no problem reported containing %q (got %q)", what, substr, problems)
	}
	want("a field without a row", gateProblems(withNew, rows, s.always), ".NewField has no row")
	want("a row without a field", gateProblems(s.typ, append(slices.Clone(rows), newRow), s.always), "NewField, which does not exist")
	swapped := slices.Clone(rows)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	want("rows out of order", gateProblems(s.typ, swapped, s.always), "out of order")
	older := append(slices.Clone(rows), versions.Row{Name: "ncclConfig_t.newField", Since: 22000, Field: "NewField"})
	want("a row older than the one before", gateProblems(withNew, older, s.always), "out of order")
	dup := append(slices.Clone(rows), rows[len(rows)-1])
	want("two rows for a field", gateProblems(s.typ, dup, s.always), "has 2 rows")
	if p := gateProblems(withNew, append(slices.Clone(rows), newRow), s.always); len(p) != 0 {
		t.Errorf("the new field with its row: %q", p)
	}
}

// Every row's release is newer than what already gates its use (the
// oldest supported release, or the function of the struct) and no newer
// than the ABI the binding declares: a row that cannot fail, or a field the
// binding never declares to NCCL, is an error.
func TestVersionTableRows(t *testing.T) {
	for f := range versions.NumFeatures {
		row := versions.Table[f]
		floor := MinRelease
		if s, ok := gatedStructs[row.Struct()]; ok {
			floor = s.floor
		}
		if row.Name == "" || Release(row.Since) <= floor || Release(row.Since) > ABIRelease {
			t.Errorf("feature %d %q: release %d, want in (%s, %s]", f, row.Name, row.Since, floor, ABIRelease)
		}
	}
	if got := symSince(capi.SymCommShrink); got != 22703 {
		t.Errorf("ncclCommShrink since %s, want 2.27.3", got)
	}
	if capi.SymName[capi.SymCommShrink] != "ncclCommShrink" {
		t.Errorf("SymName[SymCommShrink] = %q", capi.SymName[capi.SymCommShrink])
	}
}

// The layout tables start with their function (ncclDevCommCreate,
// ncclCommQueryProperties), follow each other in release order, none is
// newer than the declared ABI, and their sizes are the shim's.
func TestLayoutTables(t *testing.T) {
	ls := versions.DevCommLayouts
	if Release(ls[0].From) != symSince(capi.SymDevCommCreate) {
		t.Errorf("first layout from %d, ncclDevCommCreate from %s", ls[0].From, symSince(capi.SymDevCommCreate))
	}
	for i, l := range ls {
		// DevComm 0: the library reports the size (2.31 on), never before a
		// known size.
		if Release(l.From) > ABIRelease || i > 0 && (l.From <= ls[i-1].From || l.Family < ls[i-1].Family ||
			l.DevComm != 0 && l.DevComm < ls[i-1].DevComm || l.DevComm != 0 && ls[i-1].DevComm == 0) {
			t.Errorf("layout %d %+v out of order", i, l)
		}
	}
	if _, ok := versions.DevCommLayoutFor(int(symSince(capi.SymDevCommCreate)) - 1); ok {
		t.Error("a layout before ncclDevCommCreate")
	}
	ps := versions.PropsLayouts
	if Release(ps[0].From) != symSince(capi.SymCommQueryProperties) {
		t.Errorf("first properties layout from %d, ncclCommQueryProperties from %s", ps[0].From, symSince(capi.SymCommQueryProperties))
	}
	for i, l := range ps {
		if Release(l.From) > ABIRelease || i > 0 && (l.From <= ps[i-1].From || l.Family <= ps[i-1].Family || l.Size <= ps[i-1].Size) {
			t.Errorf("properties layout %d %+v out of order", i, l)
		}
	}
	// Each property field row is read from the first layout that has it.
	for _, f := range versions.Fields("ncclCommProperties_t") {
		if l, _ := versions.PropsLayoutFor(f.Since()); l.From != f.Since() {
			t.Errorf("%s (%d) arrives with no layout of its own (the layout of %d)", f.Name(), f.Since(), l.From)
		}
	}

	// The sizes are the shim's declarations.
	shim := capi.Layouts()
	if shim == nil {
		t.Skip("no cgo: the shim's layouts are not built")
	}
	fixed := map[int]string{capi.ReqsV22803: "ncclDevCommRequirements_t/v22803", capi.ReqsV22807: "ncclDevCommRequirements_t/v22807"}
	versioned := int(shim["ncclDevCommRequirements_t/v23102"].Size)
	for i, l := range ls {
		name, fixedSize := fixed[l.Family]
		switch {
		case fixedSize && l.ReqsSize != int(shim[name].Size):
			t.Errorf("layout %+v: requirements of %d bytes, the shim's %s %d", l, l.ReqsSize, name, shim[name].Size)
		case !fixedSize && (l.ReqsSize > versioned || i == len(ls)-1 && l.ReqsSize != versioned):
			t.Errorf("layout %+v: requirements of %d bytes, the shim's versioned struct %d (the newest layout is all of it)", l, l.ReqsSize, versioned)
		}
		if l.DevComm > int(shim["ncclDevComm_t"].Size) {
			t.Errorf("layout %+v: ncclDevComm_t of %d bytes, the shim holds %d", l, l.DevComm, shim["ncclDevComm_t"].Size)
		}
	}
	for _, l := range ps {
		name := map[int]string{capi.PropsV22902: "ncclCommProperties_t/v22902", capi.PropsV22907: "ncclCommProperties_t/v22907",
			capi.PropsV23100: "ncclCommProperties_t/v23100"}[l.Family]
		if got := int(shim[name].Size); got != l.Size {
			t.Errorf("properties layout %+v: the shim's %s is %d bytes", l, name, got)
		}
	}
}

var releaseAtEnd = regexp.MustCompile(`NCCL (\d+\.\d+\.\d+)\.?\s*$`)

// Each gated field's documentation ends with its row's release; a Config
// field in every supported release names none, and another struct's
// always-there field at most the struct's first release.
func TestStructDocsMatchVersionTable(t *testing.T) {
	for name, s := range gatedStructs {
		f, err := parser.ParseFile(token.NewFileSet(), s.file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		release := map[string]Release{}
		for _, feat := range versions.Fields(name) {
			release[feat.Field()] = Release(feat.Since())
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != s.typ.Name() {
				return true
			}
			found = true
			for _, fld := range ts.Type.(*ast.StructType).Fields.List {
				m := releaseAtEnd.FindStringSubmatch(strings.TrimSpace(fld.Doc.Text()))
				for _, id := range fld.Names {
					want, gated := release[id.Name]
					switch {
					case gated && m == nil:
						t.Errorf("%s.%s: its documentation names no first release (\"NCCL x.y.z.\" at its end)", s.typ.Name(), id.Name)
					case gated && m[1] != want.String():
						t.Errorf("%s.%s documents NCCL %s; the version table says %s", s.typ.Name(), id.Name, m[1], want)
					case !gated && m != nil && (name == "ncclConfig_t" || m[1] != s.floor.String()):
						t.Errorf("%s.%s documents NCCL %s, but it is in every release that can use %s", s.typ.Name(), id.Name, m[1], s.typ.Name())
					}
				}
			}
			return false
		})
		if !found {
			t.Errorf("%s declares no %s", s.file, s.typ.Name())
		}
	}
}

// shim.h's versioned structs comment each field newer than the oldest
// supported release with its release ("// 2.27" or "// 2.30.7 (...)"): the
// table agrees, and every field row has its comment.
func TestShimStructCommentsMatchVersionTable(t *testing.T) {
	var src []byte
	for _, h := range []string{"internal/capi/shim.h", "internal/capi/collconfig.h"} {
		b, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	field := regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_ ]*?\**\s*\*?([a-zA-Z0-9_]+)(?:\[\d+\])?;\s*//\s*(\d+)\.(\d+)(?:\.(\d+))?`)
	byName := map[string]versions.Feature{}
	for f := range versions.NumFeatures {
		byName[versions.Table[f].Name] = f
	}
	checkStruct := func(name, prefix string) {
		text := string(src)
		end := strings.Index(text, "} "+name+";")
		if end < 0 {
			t.Fatalf("shim.h has no struct %s", name)
		}
		start := strings.LastIndex(text[:end], "typedef struct {")
		seen := map[versions.Feature]bool{}
		for _, line := range strings.Split(text[start:end], "\n") {
			m := field.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			feat, ok := byName[prefix+m[1]]
			if !ok {
				t.Errorf("shim.h %s.%s (%s): no such feature in the version table", name, m[1], strings.TrimSpace(line))
				continue
			}
			seen[feat] = true
			r := Release(feat.Since())
			want := m[2] + "." + m[3]
			got := fmt.Sprintf("%d.%d", r.Major(), r.Minor())
			if m[4] != "" {
				want += "." + m[4]
				got = r.String()
			}
			if got != want {
				t.Errorf("shim.h says %s.%s is NCCL %s; the version table says %s", name, m[1], want, r)
			}
		}
		for _, f := range versions.Fields(strings.TrimSuffix(prefix, ".")) {
			if !seen[f] {
				t.Errorf("shim.h %s: %s has no release comment", name, f.Name())
			}
		}
	}
	checkStruct("capi_config_v23203", "ncclConfig_t.")
	checkStruct("capi_devcomm_reqs_v23102", "ncclDevCommRequirements_t.")
	checkStruct("capi_props_v23100", "ncclCommProperties_t.")
	checkStruct("capi_coll_config_v23203", "ncclCollConfig_t.")
}

// setNonZero sets field v (a pointer or a string) to a value other than
// its zero: n for numbers, b for booleans, "x" for strings.
func setNonZero(v reflect.Value, n int64, b bool) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
		return
	case reflect.Uint64:
		v.SetUint(uint64(n))
		return
	}
	p := reflect.New(v.Type().Elem())
	switch e := p.Elem(); e.Kind() {
	case reflect.Bool:
		e.SetBool(b)
	case reflect.Struct: // a handle such as *cuda.Event: a new one
	default:
		e.SetInt(n)
	}
	v.Set(p)
}

// Every gated field reaches the C struct: set alone (on top of a base that
// makes it valid), one of two values changes what the encoder sends at
// ABIRelease (the requirements: at their newest layout). A new field with a row but no encoding line fails here.
func TestStructFieldsEncoded(t *testing.T) {
	// A CollConfig's event is resolved through package cuda: any event
	// (a zero one here) reads as a timing-disabled event of device 0.
	defer func(f func(*cuda.Event) (uintptr, int, uint32, error)) { resolveEvent = f }(resolveEvent)
	resolveEvent = func(*cuda.Event) (uintptr, int, uint32, error) {
		return 0x1234, 0, uint32(cuda.EventDisableTiming), nil
	}
	full := GINConnectionFull
	structs := map[string]struct {
		base   any // what every field is set on top of, unless it sets the field itself
		encode func(v any) (string, error)
	}{
		"ncclConfig_t": {&Config{}, func(v any) (string, error) {
			c, _, err := v.(*Config).encode("test", ABIRelease)
			return fmt.Sprintf("%+v", c), err
		}},
		"ncclCollConfig_t": {&CollConfig{}, func(v any) (string, error) {
			var in capi.CollIn
			ext, strs := make([]capi.ExtIn, capi.ExtMax), make([]byte, capi.CollStrMax)
			n, m, err := v.(*CollConfig).encode("test", ABIRelease, 0, &in, ext, strs)
			return fmt.Sprintf("%+v %+v %q", in, ext[:n], strs[:m]), err
		}},
		// GIN resources need a GIN connection from 2.29.7. The newest
		// requirements layout is older than ABIRelease (devCommVersion).
		"ncclDevCommRequirements_t": {&DevCommRequirements{GINConnectionType: &full}, func(v any) (string, error) {
			b, _, err := v.(*DevCommRequirements).encode("test", devCommVersion(ABIRelease))
			return fmt.Sprintf("% x", b), err
		}},
	}
	if b, _, _ := (*DevCommRequirements)(nil).encode("test", ABIRelease); len(b) == 0 {
		delete(structs, "ncclDevCommRequirements_t") // the C shim lays them out: no cgo here
	}
	for name, s := range structs {
		for _, f := range versions.Fields(name) {
			base := reflect.ValueOf(s.base)
			if !base.Elem().FieldByName(f.Field()).IsZero() {
				base = reflect.New(base.Elem().Type())
			}
			want, err := s.encode(base.Interface())
			if err != nil {
				t.Fatalf("%s: base: %v", name, err)
			}
			changed := false
			for _, try := range []struct {
				n int64
				b bool
			}{{1, true}, {2, false}} {
				v := reflect.New(base.Elem().Type())
				v.Elem().Set(base.Elem())
				setNonZero(v.Elem().FieldByName(f.Field()), try.n, try.b)
				if got, err := s.encode(v.Interface()); err == nil && got != want {
					changed = true
					break
				}
			}
			if !changed {
				t.Errorf("%s: setting %s changes nothing the encoder sends (%s is not encoded)", name, f.Field(), f.Name())
			}
		}
	}
}

// A library that has ncclDevCommCreate while reporting an older release
// (a fake, a patched build) gets the first layout, never an empty one.
func TestLayoutBeforeFirstRelease(t *testing.T) {
	l := layoutFor(22702)
	if l.DevCommLayout != versions.DevCommLayouts[0] || l.declared != 22702 {
		t.Errorf("layoutFor(2.27.2) = %+v, want the first layout declaring 2.27.2", l)
	}
}

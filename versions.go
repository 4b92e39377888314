package nccl

import (
	"reflect"
	"sync"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Version facts, in one place: the first NCCL release of everything the
// binding uses that not every supported release ([MinRelease] on) has.
//
//   - NCCL functions: the shim's list in internal/capi/shim.h, from which
//     capi.SymName and capi.SymSince are generated. Whether the loaded
//     library exports one (capi.Present, an array index filled at load) is
//     the fact; its release only explains the error.
//   - Struct fields (of [Config], [DevCommRequirements], [Properties]),
//     flag values, data types and behaviours: the table of
//     internal/versions, one row each, with the ncclDevCommRequirements_t
//     layouts beside it. A struct field's row names the Go field it gates,
//     so encoding checks set fields against the table (checkFields), and
//     versions_test.go fails when a field has no row, a row no field, or
//     the struct documentation and shim.h's comments name another release.
//   - The version the binding declares in each versioned struct to the
//     loaded release, which decides whether a field the release has is
//     sent (or read): internal/versions' declare.go (ConfigVersion,
//     CollConfigDeclared, PropsVersion, DevCommDeclared, Feature.UseWith),
//     which nccl4go info reports by too.
//
// The error for anything missing is made here: [UnsupportedError] says
// "requires NCCL x.y.z, loaded a.b.c".

// unsupportedFeature is the error for feature f, which release r lacks.
func unsupportedFeature(f versions.Feature, r Release) error {
	return &UnsupportedError{Feature: f.Name(), Since: Release(f.Since()), Loaded: r}
}

// has reports whether release r has feature f.
func has(r Release, f versions.Feature) bool { return f.In(int(r)) }

// need returns the unsupported error when release r lacks feature f.
func need(r Release, f versions.Feature) error {
	if !has(r, f) {
		return unsupportedFeature(f, r)
	}
	return nil
}

// checkFields returns the unsupported error for the first field of *s (a
// [Config], [DevCommRequirements] or [CollConfig]) that is set although release r lacks it:
// the rows of the version table that name s's fields, in order.
func checkFields(s any, r Release) error {
	v := reflect.ValueOf(s).Elem()
	for _, g := range gatesOf(v.Type()) {
		if !has(r, g.f) && !v.Field(g.index).IsZero() {
			return unsupportedFeature(g.f, r)
		}
	}
	return nil
}

// fieldGate is a version-table row bound to the index of its Go field.
type fieldGate struct {
	f     versions.Feature
	index int
}

// cStruct is the C struct behind each struct of the binding that has
// fields newer than the oldest release that can use the struct.
var cStruct = map[reflect.Type]string{
	reflect.TypeFor[Config]():              "ncclConfig_t",
	reflect.TypeFor[DevCommRequirements](): "ncclDevCommRequirements_t",
	reflect.TypeFor[Properties]():          "ncclCommProperties_t",
	reflect.TypeFor[CollConfig]():          "ncclCollConfig_t",
}

// gates binds each struct's rows to field indexes, once.
var gates = sync.OnceValue(func() map[reflect.Type][]fieldGate {
	m := make(map[reflect.Type][]fieldGate, len(cStruct))
	for t, name := range cStruct {
		for _, f := range versions.Fields(name) {
			// A row naming no field is a bug versions_test.go catches;
			// here it gates nothing.
			if sf, ok := t.FieldByName(f.Field()); ok && len(sf.Index) == 1 {
				m[t] = append(m[t], fieldGate{f, sf.Index[0]})
			}
		}
	}
	return m
})

func gatesOf(t reflect.Type) []fieldGate { return gates()[t] }

// symSince is the first release of an NCCL function of the shim's list.
func symSince(s capi.Sym) Release { return releaseFromCode(capi.SymSince[s]) }

// unsupported is the error for an NCCL function the loaded library lacks.
func unsupported(s capi.Sym) error {
	r, _ := loaded()
	return &UnsupportedError{Feature: capi.SymName[s], Since: symSince(s), Loaded: r}
}

// require loads NCCL and returns its release, or the unsupported error when
// the library lacks function s (an array index, no search).
func require(s capi.Sym) (Release, error) {
	r, err := loaded()
	if err != nil {
		return 0, err
	}
	if !capi.Present(s) {
		return r, unsupported(s)
	}
	return r, nil
}

// symByName maps a function name of the shim's list to its Sym, for
// statusErr's missing-function case (an error path), built once.
var symByName = sync.OnceValue(func() map[string]capi.Sym {
	m := make(map[string]capi.Sym, capi.NumSyms)
	for i, name := range capi.SymName {
		m[name] = capi.Sym(i)
	}
	return m
})

// unsupportedFunc is unsupported for a function named fn.
func unsupportedFunc(fn string) error {
	if s, ok := symByName()[fn]; ok {
		return unsupported(s)
	}
	r, _ := loaded()
	return &UnsupportedError{Feature: fn, Loaded: r}
}

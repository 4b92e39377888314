package nccl

import (
	"runtime/debug"
	"testing"
)

// The binding's version comes from the build information: the main
// module's when the program is this module, else the required one, the
// replacement's where replaced, "(devel)" where nothing says.
func TestModuleVersion(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"main module", debug.BuildInfo{Main: *dep(modulePath, "v0.4.0", nil)}, "v0.4.0"},
		{"main module, local checkout", debug.BuildInfo{Main: *dep(modulePath, "(devel)", nil)}, "(devel)"},
		{"dependency", debug.BuildInfo{Main: *dep("example.com/app", "(devel)", nil),
			Deps: []*debug.Module{dep("golang.org/x/sys", "v0.30.0", nil), dep(modulePath, "v0.4.1-0.20261203141500-0123456789ab", nil)}},
			"v0.4.1-0.20261203141500-0123456789ab"},
		{"replaced by a version", debug.BuildInfo{Main: *dep("example.com/app", "", nil),
			Deps: []*debug.Module{dep(modulePath, "v0.4.0", dep("example.com/fork", "v0.4.2", nil))}}, "v0.4.2"},
		{"replaced by a directory", debug.BuildInfo{Main: *dep("example.com/app", "", nil),
			Deps: []*debug.Module{dep(modulePath, "v0.4.0", dep("../nccl", "", nil))}}, "(devel)"},
		{"not in the build", debug.BuildInfo{Main: *dep("example.com/app", "v1.0.0", nil)}, "(devel)"},
		{"no main module", debug.BuildInfo{}, "(devel)"},
	} {
		if got := moduleVersion(&tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if v := BindingVersion(); v == "" {
		t.Error("BindingVersion is empty")
	}
}

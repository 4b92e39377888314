package nccl

import (
	"fmt"
	"runtime/debug"

	"github.com/nccl4go/nccl/internal/capi"
)

// modulePath is the binding's module path, as go.mod declares it.
const modulePath = "github.com/nccl4go/nccl"

// VersionInfo is what nccl4py's get_version() reports: the binding's own
// version, the NCCL release whose ABI it was written against, and the
// loaded library.
type VersionInfo struct {
	// Binding is the version of this module as the program was built
	// with it ("v0.4.0", a pseudo-version, or "(devel)" for a build of a
	// local checkout or without module information).
	Binding string `json:"binding"`
	// ABI is [ABIRelease]: the newest NCCL release whose structs and
	// functions the binding declares.
	ABI Release `json:"abi_release"`
	// Library is the loaded NCCL's release (ncclGetVersion), 0 when none
	// could be loaded.
	Library Release `json:"library_release,omitempty"`
	// Path is the file the loaded NCCL came from, "" when none.
	Path string `json:"library_path,omitempty"`
}

// String reads "nccl4go (devel), NCCL ABI 2.31.2, library 2.30.7 at
// /usr/lib/x86_64-linux-gnu/libnccl.so.2" ("library not loaded" when none).
func (v VersionInfo) String() string {
	lib := "library not loaded"
	if v.Library != 0 {
		lib = fmt.Sprintf("library %s at %s", v.Library, v.Path)
	}
	return fmt.Sprintf("nccl4go %s, NCCL ABI %s, %s", v.Binding, v.ABI, lib)
}

// Versions reports the binding's version, the ABI release it declares and
// the loaded NCCL, loading the library if needed (as nccl4py's
// get_version() does). When NCCL cannot be loaded, the binding's half is
// still filled in and the error says why (it wraps [ErrLibraryNotFound] or
// [ErrUnsupported]). Not collective; no NCCL call beyond ncclGetVersion.
func Versions() (VersionInfo, error) {
	v := VersionInfo{Binding: BindingVersion(), ABI: ABIRelease}
	r, err := loaded()
	if err != nil {
		return v, err
	}
	v.Library, v.Path = r, capi.NCCLPath()
	return v, nil
}

// BindingVersion is the version of this module in the running program's
// build information (runtime/debug.ReadBuildInfo): the main module's
// version when the program is nccl4go's own, else the version the program
// required, "(devel)" when the build has no such record (a local
// checkout, a replace by a directory, or a test binary).
func BindingVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return moduleVersion(bi)
}

// moduleVersion finds this module in bi.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
				break
			}
		}
	}
	for m != nil && m.Replace != nil {
		m = m.Replace
	}
	if m == nil || m.Version == "" {
		return "(devel)"
	}
	return m.Version
}

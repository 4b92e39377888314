package versions

import "fmt"

// What the binding declares to a loaded release, in each versioned struct:
// the one place of these rules. The root package encodes and decodes the
// structs by them, and nccl4go info reports by them ([Feature.UseWith])
// which fields the binding uses with the loaded library.
//
// A versioned struct carries the version its caller was written against;
// NCCL reads the fields of that version and resets the newer ones. The
// binding declares the loaded release, capped where a newer layout of the
// struct (or of what NCCL writes back for it) is not established
// (ABI-2.31-2.32.md §10): a library newer than such a cap gets an older
// layout, and the fields that layout lacks are not used with it, although
// the library has them.

// ABIRelease is the newest NCCL release whose ABI the binding declares
// (nccl.ABIRelease): ncclConfig_t is stamped with min(ABIRelease, loaded
// release), and nothing newer than it is sent.
const ABIRelease = 23203

// propsCompat is the newest ncclCommProperties_t version before the 2.31
// layout: what a library whose own layout is not established is asked in
// (ABI-2.31-2.32.md §5: 2.31's compat table keeps [23000, 23007] for the
// 2.30 layout).
const propsCompat = 23007

// simInfoABI is the newest release whose ncclSimInfo_t the binding
// declares: its 2.31 layout is not in the shim.
const simInfoABI = 23007

// ConfigVersion is the version the binding declares in ncclConfig_t to
// release r: min(r, [ABIRelease]). NCCL clamps the struct's size to its
// own and honours every field of the declared version
// (ABI-2.31-2.32.md §4), so every field r has is used.
func ConfigVersion(r int) int { return min(r, ABIRelease) }

// CollConfigDeclared is the ncclCollConfig_t layout the binding sends to
// release r and the version it declares in it: r's layout of
// [CollConfigLayouts] (the first for a library that has the nccl*Config
// functions while reporting an older release), declaring that layout's
// release (r where older), with exactly its size (ABI-2.31-2.32.md §3).
func CollConfigDeclared(r int) (CollConfigLayout, int) {
	l, ok := CollConfigLayoutFor(r)
	if !ok {
		l = CollConfigLayouts[0]
	}
	return l, min(l.From, r)
}

// PropsVersion is the version the binding declares in ncclCommProperties_t
// to release r. A 2.31 library (2.31.0a16's compat table: [23000, 23007]
// the 2.30 layout, [23100, library] the 144-byte one) gets its own release
// and the 144-byte struct ([PropsLayouts]); the others min(r, 2.30.7):
// 2.32.3 appends fields whose layout and compat table are not established
// (ABI-2.31-2.32.md §5), so a 2.32 library is asked in the 2.30 layout, as
// before 2.31, and the 2.31 fields are not read from it.
func PropsVersion(r int) int {
	if r >= 23100 && r < 23200 {
		return r
	}
	return min(r, propsCompat)
}

// PropsDeclared is [PropsVersion] with its layout (the first for a library
// that has ncclCommQueryProperties while reporting an older release).
func PropsDeclared(r int) (PropsLayout, int) {
	v := PropsVersion(r)
	l, ok := PropsLayoutFor(v)
	if !ok {
		l = PropsLayouts[0]
	}
	return l, v
}

// DevCommDeclared is the ncclDevCommRequirements_t layout the binding sends
// to release r and the version it declares in it; runtime says the caller
// asks NCCL for the ncclDevComm_t of its own layout (useRuntimeVersion).
// The version is min(r, the newest requirements layout's release, 2.31.2),
// with r's layout (the first for a library that has ncclDevCommCreate while
// reporting an older release). From 2.31 the table knows no ncclDevComm_t
// size (DevComm 0): the binding learns it from the library
// (ncclCommProperties_t.devCommRuntimeVersionSize, the size of the
// library's own layout), which is the one NCCL writes only when the
// declared version is the library's own, or with runtime. A library newer
// than 2.31.2 without runtime therefore gets [DevCommCompat]'s layout,
// whose ncclDevComm_t size is known, and the 2.31 fields are not sent to
// it. With runtime (where the declared version has useRuntimeVersion) the
// returned layout's DevComm is 0: NCCL reports the size ([RuntimeSizeKnown]
// says whether the binding can read it from r).
func DevCommDeclared(r int, runtime bool) (DevCommLayout, int) {
	l, ok := DevCommLayoutFor(r)
	if !ok {
		l = DevCommLayouts[0]
	}
	v := min(r, DevCommLayouts[len(DevCommLayouts)-1].From)
	if l.DevComm == 0 && v != r && !runtime {
		c, _ := DevCommLayoutFor(DevCommCompat)
		return c, DevCommCompat
	}
	if runtime && ReqsUseRuntimeVersion.In(v) {
		l.DevComm = 0
	}
	return l, v
}

// RuntimeSizeKnown reports whether the binding can read, from release r,
// the size of the ncclDevComm_t r writes in its own layout: whether the
// ncclCommProperties_t version it declares to r ([PropsVersion]) has
// devCommRuntimeVersionSize.
func RuntimeSizeKnown(r int) bool { return PropsDevCommRuntimeVersionSize.In(PropsVersion(r)) }

// SimInfoVersion is the version the binding declares in ncclSimInfo_t to
// release r: min(r, 2.30.7).
func SimInfoVersion(r int) int { return min(r, simInfoABI) }

// Use is how the binding uses a feature of the table with one release.
type Use struct {
	// Has: the release has the feature ([Feature.In]).
	Has bool
	// Used: the binding uses it with the release. For a struct field: it
	// declares a version that has the field, so a field set is sent (or,
	// for ncclCommProperties_t, the field is read); a field set that is not
	// used is refused with an error. Anything else is used where the
	// release has it, but for NCCL_GIN_CONNECTION_CUSTOM_STRIDE, which is
	// used where its stride field is.
	Used bool
	// Why, for a feature the release has but the binding does not use
	// with it, says why not ("its ncclCommProperties_t layout is not
	// established"); "" otherwise.
	Why string
}

// UseWith says how the binding uses feature f with release r, by the
// declared-version rules above.
func (f Feature) UseWith(r int) Use {
	u := Use{Has: f.In(r)}
	if !u.Has {
		return u
	}
	var declared int
	switch Table[f].Struct() {
	case "ncclConfig_t":
		declared = ConfigVersion(r)
	case "ncclCollConfig_t":
		_, declared = CollConfigDeclared(r)
	case "ncclCommProperties_t":
		declared = PropsVersion(r)
		if !f.In(declared) {
			u.Why = "its ncclCommProperties_t layout is not established, so the binding asks it in the " +
				Release(declared) + " layout"
		}
	case "ncclDevCommRequirements_t":
		_, declared = DevCommDeclared(r, false)
		if f.In(declared) {
			break
		}
		newest := Release(DevCommLayouts[len(DevCommLayouts)-1].From)
		_, rv := DevCommDeclared(r, true)
		switch {
		case f.In(rv) && RuntimeSizeKnown(r) && f == ReqsUseRuntimeVersion:
			declared = rv
		case f.In(rv) && RuntimeSizeKnown(r):
			u.Why = "sent only with DevCommRequirements.UseRuntimeVersion set: the ncclDevComm_t " +
				"it writes for a " + newest + " declaration is not established, so without it the binding declares " +
				Release(DevCommCompat)
		default:
			u.Why = "the ncclDevComm_t it writes for a " + newest + " declaration is not established, nor is " +
				"the ncclCommProperties_t layout that would report its own size, so the binding declares " +
				Release(DevCommCompat)
		}
	case "":
		u.Used = true
		if f == GINConnectionCustomStride {
			// A connection type whose rank stride is a field of its own:
			// without ginCustomStride NCCL takes the initializer's stride
			// 1, and a 2.30 ncclDevComm_t has no room for a stride.
			if s := ReqsGINCustomStride.UseWith(r); !s.Used {
				u.Used, u.Why = false, "its stride (ncclDevCommRequirements_t.ginCustomStride) is not sent to it: "+s.Why
			}
		}
		return u
	}
	u.Used = f.In(declared)
	if !u.Used && u.Why == "" {
		u.Why = "the binding declares " + Release(declared) + " in " + Table[f].Struct() + " to it"
	}
	return u
}

// Release writes release r (an NCCL_VERSION_CODE number) as "2.28.3".
func Release(r int) string { return fmt.Sprintf("%d.%d.%d", r/10000, r/100%100, r%100) }

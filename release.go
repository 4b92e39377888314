package nccl

import (
	"fmt"

	"github.com/nccl4go/nccl/internal/versions"
)

// Release is an NCCL release number as NCCL_VERSION_CODE writes it from 2.9
// on: major*10000 + minor*100 + patch, so 2.28.3 is 22803.
type Release int

// Releases the binding refers to.
const (
	// ABIRelease is the newest NCCL release whose ABI the binding declares:
	// ncclConfig_t is stamped with min(ABIRelease, loaded release), and
	// nothing newer than it is sent. Structs whose newer layouts are not
	// established stop earlier (deviceAPIVersion, propsVersion) and
	// ncclCollConfig_t follows its layout table.
	ABIRelease Release = 23203
	// MinRelease is the oldest NCCL release the binding loads.
	MinRelease Release = 21901
)

// Major is the first part of the release number: 2 in 2.28.3.
func (r Release) Major() int { return int(r) / 10000 }

// Minor is the second part: 28 in 2.28.3.
func (r Release) Minor() int { return int(r) / 100 % 100 }

// Patch is the third part: 3 in 2.28.3.
func (r Release) Patch() int { return int(r) % 100 }

// String is "2.28.3".
func (r Release) String() string { return fmt.Sprintf("%d.%d.%d", r.Major(), r.Minor(), r.Patch()) }

// releaseFromCode reads ncclGetVersion's value: X*1000+Y*100+Z up to 2.8,
// X*10000+Y*100+Z from 2.9.
func releaseFromCode(code int) Release {
	if code < 10000 {
		return Release(code/1000*10000 + code%1000/100*100 + code%100)
	}
	return Release(code)
}

// ParseRelease reads "2.28.3".
func ParseRelease(s string) (Release, error) {
	var a, b, c int
	if n, err := fmt.Sscanf(s, "%d.%d.%d", &a, &b, &c); err != nil || n != 3 || b > 99 || c > 99 || a < 0 || b < 0 || c < 0 {
		return 0, fmt.Errorf("nccl: %q is not a release number like 2.28.3", s)
	}
	return Release(a*10000 + b*100 + c), nil
}

// deviceABIRelease is the newest release whose device-API requirements
// (ncclDevCommRequirements_t) and ncclSimInfo_t the binding declares: their
// 2.31 layouts are not in the shim (a 2.31 library copies the requirements
// for their declared size, unclamped).
const deviceABIRelease Release = 23007

// devCommVersion is the version the binding declares in
// ncclDevCommRequirements_t: min(loaded, the newest requirements layout of
// versions.DevCommLayouts, 2.31.2). devcomm.go falls back to 2.30.7 where
// the ncclDevComm_t NCCL would write for it is not known.
func devCommVersion(loaded Release) Release {
	return min(loaded, Release(versions.DevCommLayouts[len(versions.DevCommLayouts)-1].From))
}

// deviceAPIVersion is the version the binding declares in device-API
// requirements and ncclSimInfo_t: min(deviceABIRelease, loaded).
func deviceAPIVersion(loaded Release) Release { return min(loaded, deviceABIRelease) }

// propsVersion is the version the binding declares in
// ncclCommProperties_t. A 2.31 library (2.31.0a16's compat table:
// [23000, 23007] the 2.30 layout, [23100, library] the 144-byte one) gets
// its own release and the 144-byte struct (versions.PropsLayouts); the
// others min(loaded, 2.30.7): 2.32.3 appends fields whose layout and
// compat table are not established (internal/versions/ABI-2.31-2.32.md
// §5), so a 2.32 library is asked in the 2.30 layout, as before 2.31, and
// the 2.31 fields are reported as not available.
func propsVersion(loaded Release) Release {
	if loaded >= 23100 && loaded < 23200 {
		return loaded
	}
	return min(loaded, 23007)
}

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
	// established stop earlier, and ncclCollConfig_t follows its layout
	// table: internal/versions (declare.go) holds the rule of each struct.
	ABIRelease = Release(versions.ABIRelease)
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

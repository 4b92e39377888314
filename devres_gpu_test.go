package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/gputest"
)

// On a real NCCL: ncclLLA2ACalcSlots gives maxElts × ⌈maxEltSize/8⌉ (from
// 2.28.3), Versions reports the loaded library, and what a release lacks
// (2.31 requirement fields, ncclSetEncryption) is refused with the release
// that added it, before NCCL is called.
func TestGPUVersionGates(t *testing.T) {
	r := gputest.Require(t)
	v, err := nccl.Versions()
	if err != nil || v.Library != r || v.ABI != nccl.ABIRelease || !strings.Contains(v.Path, "libnccl") {
		t.Errorf("Versions = %v, %v", v, err)
	}
	t.Logf("%v", v)
	for _, tc := range []struct{ elts, size, want int }{{32, 16, 64}, {32, 17, 96}, {7, 1, 7}, {0, 8, 0}} {
		got, err := nccl.LLA2ACalcSlots(tc.elts, tc.size)
		switch {
		case r < 22803:
			wantUnsupported(t, "LLA2ACalcSlots", err, "ncclLLA2ACalcSlots", 22803)
		case err != nil || got != tc.want:
			t.Errorf("NCCL %s: LLA2ACalcSlots(%d, %d) = %d, %v; want %d", r, tc.elts, tc.size, got, err, tc.want)
		}
	}
	err = nccl.SetEncryption(nccl.EncryptionConfig{PSK: strings.Repeat("k", 32)})
	var le *nccl.UnknownLayoutError
	switch {
	case r < 23203:
		wantUnsupported(t, "SetEncryption", err, "ncclSetEncryption", 23203)
	case !errors.As(err, &le):
		t.Errorf("NCCL %s: SetEncryption: %v, want the unknown-layout refusal", r, err)
	}
	if r >= 23100 || r < 22803 {
		return
	}
	c := initOne(t)
	defer c.Destroy()
	_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINCustomStride: nccl.Ptr(2)})
	var ue *nccl.UnsupportedError
	if !errors.As(err, &ue) || ue.Feature != "ncclDevCommRequirements_t.ginCustomStride" || ue.Since != 23100 || ue.Loaded != r {
		t.Errorf("NCCL %s: GINCustomStride: %v", r, err)
	}
}

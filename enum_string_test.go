package nccl_test

import (
	"testing"

	"github.com/nccl4go/nccl"
)

// The 2.31/2.32 enums print as C names them (NVIDIA's documentation of
// ncclHostCftMode_t, ncclNvlsHostMode_t and the NCCL_WIN_* flags).
func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct {
		v    interface{ String() string }
		want string
	}{
		{nccl.HostCFTEnable, "ncclHostCftEnable"},
		{nccl.HostCFTDisable, "ncclHostCftDisable"},
		{nccl.HostCFTFallback, "ncclHostCftFallback"},
		{nccl.HostCFTMode(7), "ncclHostCftMode_t(7)"},
		{nccl.NVLSHostEnable, "ncclNvlsHostModeEnable"},
		{nccl.NVLSHostDisableTransport, "ncclNvlsHostModeDisableTransport"},
		{nccl.NVLSHostDisableSymmetricMultimem, "ncclNvlsHostModeDisableSymmetricMultimem"},
		{nccl.NVLSHostDisableTransport | nccl.NVLSHostDisableSymmetricMultimem,
			"ncclNvlsHostModeDisableTransport|ncclNvlsHostModeDisableSymmetricMultimem"},
		{nccl.NVLSHostDisable, "ncclNvlsHostModeDisable"},
		{nccl.NVLSHostMode(4), "ncclNvlsHostMode_t(4)"},
		{nccl.WindowDefault, "NCCL_WIN_DEFAULT"},
		{nccl.WindowCollSymmetric, "NCCL_WIN_COLL_SYMMETRIC"},
		{nccl.WindowCollSymmetric | nccl.WindowStrictOrdering, "NCCL_WIN_COLL_SYMMETRIC|NCCL_WIN_STRICT_ORDERING"},
		{nccl.WindowGINOnly | nccl.WindowCFTCounted, "NCCL_WIN_GIN_ONLY|NCCL_WIN_CFT_COUNTED"},
		{nccl.WindowCollSymmetric | 0x40, "NCCL_WIN_COLL_SYMMETRIC|0x40"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.v, got, tc.want)
		}
	}
}

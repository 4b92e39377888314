package nccl

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// The requirements bytes for each layout family, against the offsets of
// ncclDevCommRequirements_t in NCCL's nccl_device headers of 2.28.3, 2.28.7
// and 2.29.2 onwards (no library needed).
func TestDevCommRequirementsEncoding(t *testing.T) {
	if b, _, _ := (*DevCommRequirements)(nil).encode("test", 22803); len(b) == 0 {
		t.Skip("the C shim lays out the requirements: needs cgo on Linux")
	}
	i32 := func(b []byte, off int) int32 { return int32(binary.LittleEndian.Uint32(b[off:])) }
	full := GINConnectionRail
	all := &DevCommRequirements{
		LSAMultimem: Ptr(true), LSABarrierCount: Ptr(11), BarrierCount: Ptr(12), RailGINBarrierCount: Ptr(13),
		LSALLA2ABlockCount: Ptr(14), LSALLA2ASlotCount: Ptr(15), GINForceEnable: Ptr(true), GINContextCount: Ptr(2),
		GINSignalCount: Ptr(16), GINCounterCount: Ptr(17), GINConnectionType: &full, GINExclusiveContexts: Ptr(true),
		GINQueueDepth: Ptr(18), GINTrafficClass: Ptr(19), WorldGINBarrierCount: Ptr(20),
		GINStrongSignalsRequired: Ptr(false), GINVASignalsRequired: Ptr(false),
	}
	for _, tc := range []struct {
		r        Release
		size     int
		declared Release
		devComm  int
	}{
		{22803, 24, 22803, 88}, {22807, 56, 22807, 200}, {22809, 56, 22809, 200}, {22902, 72, 22902, 200},
		{22903, 72, 22903, 200}, {22907, 88, 22907, 224}, {23003, 96, 23003, 240}, {23004, 96, 23004, 240},
		{23007, 96, 23007, 240}, {23105, 96, 23007, 240},
	} {
		// nil requirements: NCCL's initializer defaults.
		b, l, err := (*DevCommRequirements)(nil).encode("test", tc.r)
		if err != nil {
			t.Fatalf("%s: encode(nil): %v", tc.r, err)
		}
		if len(b) != tc.size || l.declared != tc.declared || l.DevComm != tc.devComm {
			t.Errorf("%s: %d bytes, declared %s, devComm %d; want %d, %s, %d", tc.r, len(b), l.declared, l.DevComm,
				tc.size, tc.declared, tc.devComm)
		}
		switch {
		case tc.r < 22807:
			if b[16] != 0 || i32(b, 20) != 0 {
				t.Errorf("%s: defaults % x", tc.r, b)
			}
		case tc.r < 22902:
			if i32(b, 44) != 4 {
				t.Errorf("%s: ginContextCount %d, want 4", tc.r, i32(b, 44))
			}
		default:
			if binary.LittleEndian.Uint64(b) != uint64(tc.size) || binary.LittleEndian.Uint32(b[8:]) != 0xcafebeef ||
				Release(binary.LittleEndian.Uint32(b[12:])) != tc.declared {
				t.Errorf("%s: header % x", tc.r, b[:16])
			}
			if i32(b, 60) != 4 {
				t.Errorf("%s: ginContextCount %d, want 4", tc.r, i32(b, 60))
			}
			if tc.declared >= 23003 && i32(b, 84) != -1<<31 {
				t.Errorf("%s: ginTrafficClass %d, want INT_MIN", tc.r, i32(b, 84))
			}
			if tc.declared >= 23007 && (b[92] != 1 || b[93] != 1) {
				t.Errorf("%s: signal flags %d %d, want true true", tc.r, b[92], b[93])
			}
			if tc.declared < 23007 && tc.size == 96 && (b[92] != 0 || b[93] != 0) {
				t.Errorf("%s: padding after worldGinBarrierCount is % x", tc.r, b[92:])
			}
		}
	}

	// Every field where the release has it.
	b, _, err := all.encode("test", 23007)
	if err != nil {
		t.Fatal(err)
	}
	for off, want := range map[int]int32{40: 11, 36: 12, 44: 13, 48: 14, 52: 15, 60: 2, 64: 16, 68: 17, 72: 2, 80: 18, 84: 19, 88: 20} {
		if got := i32(b, off); got != want {
			t.Errorf("2.30.7: int at %d = %d, want %d", off, got, want)
		}
	}
	for off, want := range map[int]byte{32: 1, 56: 1, 76: 1, 92: 0, 93: 0} {
		if b[off] != want {
			t.Errorf("2.30.7: bool at %d = %d, want %d", off, b[off], want)
		}
	}
	b, _, err = (&DevCommRequirements{LSAMultimem: Ptr(true), LSABarrierCount: Ptr(5)}).encode("test", 22803)
	if err != nil || b[16] != 1 || i32(b, 20) != 5 {
		t.Errorf("2.28.3: % x, %v", b, err)
	}
	b, _, err = (&DevCommRequirements{BarrierCount: Ptr(6), LSABarrierCount: Ptr(5), GINCounterCount: Ptr(7)}).encode("test", 22807)
	if err != nil || i32(b, 20) != 6 || i32(b, 24) != 5 || i32(b, 52) != 7 {
		t.Errorf("2.28.7: % x, %v", b, err)
	}

	// Fields newer than the release, and GIN resources without GIN.
	for _, tc := range []struct {
		r     Release
		q     *DevCommRequirements
		field string
	}{
		{22803, &DevCommRequirements{GINContextCount: Ptr(1)}, "ginContextCount"},
		{22903, &DevCommRequirements{GINQueueDepth: Ptr(1)}, "ginQueueDepth"},
		{22907, &DevCommRequirements{WorldGINBarrierCount: Ptr(1)}, "worldGinBarrierCount"},
		{23004, &DevCommRequirements{GINStrongSignalsRequired: Ptr(true)}, "ginStrongSignalsRequired"},
	} {
		_, _, err := tc.q.encode("test", tc.r)
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Feature != "ncclDevCommRequirements_t."+tc.field {
			t.Errorf("%s %s: %v", tc.r, tc.field, err)
		}
	}
	if _, _, err := (&DevCommRequirements{RailGINBarrierCount: Ptr(1)}).encode("test", 22907); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("GIN barrier without GIN on 2.29.7: %v", err)
	}
	if _, _, err := (&DevCommRequirements{RailGINBarrierCount: Ptr(1), GINForceEnable: Ptr(true)}).encode("test", 22907); err != nil {
		t.Errorf("GIN barrier with ginForceEnable: %v", err)
	}
	if _, _, err := (&DevCommRequirements{GINSignalCount: Ptr(1)}).encode("test", 22903); err != nil {
		t.Errorf("GIN signals on 2.29.3 (NCCL checks nothing there): %v", err)
	}
}

// The 2.31 layouts: 112 bytes declaring 2.31.0 (ginCustomStride 96, ginType
// 100, useRuntimeVersion 104), 120 declaring 2.31.2 (cftCaps 108,
// cftBarrierCount 112), with NCCL's initializer defaults (ginCustomStride
// 1, NCCL_GIN_TYPE_NONE, false, NCCL_CFT_NONE, 0), and the size of the
// ncclDevComm_t left to the library (0 in the layout). A library newer
// than 2.31.2 gets the 2.30.7 declaration (UseRuntimeVersion keeps the
// 2.31.2 one, for CreateDevComm to size from the properties or refuse).
func TestDevCommRequirementsEncoding231(t *testing.T) {
	if b, _, _ := (*DevCommRequirements)(nil).encode("test", 22803); len(b) == 0 {
		t.Skip("the C shim lays out the requirements: needs cgo on Linux")
	}
	i32 := func(b []byte, off int) int32 { return int32(binary.LittleEndian.Uint32(b[off:])) }
	for _, tc := range []struct {
		r, declared Release
		size        int
	}{{23100, 23100, 112}, {23101, 23101, 112}, {23102, 23102, 120}} {
		b, l, err := (*DevCommRequirements)(nil).encode("test", tc.r)
		if err != nil {
			t.Fatalf("%s: %v", tc.r, err)
		}
		if len(b) != tc.size || binary.LittleEndian.Uint64(b) != uint64(tc.size) || l.declared != tc.declared ||
			Release(i32(b, 12)) != tc.declared || l.DevComm != 0 {
			t.Errorf("%s: %d bytes (size field %d), declared %s (field %d), devComm %d; want %d, %s, 0",
				tc.r, len(b), binary.LittleEndian.Uint64(b), l.declared, i32(b, 12), l.DevComm, tc.size, tc.declared)
		}
		if i32(b, 96) != 1 || i32(b, 100) != 0 || b[104] != 0 || i32(b, 108) != 0 {
			t.Errorf("%s: defaults ginCustomStride %d ginType %d useRuntimeVersion %d cftCaps %d", tc.r,
				i32(b, 96), i32(b, 100), b[104], i32(b, 108))
		}
		if tc.size == 120 && i32(b, 112) != 0 {
			t.Errorf("%s: cftBarrierCount %d", tc.r, i32(b, 112))
		}
	}

	stride := GINConnectionCustomStride
	all := &DevCommRequirements{GINConnectionType: &stride, GINCustomStride: Ptr(8), GINType: Ptr(GINEFAGDA),
		UseRuntimeVersion: Ptr(true), CFTCaps: Ptr(CFTUnicast | CFTMultimem), CFTBarrierCount: Ptr(9)}
	b, l, err := all.encode("test", 23102)
	if err != nil {
		t.Fatal(err)
	}
	if i32(b, 72) != 3 || i32(b, 96) != 8 || i32(b, 100) != 5 || b[104] != 1 || i32(b, 108) != 3 || i32(b, 112) != 9 || l.DevComm != 0 {
		t.Errorf("2.31.2 fields: % x (devComm %d)", b[72:], l.DevComm)
	}
	// 2.31.0a16 has no CFT fields: its 112 bytes hold zero in 2.31.2's cftCaps.
	b, _, err = (&DevCommRequirements{GINCustomStride: Ptr(4), UseRuntimeVersion: Ptr(true)}).encode("test", 23100)
	if err != nil || len(b) != 112 || i32(b, 96) != 4 || b[104] != 1 || i32(b, 108) != 0 {
		t.Errorf("2.31.0: % x, %v", b, err)
	}

	// A library newer than the binding's newest layout.
	b, l, err = (*DevCommRequirements)(nil).encode("test", 23203)
	if err != nil || len(b) != 96 || l.declared != 23007 || l.DevComm != 240 {
		t.Errorf("2.32.3 without 2.31 fields: %d bytes, declared %s, devComm %d, %v; want 96, 2.30.7, 240", len(b), l.declared, l.DevComm, err)
	}
	if _, _, err := (&DevCommRequirements{UseRuntimeVersion: Ptr(false)}).encode("test", 23203); err != nil {
		t.Errorf("2.32.3, UseRuntimeVersion false: %v", err)
	}
	// 2.32.3 has the 2.31 fields, but the binding does not send them: the
	// ncclDevComm_t NCCL writes for a 2.31.2 declaration is not
	// established, nor the ncclCommProperties_t layout that would report
	// the size of its own (versions.DevCommDeclared, RuntimeSizeKnown).
	for _, tc := range []struct {
		q     *DevCommRequirements
		field string
	}{
		{&DevCommRequirements{GINType: Ptr(GINProxy)}, "GINType"},
		{&DevCommRequirements{GINType: Ptr(GINProxy), UseRuntimeVersion: Ptr(true)}, "UseRuntimeVersion"},
		{&DevCommRequirements{UseRuntimeVersion: Ptr(true)}, "UseRuntimeVersion"},
		{&DevCommRequirements{CFTBarrierCount: Ptr(0)}, "CFTBarrierCount"},
	} {
		_, _, err = tc.q.encode("test", 23203)
		var le *UnknownLayoutError
		if !errors.As(err, &le) || !errors.Is(err, ErrUnsupported) || le.Loaded != 23203 ||
			!strings.Contains(le.Reason, "DevCommRequirements."+tc.field+" is not sent to it") ||
			!strings.Contains(le.Reason, "so the binding declares 2.30.7") {
			t.Errorf("2.32.3, %+v: %v", tc.q, err)
		}
	}
	// NCCL_GIN_CONNECTION_CUSTOM_STRIDE's stride goes in ginCustomStride:
	// not sent to 2.32.3 (NCCL would take stride 1), sent to a future 2.31
	// release with UseRuntimeVersion only.
	for _, tc := range []struct {
		r       Release
		runtime bool
		ok      bool
	}{{23102, false, true}, {23105, false, false}, {23105, true, true}, {23203, false, false}, {23203, true, false}} {
		_, l, err := (&DevCommRequirements{GINConnectionType: &stride, UseRuntimeVersion: Ptr(tc.runtime)}).encode("test", tc.r)
		// Refused for the connection itself, or (2.32.3 with
		// UseRuntimeVersion) for UseRuntimeVersion first.
		want := "DevCommRequirements.GINConnectionType NCCL_GIN_CONNECTION_CUSTOM_STRIDE is not sent to it: its stride"
		if tc.runtime {
			want = "DevCommRequirements.UseRuntimeVersion is not sent to it"
		}
		var le *UnknownLayoutError
		if tc.ok && (err != nil || l.declared < 23100) {
			t.Errorf("CUSTOM_STRIDE on %s (runtime %v): declared %s, %v", tc.r, tc.runtime, l.declared, err)
		}
		if !tc.ok && (!errors.As(err, &le) || !strings.Contains(le.Reason, want)) {
			t.Errorf("CUSTOM_STRIDE on %s (runtime %v): %v, want %q", tc.r, tc.runtime, err, want)
		}
	}
	// A future 2.31 release reports its own ncclDevComm_t size: the 2.31
	// fields go with UseRuntimeVersion, and only with it.
	_, _, err = (&DevCommRequirements{GINType: Ptr(GINProxy)}).encode("test", 23105)
	if le := (*UnknownLayoutError)(nil); !errors.As(err, &le) || !strings.Contains(le.Reason, "only with DevCommRequirements.UseRuntimeVersion") {
		t.Errorf("2.31.5, GINType without UseRuntimeVersion: %v", err)
	}
	b, l, err = (&DevCommRequirements{GINType: Ptr(GINProxy), UseRuntimeVersion: Ptr(true)}).encode("test", 23105)
	if err != nil || len(b) != 120 || l.declared != 23102 || l.DevComm != 0 || b[104] != 1 || i32(b, 100) != 2 {
		t.Errorf("2.31.5 with UseRuntimeVersion: %d bytes, declared %s, devComm %d, %v", len(b), l.declared, l.DevComm, err)
	}

	// Fields and values newer than the release.
	for _, tc := range []struct {
		r       Release
		q       *DevCommRequirements
		feature string
	}{
		{23007, &DevCommRequirements{GINCustomStride: Ptr(2)}, "ncclDevCommRequirements_t.ginCustomStride"},
		{23007, &DevCommRequirements{GINType: Ptr(GINNone)}, "ncclDevCommRequirements_t.ginType"},
		{23007, &DevCommRequirements{UseRuntimeVersion: Ptr(false)}, "ncclDevCommRequirements_t.useRuntimeVersion"},
		{23100, &DevCommRequirements{CFTCaps: Ptr(CFTNone)}, "ncclDevCommRequirements_t.cftCaps"},
		{23100, &DevCommRequirements{CFTBarrierCount: Ptr(1)}, "ncclDevCommRequirements_t.cftBarrierCount"},
		{23007, &DevCommRequirements{GINConnectionType: &stride}, "NCCL_GIN_CONNECTION_CUSTOM_STRIDE"},
	} {
		_, _, err := tc.q.encode("test", tc.r)
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Feature != tc.feature || ue.Loaded != tc.r {
			t.Errorf("%s %s: %v", tc.r, tc.feature, err)
		}
	}

	// Bad values.
	bad := GINConnectionType(4)
	for _, tc := range []struct {
		q   *DevCommRequirements
		arg string
	}{
		{&DevCommRequirements{GINCustomStride: Ptr(0)}, "DevCommRequirements.GINCustomStride"},
		{&DevCommRequirements{GINCustomStride: Ptr(-3)}, "DevCommRequirements.GINCustomStride"},
		{&DevCommRequirements{GINType: Ptr(GINType(1))}, "DevCommRequirements.GINType"},
		{&DevCommRequirements{GINType: Ptr(GINType(6))}, "DevCommRequirements.GINType"},
		{&DevCommRequirements{CFTCaps: Ptr(CFTCap(4))}, "DevCommRequirements.CFTCaps"},
		{&DevCommRequirements{CFTCaps: Ptr(CFTCap(-1))}, "DevCommRequirements.CFTCaps"},
		{&DevCommRequirements{CFTBarrierCount: Ptr(-1)}, "DevCommRequirements.CFTBarrierCount"},
		{&DevCommRequirements{GINConnectionType: &bad}, "DevCommRequirements.GINConnectionType"},
	} {
		_, _, err := tc.q.encode("test", 23102)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want an ArgError for %s", *tc.q, err, tc.arg)
		}
	}
}

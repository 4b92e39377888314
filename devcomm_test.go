package nccl_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CPU tests of devcomm.go on the fake libraries, which check the layout
// and size of the requirements each release expects.

func TestFakeDevComm(t *testing.T) {
	for _, tc := range []struct {
		release  int
		size     int
		declared nccl.Release
		header   bool // 2.30.x writes magic and version first
		reqs     *nccl.DevCommRequirements
	}{
		{22803, 88, 22803, false, &nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(2), LSAMultimem: nccl.Ptr(false)}},
		{22807, 200, 22807, false, &nccl.DevCommRequirements{LSALLA2ABlockCount: nccl.Ptr(1), LSALLA2ASlotCount: nccl.Ptr(8)}},
		{22903, 200, 22903, false, &nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(1)}},
		{22907, 224, 22907, false, &nccl.DevCommRequirements{GINQueueDepth: nccl.Ptr(0), GINExclusiveContexts: nccl.Ptr(false)}},
		{23004, 240, 23004, true, &nccl.DevCommRequirements{GINTrafficClass: nccl.Ptr(3), WorldGINBarrierCount: nccl.Ptr(0)}},
		{23007, 240, 23007, true, &nccl.DevCommRequirements{GINStrongSignalsRequired: nccl.Ptr(false), GINVASignalsRequired: nccl.Ptr(true)}},
		{23007, 240, 23007, true, nil},
	} {
		faketest.Run(t, faketest.Env{Release: tc.release}, func(t *testing.T) {
			c := fakeComm(t, 4, 2, nil)
			d, err := c.CreateDevComm(tc.reqs)
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			if d.Size() != tc.size || d.Declared() != tc.declared {
				t.Errorf("Size %d Declared %s, want %d, %s", d.Size(), d.Declared(), tc.size, tc.declared)
			}
			b, err := d.Bytes()
			if err != nil || len(b) != tc.size {
				t.Fatalf("Bytes = %d bytes, %v", len(b), err)
			}
			off := 0
			if tc.header {
				if m, v := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]); m != 0xcafebeef || v != uint32(tc.declared) {
					t.Errorf("header magic %#x version %d", m, v)
				}
				off = 8
			}
			if r, n := binary.LittleEndian.Uint32(b[off:]), binary.LittleEndian.Uint32(b[off+4:]); r != 2 || n != 4 {
				t.Errorf("device communicator rank %d nRanks %d, want 2, 4", r, n)
			}
			if p, err := d.HostPtr(); err != nil || p == 0 {
				t.Errorf("HostPtr = %#x, %v", p, err)
			}
			dp, err := d.DevicePtr()
			if err != nil || dp == 0 {
				t.Fatalf("DevicePtr = %#x, %v", dp, err)
			}
			if dp2, _ := d.DevicePtr(); dp2 != dp {
				t.Errorf("second DevicePtr %#x, first %#x", dp2, dp)
			}
			onDev, err := cuda.Wrap[uint8](dp, tc.size, 0).ToHost()
			if err != nil || !slices.Equal(onDev, b) {
				t.Errorf("the device copy differs from Bytes (%v)", err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := d.Bytes(); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("Bytes after Close: %v", err)
			}
			if faketest.Calls(t, "ncclDevCommDestroy") != 1 {
				t.Errorf("%d ncclDevCommDestroy calls", faketest.Calls(t, "ncclDevCommDestroy"))
			}
		})
	}
}

func TestFakeDevCommUnsupportedFields(t *testing.T) {
	for _, tc := range []struct {
		release int
		reqs    nccl.DevCommRequirements
		field   string
		since   nccl.Release
	}{
		{22803, nccl.DevCommRequirements{BarrierCount: nccl.Ptr(1)}, "barrierCount", 22807},
		{22807, nccl.DevCommRequirements{GINConnectionType: nccl.Ptr(nccl.GINConnectionNone)}, "ginConnectionType", 22907},
		{22907, nccl.DevCommRequirements{GINTrafficClass: nccl.Ptr(1)}, "ginTrafficClass", 23003},
		{23004, nccl.DevCommRequirements{GINVASignalsRequired: nccl.Ptr(true)}, "ginVaSignalsRequired", 23007},
	} {
		faketest.Run(t, faketest.Env{Release: tc.release}, func(t *testing.T) {
			c := fakeComm(t, 2, 0, nil)
			_, err := c.CreateDevComm(&tc.reqs)
			wantUnsupported(t, tc.field, err, "ncclDevCommRequirements_t."+tc.field, tc.since)
		})
	}
	faketest.Run(t, faketest.Env{Release: 22703}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(nil)
		wantUnsupported(t, "CreateDevComm on 2.27", err, "ncclDevCommCreate", 22803)
	})
}

func TestFakeDevCommChecks(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{GINSignalCount: nccl.Ptr(2)})
		wantArg(t, "GIN signals without a connection", err, "DevCommRequirements.GINConnectionType")
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{BarrierCount: nccl.Ptr(1)})
		wantArg(t, "a GIN barrier without a connection", err, "DevCommRequirements.GINConnectionType")
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(-1)})
		wantArg(t, "negative count", err, "DevCommRequirements.LSABarrierCount")
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: nccl.Ptr(nccl.GINConnectionType(7))})
		wantArg(t, "connection type 7", err, "DevCommRequirements.GINConnectionType")
		full := nccl.GINConnectionFull
		if _, err := c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: &full, GINSignalCount: nccl.Ptr(1)}); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("GIN without a GIN transport: %v, want ErrUnsupported", err)
		}
		if _, err := c.CreateDevComm(&nccl.DevCommRequirements{LSAMultimem: nccl.Ptr(true)}); !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("multimem without support: %v, want ErrUnsupported", err)
		}
		c.Destroy()
		if _, err := c.CreateDevComm(nil); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("CreateDevComm after Destroy: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_GIN_TYPE=3", "FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		full := nccl.GINConnectionFull
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: &full, GINSignalCount: nccl.Ptr(4),
			BarrierCount: nccl.Ptr(1), LSAMultimem: nccl.Ptr(true)})
		if err != nil {
			t.Fatalf("CreateDevComm with GIN and multimem: %v", err)
		}
		// Abort closes it (and frees the device copy).
		if _, err := d.DevicePtr(); err != nil {
			t.Fatal(err)
		}
		before := faketest.Calls(t, "ncclDevCommDestroy")
		if err := c.Abort(); err != nil {
			t.Fatal(err)
		}
		if faketest.Calls(t, "ncclDevCommDestroy") != before+1 {
			t.Errorf("Abort did not destroy the device communicator")
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close after Abort: %v", err)
		}
		if _, err := d.DevicePtr(); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("DevicePtr after Abort: %v", err)
		}
	})
	for _, r := range []int{22803, 23007} {
		faketest.Run(t, faketest.Env{Release: r, Extra: []string{"FAKE_NCCL_NO_SYMMETRIC=1"}}, func(t *testing.T) {
			c := fakeComm(t, 2, 0, nil)
			_, err := c.CreateDevComm(nil)
			if r >= 22902 && !errors.Is(err, nccl.ErrUnsupported) {
				t.Errorf("without device-API support: %v, want ErrUnsupported", err)
			}
			if r < 22902 && !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("without symmetric memory on 2.28: %v, want NCCL's ErrInvalidUsage", err)
			}
		})
	}
}

// A device communicator created in a group is written at the group's end.
func TestFakeDevCommInGroup(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 1, nil)
		var d *nccl.DevComm
		err := nccl.Group(func() error {
			var err error
			if d, err = c.CreateDevComm(nil); err != nil {
				return err
			}
			if _, err := d.Bytes(); !errors.Is(err, nccl.ErrInProgress) {
				t.Errorf("Bytes inside the group: %v", err)
			}
			if err := d.Close(); !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "device communicator") {
				t.Errorf("Close inside the group: %v, want ErrInvalidUsage", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Bytes()
		if err != nil || binary.LittleEndian.Uint32(b[8:]) != 1 {
			t.Fatalf("Bytes after the group: %v (%v)", b, err)
		}
		before := faketest.Calls(t, "ncclDevCommDestroy")
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if faketest.Calls(t, "ncclDevCommDestroy") != before+1 {
			t.Errorf("Destroy did not destroy the device communicator")
		}
	})
}

// NCCL 2.27 and 2.28.3 give symmetric memory, which device communicators
// need, only to communicators with at least 2 ranks on the node
// (ncclTransportCheckP2pType: localRanks == 1 is not "all direct P2P");
// 2.28.7 lifts the rule. On the H200, NCCL 2.28.3 refused a one-rank
// communicator's ncclDevCommCreate with "Communicator does not support
// symmetric memory!": the binding says why in a typed error.
func TestFakeDevCommOneRankNoSymmetric(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		_, err := fakeComm(t, 1, 0, nil).CreateDevComm(nil)
		var se *nccl.SymmetricMemoryError
		if !errors.As(err, &se) {
			t.Fatalf("one rank on 2.28.3: %v, want a *SymmetricMemoryError", err)
		}
		if !errors.Is(err, nccl.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("%v: want ErrUnsupported, errors.ErrUnsupported and NCCL's ErrInvalidUsage", err)
		}
		if se.Op != "CreateDevComm" || se.Loaded != 22803 || se.Since != 22807 {
			t.Errorf("Op %q Loaded %s Since %s, want CreateDevComm, 2.28.3, 2.28.7", se.Op, se.Loaded, se.Since)
		}
		for _, want := range []string{"nccl: CreateDevComm: ", "symmetric memory", "at least 2 ranks", "this one has 1", "2.28.7",
			"Communicator does not support symmetric memory!"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
		// Two ranks of one node get it.
		if d, err := fakeComm(t, 2, 0, nil).CreateDevComm(nil); err != nil {
			t.Errorf("two ranks on 2.28.3: %v", err)
		} else {
			d.Close()
		}
	})
	faketest.Run(t, faketest.Env{Release: 22807}, func(t *testing.T) {
		if d, err := fakeComm(t, 1, 0, nil).CreateDevComm(nil); err != nil {
			t.Errorf("one rank on 2.28.7: %v", err)
		} else {
			d.Close()
		}
	})
	// Symmetric memory turned off: no release lifts it, the reason names the variable.
	faketest.Run(t, faketest.Env{Release: 22803, Extra: []string{"NCCL_WIN_ENABLE=0"}}, func(t *testing.T) {
		_, err := fakeComm(t, 2, 0, nil).CreateDevComm(nil)
		var se *nccl.SymmetricMemoryError
		if !errors.As(err, &se) || se.Since != 0 || !strings.Contains(err.Error(), "NCCL_WIN_ENABLE=0") {
			t.Errorf("NCCL_WIN_ENABLE=0 on 2.28.3: %v, want a *SymmetricMemoryError naming NCCL_WIN_ENABLE=0, Since 0", err)
		}
	})
}

// NCCL 2.31: the fake takes the 112-byte (2.31.0) and 120-byte (2.31.2)
// requirements only at their exact sizes, writes its own ncclDevComm_t of
// the size its properties report (devCommRuntimeVersionSize, 256 bytes),
// and echoes ginCustomStride and ginType at bytes 248 and 252 of it.
func TestFakeDevComm231(t *testing.T) {
	stride := nccl.GINConnectionCustomStride
	for _, tc := range []struct {
		release, version int
		reqs             *nccl.DevCommRequirements
		declared         nccl.Release
		stamped          uint32 // the devComm's version field
		size             int
	}{
		{23100, 0, nil, 23100, 23100, 256},
		{23102, 0, nil, 23102, 23102, 256},
		{23102, 0, &nccl.DevCommRequirements{GINConnectionType: &stride, GINCustomStride: nccl.Ptr(2),
			GINType: nccl.Ptr(nccl.GINGDAKI), CFTBarrierCount: nccl.Ptr(0)}, 23102, 23102, 256},
		{23100, 0, &nccl.DevCommRequirements{UseRuntimeVersion: nccl.Ptr(true), GINCustomStride: nccl.Ptr(3)}, 23100, 23100, 256},
		// A library newer than 2.31.2: 2.30.7's layout by default, its own
		// with UseRuntimeVersion.
		{23102, 23203, nil, 23007, 23007, 240},
	} {
		env := faketest.Env{Release: tc.release, Version: tc.version,
			Extra: []string{"FAKE_NCCL_GIN_TYPE=3", "FAKE_NCCL_GIN_CONNECTION=1"}}
		faketest.Run(t, env, func(t *testing.T) {
			c := fakeComm(t, 4, 1, nil)
			d, err := c.CreateDevComm(tc.reqs)
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			defer d.Close()
			b, err := d.Bytes()
			if err != nil || d.Size() != tc.size || len(b) != tc.size || d.Declared() != tc.declared {
				t.Fatalf("Size %d, %d bytes, declared %s, %v; want %d, %s", d.Size(), len(b), d.Declared(), err, tc.size, tc.declared)
			}
			if m, v := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]); m != 0xcafebeef || v != tc.stamped {
				t.Errorf("header magic %#x version %d, want version %d", m, v, tc.stamped)
			}
			if r, n := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]); r != 1 || n != 4 {
				t.Errorf("rank %d nRanks %d", r, n)
			}
			if tc.size == 256 {
				wantStride, wantType := uint32(1), uint32(0)
				if tc.reqs != nil && tc.reqs.GINCustomStride != nil {
					wantStride = uint32(*tc.reqs.GINCustomStride)
				}
				if tc.reqs != nil && tc.reqs.GINType != nil {
					wantType = uint32(*tc.reqs.GINType)
				}
				if s, g := binary.LittleEndian.Uint32(b[248:]), binary.LittleEndian.Uint32(b[252:]); s != wantStride || g != wantType {
					t.Errorf("NCCL read ginCustomStride %d ginType %d, want %d %d", s, g, wantStride, wantType)
				}
			}
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// What NCCL 2.31 refuses, and what the binding refuses before NCCL sees it.
func TestFakeDevComm231Refusals(t *testing.T) {
	stride := nccl.GINConnectionCustomStride
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_GIN_TYPE=3", "FAKE_NCCL_GIN_CONNECTION=2"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 0, nil) // ginMinStride: the LSA size, 4 on the fake's one node
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: &stride, GINCustomStride: nccl.Ptr(2)})
		if !errors.Is(err, nccl.ErrInvalidArgument) || !strings.Contains(err.Error(), "ginMinStride") {
			t.Errorf("a stride below ginMinStride: %v", err)
		}
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{CFTCaps: nccl.Ptr(nccl.CFTUnicast)})
		if !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("CFT on a communicator without it: %v", err)
		}
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINCustomStride: nccl.Ptr(0)})
		if !errors.Is(err, nccl.ErrInvalidArgument) || !strings.Contains(err.Error(), "GINCustomStride") {
			t.Errorf("stride 0: %v", err)
		}
		if n := faketest.Calls(t, "ncclDevCommCreate"); n != 2 {
			t.Errorf("ncclDevCommCreate called %d times, want 2 (the binding refuses stride 0 itself)", n)
		}
	})
	// A library newer than 2.31.2 reports its ncclDevComm_t size only in a
	// properties layout that is not established: UseRuntimeVersion is
	// refused there, and so are the 2.31 fields without it.
	faketest.Run(t, faketest.Env{Release: 23102, Version: 23203}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{UseRuntimeVersion: nccl.Ptr(true)})
		var le *nccl.UnknownLayoutError
		if !errors.As(err, &le) || le.Struct != "ncclDevComm_t" || !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("UseRuntimeVersion on 2.32.3: %v", err)
		}
		_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINCustomStride: nccl.Ptr(2)})
		if !errors.As(err, &le) || !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "GINCustomStride is not sent to it") {
			t.Errorf("GINCustomStride on 2.32.3: %v", err)
		}
		if n := faketest.Calls(t, "ncclDevCommCreate"); n != 0 {
			t.Errorf("ncclDevCommCreate called %d times", n)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23100}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{CFTCaps: nccl.Ptr(nccl.CFTNone)})
		wantUnsupported(t, "cftCaps on 2.31.0", err, "ncclDevCommRequirements_t.cftCaps", 23102)
	})
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: &stride})
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "NCCL_GIN_CONNECTION_CUSTOM_STRIDE: requires NCCL 2.31.0, loaded 2.30.7") {
			t.Errorf("CUSTOM_STRIDE on 2.30.7: %v", err)
		}
	})
}

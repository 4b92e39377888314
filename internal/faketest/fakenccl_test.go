package faketest_test

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The fake NCCL's versioned structs, driven through the shim directly, so
// that a declared version the binding would not send can be tried: the
// rules NCCL's src/init.cc applies to a caller's declared version, per
// library release.

// rawComm loads the fakes and creates a blocking communicator of nranks
// ranks (rank 0) on device 0.
func rawComm(t *testing.T, nranks int) uintptr {
	t.Helper()
	if msg, ok := capi.LoadCUDA(os.Getenv("NCCL4GO_CUDA_LIBRARY")); !ok {
		t.Fatal(msg)
	}
	if r := capi.CuInit(); r != 0 {
		t.Fatalf("cuInit: %d", r)
	}
	ctx, r := capi.CuDevicePrimaryCtxRetain(0)
	if r != 0 {
		t.Fatalf("cuDevicePrimaryCtxRetain: %d", r)
	}
	if msg, ok := capi.LoadNCCL(os.Getenv("NCCL_LIBRARY")); !ok {
		t.Fatal(msg)
	}
	var id [128]byte
	if st := capi.GetUniqueID(&id); st.Code != 0 {
		t.Fatalf("ncclGetUniqueId: %+v", st)
	}
	cfg := capi.NewConfig(23007)
	cfg.Blocking = 1
	cell := capi.NewCell()
	defer cell.Free()
	if st := capi.CommInitRankConfig(ctx, cell, nranks, &id, 0, &cfg); st.Code != 0 {
		t.Fatalf("ncclCommInitRankConfig: %+v", st)
	}
	return cell.Load()
}

type propsCase struct {
	declared uint32
	narrow   bool
	code     int32 // expected result
	want     capi.Props
}

func checkProps(t *testing.T, comm uintptr, cases []propsCase) {
	t.Helper()
	for _, c := range cases {
		got, st := capi.CommQueryProperties(comm, c.declared, c.narrow)
		if st.Code != c.code {
			t.Errorf("declared %d: result %d (%s), want %d", c.declared, st.Code, st.Detail, c.code)
			continue
		}
		if st.Code == 0 && got != c.want {
			t.Errorf("declared %d: %+v, want %+v", c.declared, got, c.want)
		}
	}
}

const invalidUsage = 5

func TestFakeProperties(t *testing.T) {
	extra := []string{"FAKE_NCCL_GIN_TYPE=3", "FAKE_NCCL_RAILED_GIN_TYPE=2", "FAKE_NCCL_HOST_RMA=1", "FAKE_NCCL_LSA_TEAMS=2"}
	// Two ranks in two LSA teams: the older layouts clear deviceApiSupport.
	six := capi.Props{Rank: 0, NRanks: 2, CUDADev: 0, NVMLDev: 1, DeviceAPISupport: true}
	narrow := six
	narrow.GINType = 3
	filtered := six
	filtered.DeviceAPISupport = false
	wide := six
	wide.GINType, wide.NLsaTeams, wide.HostRMASupport, wide.RailedGINType = 3, 2, true, 2
	wideFiltered := wide
	wideFiltered.DeviceAPISupport, wideFiltered.GINType, wideFiltered.RailedGINType = false, 0, 0

	t.Run("2.29.2", func(t *testing.T) {
		faketest.Run(t, faketest.Env{Release: 22902, Extra: extra}, func(t *testing.T) {
			checkProps(t, rawComm(t, 2), []propsCase{
				{22902, true, 0, narrow},
				{21000, true, 0, narrow}, // no lower bound
				{22903, true, invalidUsage, capi.Props{}},
			})
		})
	})
	t.Run("2.29.7", func(t *testing.T) {
		faketest.Run(t, faketest.Env{Release: 22907, Extra: extra}, func(t *testing.T) {
			checkProps(t, rawComm(t, 2), []propsCase{
				{22902, true, 0, filtered}, // the 2.29.2 shim: ginType NONE
				{22907, false, 0, wide},
				{22905, false, 0, wide},
				{22000, false, 0, wide}, // below 22902: the current layout
				{22908, false, invalidUsage, capi.Props{}},
			})
		})
		faketest.Run(t, faketest.Env{Release: 22907, Extra: append(extra, "NCCL_ENABLE_VERSION_CHECK=0")}, func(t *testing.T) {
			checkProps(t, rawComm(t, 2), []propsCase{{23007, false, 0, wide}})
		})
	})
	t.Run("2.30.7", func(t *testing.T) {
		faketest.Run(t, faketest.Env{Release: 23007, Extra: extra}, func(t *testing.T) {
			checkProps(t, rawComm(t, 2), []propsCase{
				{22902, true, 0, filtered},
				{22903, true, 0, filtered},
				{22904, true, invalidUsage, capi.Props{}},
				{22907, false, 0, wideFiltered},
				{22999, false, invalidUsage, capi.Props{}},
				{23000, false, 0, wide},
				{23003, false, 0, wide},
				{23007, false, 0, wide},
				{23008, false, invalidUsage, capi.Props{}},
				{21000, false, invalidUsage, capi.Props{}},
			})
		})
	})
	// A 2.31 library keeps 2.30's layouts for [23000, 23007] only and takes
	// [23100, itself] as the 144-byte 2.31 layout (STyGIANet/nccl 2.31.0a16
	// src/devcomm/devcomm_v23000.cc, devcomm_v23100.cc): a binding declaring
	// a version above 23007 with the 56-byte struct would be overrun, one
	// between 23008 and 23099 is refused.
	t.Run("2.31", func(t *testing.T) {
		faketest.Run(t, faketest.Env{Release: 23007, Version: 23105, Extra: extra}, func(t *testing.T) {
			checkProps(t, rawComm(t, 2), []propsCase{
				{23007, false, 0, wide},
				{23008, false, invalidUsage, capi.Props{}},
				{23099, false, invalidUsage, capi.Props{}},
				{23106, false, invalidUsage, capi.Props{}},
			})
		})
	})
}

func TestFakeDevCommLayouts(t *testing.T) {
	i32 := func(b []byte, off int) int32 { return int32(binary.LittleEndian.Uint32(b[off:])) }
	create := func(t *testing.T, comm uintptr, reqs []byte) ([]byte, capi.Status) {
		dc := capi.NewDevComm()
		defer dc.Free()
		st := capi.DevCommCreate(comm, reqs, dc)
		return dc.Bytes(), st
	}
	wantDevComm := func(t *testing.T, what string, b []byte, off, written int) {
		t.Helper()
		if i32(b, off) != 0 || i32(b, off+4) != 3 || i32(b, off+12) != 0 || i32(b, off+16) != 3 {
			t.Errorf("%s: rank %d nRanks %d lsaRank %d lsaSize %d at %d", what, i32(b, off), i32(b, off+4),
				i32(b, off+12), i32(b, off+16), off)
		}
		for i := written; i < len(b); i++ {
			if b[i] != 0 {
				t.Errorf("%s: byte %d written beyond the %d-byte layout", what, i, written)
				break
			}
		}
	}
	reqs := func(declared uint32, size int) []byte {
		return capi.EncodeDevCommReqs(capi.DevCommReqs{LsaBarrierCount: 1}, capi.ReqsVersioned, declared, size)
	}
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		comm := rawComm(t, 3)
		b, st := create(t, comm, reqs(23007, 96))
		if st.Code != 0 {
			t.Fatalf("v23007: %+v", st)
		}
		if uint32(i32(b, 0)) != capi.APIMagic || i32(b, 4) != 23007 {
			t.Errorf("v23007 header: magic %#x version %d", uint32(i32(b, 0)), i32(b, 4))
		}
		wantDevComm(t, "v23007", b, 8, 240)
		b, st = create(t, comm, reqs(22907, 88))
		if st.Code != 0 {
			t.Fatalf("v22907: %+v", st)
		}
		wantDevComm(t, "v22907", b, 0, 224)
		b, st = create(t, comm, reqs(22902, 72))
		if st.Code != 0 {
			t.Fatalf("v22902: %+v", st)
		}
		wantDevComm(t, "v22902", b, 0, 200)
		for _, bad := range []struct {
			declared uint32
			size     int
			code     int32
		}{
			{23007, 88, 4}, {22907, 96, 4}, {23008, 96, invalidUsage}, {22904, 72, invalidUsage},
		} {
			if _, st := create(t, comm, reqs(bad.declared, bad.size)); st.Code != bad.code {
				t.Errorf("declared %d, size %d: %+v, want code %d", bad.declared, bad.size, st, bad.code)
			}
		}
		// GIN resources need GIN enabled.
		gin := capi.EncodeDevCommReqs(capi.DevCommReqs{GinSignalCount: 1}, capi.ReqsVersioned, 23007, 96)
		if _, st := create(t, comm, gin); st.Code != 4 {
			t.Errorf("GIN signals without GIN: %+v, want ncclInvalidArgument", st)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		comm := rawComm(t, 3)
		b, st := create(t, comm, capi.EncodeDevCommReqs(capi.DevCommReqs{LsaBarrierCount: 1}, capi.ReqsV22803, 0, 0))
		if st.Code != 0 {
			t.Fatalf("v22803: %+v", st)
		}
		wantDevComm(t, "v22803", b, 0, 88)
	})
}

// A non-blocking communicator: an operation stays in progress for
// FAKE_NCCL_POLLS polls and writes its late output when it completes.
func TestFakeInProgress(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		rawComm(t, 1) // loads the libraries
		ctx, _ := capi.CuDevicePrimaryCtxRetain(0)
		var id [128]byte
		capi.GetUniqueID(&id)
		cfg := capi.NewConfig(23007)
		cfg.Blocking = 0
		cell := capi.NewCell()
		defer cell.Free()
		capi.NonBlockingAdd(1) // the gate checks readiness only while one is alive
		defer capi.NonBlockingAdd(-1)
		if st := capi.CommInitRankConfig(ctx, cell, 1, &id, 0, &cfg); st.Code != 7 {
			t.Fatalf("non-blocking init: %+v, want ncclInProgress", st)
		}
		comm := cell.Load()
		if comm == 0 {
			t.Fatal("init did not write the communicator before returning")
		}
		// While in progress, a gated call is not made; a direct query is refused.
		if _, st := capi.CommCount(comm); st.Code != capi.Pending {
			t.Errorf("CommCount in progress: %+v, want Pending", st)
		}
		states := []int32{}
		for range 4 {
			s, st := capi.CommGetAsyncError(comm)
			if st.Code != 0 {
				t.Fatal(st)
			}
			states = append(states, s)
		}
		// The gated CommCount used one poll.
		if states[0] != 7 || states[1] != 0 || states[3] != 0 {
			t.Errorf("async states %v, want 7 then 0", states)
		}
		// A split child appears when the split completes.
		child := capi.NewCell()
		defer child.Free()
		if st := capi.CommSplit(comm, 0, 0, child, nil); st.Code != 7 {
			t.Fatalf("split: %+v, want ncclInProgress", st)
		}
		if child.Load() != 0 {
			t.Error("the split child was written before the split completed")
		}
		for i := 0; i < 3; i++ {
			capi.CommGetAsyncError(comm)
		}
		if child.Load() == 0 {
			t.Fatal("the split child was not written when the split completed")
		}
		if n, st := capi.CommCount(child.Load()); st.Code != 0 || n != 1 {
			t.Errorf("child CommCount = %d, %+v", n, st)
		}
	})
}

// NCCL's ncclCommDestroy returns early after ncclGroupStartInternal for a
// destroyed or broken communicator, leaving the thread's group depth raised,
// after which the thread's next init or collective would silently wait for a
// group end. The shim repairs the depth: a later ncclGroupEnd on the same
// thread finds no group.
func TestShimRepairsLeakedGroupDepth(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		comm := rawComm(t, 1)
		if st := capi.CommDestroy(comm); st.Code != 0 {
			t.Fatalf("first destroy: %+v", st)
		}
		if st := capi.CommDestroy(comm); st.Code != 4 {
			t.Fatalf("second destroy: %+v, want ncclInvalidArgument", st)
		}
		if st := capi.GroupEnd(); st.Code != 5 {
			t.Errorf("ncclGroupEnd after the failed destroy: %+v, want ncclInvalidUsage (not in a group): the leaked depth was not repaired", st)
		}
	})
}

// The 2.31 ncclCommProperties_t (144 bytes; STyGIANet/nccl 2.31.0a16
// src/include/nccl_device/core.h, the same fields in nccl4py's bindings of
// 2.31.2): commHash 56, ginMinStride 64, ginConnectionType 68,
// ginSupport[64] 72, devCommRuntimeVersionSize 136, filled for a caller
// declaring 2.31.0 or later; a caller declaring 23007 gets the 56-byte
// layout with nothing written past it.
func TestFakeProperties231(t *testing.T) {
	extra := []string{"FAKE_NCCL_GIN_TYPE=3", "FAKE_NCCL_GIN_CONNECTION=2", "FAKE_NCCL_LSA_TEAMS=2"}
	faketest.Run(t, faketest.Env{Release: 23102, Extra: extra}, func(t *testing.T) {
		comm := rawComm(t, 4)
		query := func(declared uint32) ([18]uint64, capi.Status) {
			var raw [18]uint64 // 144 bytes, 8-aligned
			for i := range raw {
				raw[i] = 0xa5a5a5a5a5a5a5a5
			}
			b := (*[144]byte)(unsafe.Pointer(&raw))
			binary.LittleEndian.PutUint64(b[0:], 144)
			binary.LittleEndian.PutUint32(b[8:], capi.APIMagic)
			binary.LittleEndian.PutUint32(b[12:], declared)
			st := capi.QueryProperties(comm, unsafe.Pointer(&raw))
			runtime.KeepAlive(&raw)
			return raw, st
		}
		raw, st := query(23102)
		if st.Code != 0 {
			t.Fatalf("declared 23102: %+v", st)
		}
		b := (*[144]byte)(unsafe.Pointer(&raw))
		le := binary.LittleEndian
		if h := le.Uint64(b[56:]); h == 0 || h == 0xa5a5a5a5a5a5a5a5 {
			t.Errorf("commHash %#x not written", h)
		}
		if s, c := int32(le.Uint32(b[64:])), int32(le.Uint32(b[68:])); s != 2 || c != 2 {
			t.Errorf("ginMinStride %d, ginConnectionType %d; want 2 (the LSA size, RAIL), 2", s, c)
		}
		for i := 0; i < 64; i++ {
			if want := byte(0); i == 3 && b[72+i] != 1 || i != 3 && b[72+i] != want {
				t.Errorf("ginSupport[%d] = %d", i, b[72+i])
			}
		}
		if n := le.Uint64(b[136:]); n == 0 || n > 256 {
			t.Errorf("devCommRuntimeVersionSize %d", n)
		}
		raw, st = query(23007)
		if st.Code != 0 {
			t.Fatalf("declared 23007: %+v", st)
		}
		b = (*[144]byte)(unsafe.Pointer(&raw))
		for i := 56; i < 144; i++ {
			if b[i] != 0xa5 {
				t.Fatalf("declared 23007: byte %d written (%#x): the 2.30 layout is 56 bytes", i, b[i])
			}
		}
		if _, st = query(23050); st.Code != invalidUsage {
			t.Errorf("declared 23050: %+v, want ncclInvalidUsage (no compat entry)", st)
		}
	})
}

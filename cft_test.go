package nccl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// CFT teams and logical-endpoint queries (NCCL 2.31.2) against the fake
// NCCL, which answers as NVIDIA's 2.31.2 src/nccl_device/core.cc and
// src/cft_dev_runtime.cc do: without CFT (FAKE_NCCL_CFT unset, as on every
// GPU before Blackwell) the CFT teams are the rank alone and the queries
// fail; with it the CFT teams are the LSA team.

func TestFakeTeamCFTWithoutCFT(t *testing.T) {
	one := nccl.Team{NRanks: 1, Rank: 0, Stride: 1}
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, nil) // one LSA team of 4 ranks
		for _, m := range []nccl.CFTTeamMode{nccl.CFTTeamFlat, nccl.CFTTeamHierMultimem} {
			if got, err := c.TeamCFT(m); err != nil || got != one {
				t.Errorf("TeamCFT(%v) = %v, %v; want %v", m, got, err, one)
			}
		}
		if got, err := c.TeamCFTMultimem(); err != nil || got != one {
			t.Errorf("TeamCFTMultimem = %v, %v; want %v", got, err, one)
		}
		// The LSA team (4) is larger than the CFT team (1): NCCL's
		// hierarchical team is empty.
		got, err := c.TeamCFT(nccl.CFTTeamHierLSA)
		if !errors.Is(err, nccl.ErrUnsupported) || got != (nccl.Team{}) || !strings.Contains(err.Error(), "smaller than its LSA team") ||
			!strings.Contains(err.Error(), "NCCL_CFT_TEAM_HIER_LSA") {
			t.Errorf("TeamCFT(HierLSA) = %v, %v; want an error wrapping ErrUnsupported", got, err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_LSA_TEAMS=4"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, nil) // LSA teams of one rank
		if got, err := c.TeamCFT(nccl.CFTTeamHierLSA); err != nil || got != one {
			t.Errorf("TeamCFT(HierLSA) with single-rank LSA teams = %v, %v; want %v", got, err, one)
		}
	})
}

func TestFakeTeamCFT(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1", "FAKE_NCCL_LSA_TEAMS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 8, 5, nil) // LSA (and CFT) teams of 4: index 1
		for _, tc := range []struct {
			mode nccl.CFTTeamMode
			want nccl.Team
		}{
			{nccl.CFTTeamFlat, nccl.Team{NRanks: 4, Rank: 1, Stride: 1}},
			{nccl.CFTTeamHierMultimem, nccl.Team{NRanks: 1, Rank: 0, Stride: 4}},
			{nccl.CFTTeamHierLSA, nccl.Team{NRanks: 1, Rank: 0, Stride: 4}},
		} {
			if got, err := c.TeamCFT(tc.mode); err != nil || got != tc.want {
				t.Errorf("TeamCFT(%v) = %v, %v; want %v", tc.mode, got, err, tc.want)
			}
		}
		if got, err := c.TeamCFTMultimem(); err != nil || got != (nccl.Team{NRanks: 4, Rank: 1, Stride: 1}) {
			t.Errorf("TeamCFTMultimem = %v, %v", got, err)
		}
		flat, _ := c.TeamCFT(nccl.CFTTeamFlat)
		if w, err := c.TeamRankToWorld(flat, 3); err != nil || w != 7 {
			t.Errorf("TeamRankToWorld(flat, 3) = %d, %v; want 7", w, err)
		}
		calls := faketest.Calls(t, "ncclTeamCft")
		for _, m := range []nccl.CFTTeamMode{-1, 3, 1 << 20} {
			_, err := c.TeamCFT(m)
			wantArgErr(t, err, "TeamCFT", "mode", "not NCCL_CFT_TEAM_FLAT")
		}
		if n := faketest.Calls(t, "ncclTeamCft"); n != calls {
			t.Errorf("ncclTeamCft called %d times for bad modes", n-calls)
		}
		var null nccl.Communicator
		if _, err := null.TeamCFT(nccl.CFTTeamFlat); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("TeamCFT on the null communicator: %v", err)
		}
		if _, err := null.TeamCFTMultimem(); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("TeamCFTMultimem on the null communicator: %v", err)
		}
	})
}

// NCCL returns empty CFT teams when it cannot initialize its device
// runtime: an internal error, for the hierarchical shapes too.
func TestFakeTeamCFTDeviceRuntimeFails(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_DEVR_FAIL=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		for _, m := range []nccl.CFTTeamMode{nccl.CFTTeamFlat, nccl.CFTTeamHierLSA} {
			_, err := c.TeamCFT(m)
			var ne *nccl.Error
			if !errors.Is(err, nccl.ErrInternal) || !errors.As(err, &ne) || !strings.Contains(ne.Detail, "ncclTeamCft returned an empty team") {
				t.Errorf("TeamCFT(%v): %v, want an internal error about the device runtime", m, err)
			}
		}
		if _, err := c.TeamCFTMultimem(); !errors.Is(err, nccl.ErrInternal) || !strings.Contains(err.Error(), "device runtime") {
			t.Errorf("TeamCFTMultimem: %v", err)
		}
	})
}

// cftWindow registers a window of 1024 float32 on c.
func cftWindow(t *testing.T, c *nccl.Communicator) *nccl.Window {
	t.Helper()
	buf := mustMemAlloc[float32](t, 0, 1024)
	w, err := c.RegisterWindow(nccl.BufferOf(buf), nccl.WindowCollSymmetric)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestFakeCFTAddressesWithoutCFT(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		w := cftWindow(t, c)
		flat, err := c.TeamCFT(nccl.CFTTeamFlat)
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]func() (nccl.CFTAddress, error){
			"CFTAddress":         func() (nccl.CFTAddress, error) { return w.CFTAddress(flat, 0, 0) },
			"CFTPeerAddress":     func() (nccl.CFTAddress, error) { return w.CFTPeerAddress(0, 0) },
			"CFTMultimemAddress": func() (nccl.CFTAddress, error) { return w.CFTMultimemAddress(0) },
		} {
			a, err := f()
			var ne *nccl.Error
			if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument ||
				!strings.Contains(err.Error(), "no CFT (CUDA fabric logical endpoints need Blackwell GPUs") || a != (nccl.CFTAddress{}) {
				t.Errorf("%s without CFT = %v, %v; want ErrUnsupported and NCCL's ncclInvalidArgument", name, a, err)
			}
		}
	})
}

func TestFakeCFTAddresses(t *testing.T) {
	// 4 ranks, rank 1, one CFT team of 4; logical endpoints from the
	// communicator's hostCftMode.
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1", "FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		first := cftWindow(t, c) // 4 KiB: its part of the symmetric range takes 2 MiB
		w := cftWindow(t, c)
		const big = 2 << 20 // the second window's place in the symmetric range (the fake's)
		flat, err := c.TeamCFT(nccl.CFTTeamFlat)
		if err != nil || flat != (nccl.Team{NRanks: 4, Rank: 1, Stride: 1}) {
			t.Fatalf("TeamCFT = %v, %v", flat, err)
		}
		if a, err := w.CFTAddress(flat, 3, 64); err != nil || a != (nccl.CFTAddress{Endpoint: 0x100 + 3, Offset: big + 64}) {
			t.Errorf("CFTAddress(flat, 3, 64) = %v, %v", a, err)
		}
		if a, err := first.CFTAddress(flat, 0, 8); err != nil || a != (nccl.CFTAddress{Endpoint: 0x100, Offset: 8}) {
			t.Errorf("first window: CFTAddress(flat, 0, 8) = %v, %v", a, err)
		}
		if a, err := w.CFTPeerAddress(2, 100); err != nil || a != (nccl.CFTAddress{Endpoint: 0x100 + 2, Offset: big + 100}) {
			t.Errorf("CFTPeerAddress(2, 100) = %v, %v", a, err)
		}
		a, err := w.CFTMultimemAddress(4)
		if err != nil || a != (nccl.CFTAddress{Endpoint: 0x800, Offset: big + 4}) {
			t.Errorf("CFTMultimemAddress(4) = %v, %v", a, err)
		}
		if s := a.String(); s != "le 0x800+0x200004" {
			t.Errorf("String = %q", s)
		}
		// Bad input never reaches NCCL.
		before := faketest.Calls(t, "ncclGetCftDeviceLeInfo") + faketest.Calls(t, "ncclGetPeerDeviceLeInfo") + faketest.Calls(t, "ncclGetMultimemDeviceLeInfo")
		_, err = w.CFTAddress(flat, 4, 0)
		wantArgErr(t, err, "Window.CFTAddress", "peer", "outside the team's 4 members")
		_, err = w.CFTAddress(flat, -1, 0)
		wantArgErr(t, err, "Window.CFTAddress", "peer")
		_, err = w.CFTAddress(nccl.Team{NRanks: 2, Rank: 2, Stride: 1}, 0, 0)
		wantArgErr(t, err, "Window.CFTAddress", "team", "not a team")
		_, err = w.CFTAddress(flat, 0, 4096)
		wantArgErr(t, err, "Window.CFTAddress", "offsetBytes", "not below the window's 4096 bytes")
		// The world team of another communicator's rank 3: member 0 is CFT
		// rank -2 of this rank's team.
		_, err = w.CFTAddress(nccl.Team{NRanks: 4, Rank: 3, Stride: 1}, 0, 0)
		wantArgErr(t, err, "Window.CFTAddress", "team", "not a CFT team of this rank")
		_, err = w.CFTPeerAddress(4, 0)
		wantArgErr(t, err, "Window.CFTPeerAddress", "peer")
		_, err = w.CFTPeerAddress(0, 1<<20)
		wantArgErr(t, err, "Window.CFTPeerAddress", "offsetBytes")
		_, err = w.CFTMultimemAddress(4096)
		wantArgErr(t, err, "Window.CFTMultimemAddress", "offsetBytes")
		after := faketest.Calls(t, "ncclGetCftDeviceLeInfo") + faketest.Calls(t, "ncclGetPeerDeviceLeInfo") + faketest.Calls(t, "ncclGetMultimemDeviceLeInfo")
		if after != before {
			t.Errorf("NCCL called %d times for refused arguments", after-before)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.CFTPeerAddress(0, 0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("CFTPeerAddress after Close: %v", err)
		}
		var nilw *nccl.Window
		if _, err := nilw.CFTMultimemAddress(0); !errors.Is(err, nccl.ErrClosed) {
			t.Errorf("CFTMultimemAddress of a nil window: %v", err)
		}
	})
	// A peer outside the flat CFT team: NCCL refuses it. 8 ranks in CFT
	// teams of 4: rank 5's team is ranks 4 to 7.
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1", "FAKE_NCCL_LSA_TEAMS=2"}}, func(t *testing.T) {
		c := fakeComm(t, 8, 5, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		w := cftWindow(t, c)
		if a, err := w.CFTPeerAddress(7, 0); err != nil || a.Endpoint != 0x100+3 {
			t.Errorf("CFTPeerAddress(7) = %v, %v; want endpoint 0x103 (CFT rank 3)", a, err)
		}
		_, err := w.CFTPeerAddress(2, 0)
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument || !strings.Contains(ne.Detail, "not within the flat CFT team") {
			t.Errorf("CFTPeerAddress(2): %v, want NCCL's ncclInvalidArgument", err)
		}
		// The rail team (ranks 1 and 5) is no CFT team of this rank.
		rail, _ := c.TeamRail()
		_, err = w.CFTAddress(rail, 0, 0)
		wantArgErr(t, err, "Window.CFTAddress", "team", "not a CFT team of this rank")
	})
}

// The unicast logical endpoints exist only after the communicator was made
// with HostCFTMode, or a device communicator with CFTUnicast was; the
// multicast one is made by the first query, which needs multicast (NVLS).
func TestFakeCFTAddressesNeedEndpoints(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1", "FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		w := cftWindow(t, c)
		_, err := w.CFTPeerAddress(1, 0)
		if !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "Config.HostCFTMode") {
			t.Errorf("CFTPeerAddress before any logical endpoint: %v, want ErrInvalidUsage naming HostCFTMode", err)
		}
		flat, _ := c.TeamCFT(nccl.CFTTeamFlat)
		if _, err := w.CFTAddress(flat, 1, 0); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("CFTAddress before any logical endpoint: %v", err)
		}
		if a, err := w.CFTMultimemAddress(0); err != nil || a.Endpoint != 0x800 {
			t.Errorf("CFTMultimemAddress (makes the multicast endpoint) = %v, %v", a, err)
		}
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{CFTCaps: nccl.Ptr(nccl.CFTUnicast)})
		if err != nil {
			t.Fatalf("CreateDevComm with CFTUnicast: %v", err)
		}
		defer d.Close()
		if a, err := w.CFTPeerAddress(1, 0); err != nil || a.Endpoint != 0x101 {
			t.Errorf("CFTPeerAddress after a CFT device communicator = %v, %v", a, err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		w := cftWindow(t, c)
		_, err := w.CFTMultimemAddress(0)
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument || !strings.Contains(ne.Detail, "NVLS") {
			t.Errorf("CFTMultimemAddress without multicast: %v, want NCCL's ncclInvalidArgument", err)
		}
	})
}

// Before 2.31.2 (the STyGIANet fork's 2.31.0 included) every CFT call is
// refused with the release that added it, before NCCL.
func TestFakeCFTUnsupported(t *testing.T) {
	for _, r := range []int{22803, 23007, 23100} {
		faketest.Run(t, faketest.Env{Release: r, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
			c := fakeComm(t, 2, 0, nil)
			wantCFTUnsupported(t, c, cftWindow(t, c))
			_, err := c.TeamCFT(7) // the gate first, whatever the mode
			wantUnsupported(t, "TeamCFT(7)", err, "ncclTeamCft", 23102)
		})
	}
}

// wantCFTUnsupported checks that each CFT call of c and w is refused with
// its first release, 2.31.2 (w may be nil: the gate comes first).
func wantCFTUnsupported(t *testing.T, c *nccl.Communicator, w *nccl.Window) {
	t.Helper()
	_, err := c.TeamCFT(nccl.CFTTeamFlat)
	wantUnsupported(t, "TeamCFT", err, "ncclTeamCft", 23102)
	_, err = c.TeamCFTMultimem()
	wantUnsupported(t, "TeamCFTMultimem", err, "ncclTeamCftMultimem", 23102)
	_, err = w.CFTAddress(nccl.Team{NRanks: 1, Stride: 1}, 0, 0)
	wantUnsupported(t, "CFTAddress", err, "ncclGetCftDeviceLeInfo", 23102)
	_, err = w.CFTPeerAddress(0, 0)
	wantUnsupported(t, "CFTPeerAddress", err, "ncclGetPeerDeviceLeInfo", 23102)
	_, err = w.CFTMultimemAddress(0)
	wantUnsupported(t, "CFTMultimemAddress", err, "ncclGetMultimemDeviceLeInfo", 23102)
}

func TestCFTTeamModeString(t *testing.T) {
	for m, want := range map[nccl.CFTTeamMode]string{
		nccl.CFTTeamFlat: "NCCL_CFT_TEAM_FLAT", nccl.CFTTeamHierMultimem: "NCCL_CFT_TEAM_HIER_MULTIMEM",
		nccl.CFTTeamHierLSA: "NCCL_CFT_TEAM_HIER_LSA", 9: "ncclCftTeamMode_t(9)",
	} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", int32(m), got, want)
		}
	}
}

// Window.CFTAddress looks up this rank's flat CFT team itself: when that
// fails (the communicator destroyed, NCCL's device runtime down), the error
// names Window.CFTAddress, the call the user made, not TeamCFT.
func TestFakeCFTAddressErrorsNameIt(t *testing.T) {
	const op = "Window.CFTAddress"
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		w := cftWindow(t, c)
		flat, err := c.TeamCFT(nccl.CFTTeamFlat)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		_, err = w.CFTAddress(flat, 0, 0)
		if !errors.Is(err, nccl.ErrClosed) && !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("CFTAddress after Destroy: %v, want an error wrapping ErrClosed", err)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "nccl: "+op+": ") {
			t.Errorf("CFTAddress after Destroy: %q, want it to name %s", err, op)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1", "FAKE_NCCL_DEVR_FAIL=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTEnable)})
		w := cftWindow(t, c)
		_, err := w.CFTAddress(nccl.Team{NRanks: 1, Stride: 1}, 0, 0)
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InternalError || ne.Op != op || !strings.Contains(ne.Detail, "ncclTeamCft returned an empty team") {
			t.Errorf("CFTAddress with NCCL's device runtime down: %v, want an internal error of %s", err, op)
		}
	})
}

// A communicator made with HostCFTDisable has no logical endpoints: the
// error says which HostCFTMode values make them, not only the field the
// user already set.
func TestFakeCFTAddressHostCFTDisable(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23102, Extra: []string{"FAKE_NCCL_CFT=1"}}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, &nccl.Config{HostCFTMode: nccl.Ptr(nccl.HostCFTDisable)})
		w := cftWindow(t, c)
		_, err := w.CFTPeerAddress(1, 0)
		if !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "HostCFTMode HostCFTEnable (not HostCFTDisable)") {
			t.Errorf("CFTPeerAddress with HostCFTDisable: %v, want ErrInvalidUsage naming HostCFTEnable", err)
		}
	})
}

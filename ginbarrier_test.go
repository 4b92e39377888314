package nccl_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// ginBarrier is c's GIN barrier resource of n barriers over team.
func ginBarrier(t *testing.T, c *nccl.Communicator, team nccl.Team, n int) *nccl.DevResource {
	t.Helper()
	g, err := c.GINBarrierResource(team, n)
	if err != nil {
		t.Fatalf("GINBarrierResource(%v, %d): %v", team, n, err)
	}
	return g
}

// railedOnlyGIN is a 2.30.7 fake whose communicators' GIN is railed only
// (GIN type NONE, railed GIN type PROXY).
var railedOnlyGIN = faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_GIN_TYPE=0", "FAKE_NCCL_RAILED_GIN_TYPE=2"}}

// GIN barriers (ncclGinBarrierCreateRequirement, NCCL 2.28.7) against the
// fake NCCL, which fills the requirement as each release's
// src/nccl_device/gin_barrier.cc does and assigns GIN signals as
// ncclDevrCommCreateInternal does: the caller's ginSignalCount first, then
// NCCL's own barriers', then the resources' in list order.
func TestFakeGINBarrierResource(t *testing.T) {
	for _, tc := range []struct {
		release     int
		conn        func(*nccl.DevCommRequirements)
		bufferSize  uint64 // of 3 barriers
		signals     int    // of 3 barriers over 4 ranks
		missingConn string // the field CreateDevComm names without GIN
	}{
		{22807, func(q *nccl.DevCommRequirements) { q.GINForceEnable = nccl.Ptr(true) }, 3 * 16, 3, "DevCommRequirements.GINForceEnable"},
		{22907, func(q *nccl.DevCommRequirements) { q.GINConnectionType = nccl.Ptr(nccl.GINConnectionFull) }, 0, 12, "DevCommRequirements.GINConnectionType"},
		{23007, func(q *nccl.DevCommRequirements) { q.GINConnectionType = nccl.Ptr(nccl.GINConnectionFull) }, 0, 12, "DevCommRequirements.GINConnectionType"},
		{23102, func(q *nccl.DevCommRequirements) { q.GINConnectionType = nccl.Ptr(nccl.GINConnectionRail) }, 0, 12, "DevCommRequirements.GINConnectionType"},
	} {
		env := faketest.Env{Release: tc.release, Extra: []string{"FAKE_NCCL_GIN_TYPE=2", "FAKE_NCCL_RAILED_GIN_TYPE=2", "FAKE_NCCL_POLLS=2"}}
		faketest.Run(t, env, func(t *testing.T) {
			c, world := fakeWorld(t, 4, 1)
			g := ginBarrier(t, c, world, 3)
			if b, n := nccl.DevResourceRequirement(g); b != tc.bufferSize || n != tc.signals {
				t.Errorf("requirement: bufferSize %d, ginSignalCount %d; want %d, %d", b, n, tc.bufferSize, tc.signals)
			}
			if s := g.String(); s != "nccl.DevResource(GIN barrier)" {
				t.Errorf("String = %q", s)
			}
			if _, err := g.GINSignal(); !errors.Is(err, nccl.ErrInvalidUsage) {
				t.Errorf("GINSignal before CreateDevComm: %v", err)
			}
			// Without a GIN connection, the binding refuses before NCCL.
			_, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}})
			var ae *nccl.ArgError
			if !errors.As(err, &ae) || ae.Arg != tc.missingConn || !strings.Contains(ae.Reason, "Resources[0] is a GIN barrier") {
				t.Errorf("a GIN barrier without GIN: %v, want an ArgError on %s", err, tc.missingConn)
			}
			noNCCLCall(t, "ncclDevCommCreate")
			// The claim was given back: the same resource serves the next call.
			lsa, err := nccl.LSABarrierResource(world, 1)
			if err != nil {
				t.Fatal(err)
			}
			second := ginBarrier(t, c, world, 1)
			q := &nccl.DevCommRequirements{Resources: []*nccl.DevResource{lsa, g, second}, GINSignalCount: nccl.Ptr(5)}
			tc.conn(q)
			d, err := c.CreateDevComm(q)
			if err != nil {
				t.Fatalf("CreateDevComm: %v", err)
			}
			defer d.Close()
			s0, err := g.GINSignal()
			if err != nil || s0 != 5 {
				t.Errorf("GINSignal = %d, %v; want 5 (after the 5 signals of GINSignalCount)", s0, err)
			}
			s1, err := second.GINSignal()
			if want := uint32(5 + tc.signals); err != nil || s1 != want {
				t.Errorf("the second barrier's GINSignal = %d, %v; want %d", s1, err, want)
			}
			var arg [8]byte
			n, err := g.PutKernelArg(arg[:])
			if err != nil || n != 8 || binary.LittleEndian.Uint32(arg[:]) != 5 {
				t.Errorf("PutKernelArg: % x, %d, %v; want signal0 5 in the first 4 of 8 bytes", arg, n, err)
			}
			if tc.bufferSize != 0 && binary.LittleEndian.Uint32(arg[4:]) != 1 {
				t.Errorf("PutKernelArg: bufHandle %d, want 1 (after the LSA barrier's buffer)", binary.LittleEndian.Uint32(arg[4:]))
			}
			if _, _, err := g.Handle(); !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "use GINSignal") {
				t.Errorf("Handle of a GIN barrier: %v", err)
			}
			if _, err := lsa.GINSignal(); !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "an LSA barrier resource") {
				t.Errorf("GINSignal of an LSA barrier: %v", err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := g.GINSignal(); !errors.Is(err, nccl.ErrClosed) {
				t.Errorf("GINSignal after the device communicator's Close: %v", err)
			}
		})
	}
}

// NCCL's own barriers come first: from 2.30.3 a world GIN barrier takes
// nRanks signals before the caller's resources (2.30.7's
// ncclDevrCommCreateInternal).
func TestFakeGINBarrierAfterNCCLsBarriers(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_GIN_TYPE=2"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1)
		g := ginBarrier(t, c, world, 1)
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}, GINSignalCount: nccl.Ptr(2),
			WorldGINBarrierCount: nccl.Ptr(1), GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if s, err := g.GINSignal(); err != nil || s != 2+4 {
			t.Errorf("GINSignal = %d, %v; want 6 (2 signals, then the world barrier's 4)", s, err)
		}
	})
}

// A communicator without GIN: the binding refuses a GIN barrier's device
// communicator from the properties (ErrUnsupported), before NCCL; NCCL
// itself (2.29.7 and later) fails with ncclInvalidArgument.
func TestFakeGINBarrierWithoutGIN(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		g := ginBarrier(t, c, world, 1)
		q := &nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}, GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)}
		_, err := c.CreateDevComm(q)
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "no GPU-initiated networking") {
			t.Errorf("without GIN: %v, want an error wrapping ErrUnsupported", err)
		}
		noNCCLCall(t, "ncclDevCommCreate")
		nccl.WithoutDevCommPropertyChecks(func() { _, err = c.CreateDevComm(q) })
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument || !strings.Contains(ne.Detail, "support GIN") {
			t.Errorf("NCCL's own answer: %v, want ncclInvalidArgument", err)
		}
	})
}

func TestFakeGINBarrierArguments(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_GIN_TYPE=2"}}, func(t *testing.T) {
		c := fakeComm(t, 4, 1, nil)
		good := nccl.Team{NRanks: 4, Rank: 1, Stride: 1}
		for _, tc := range []struct {
			team  nccl.Team
			n     int
			arg   string
			words string
		}{
			{nccl.Team{}, 1, "team", "not a team"},
			{nccl.Team{NRanks: 2, Rank: 2, Stride: 1}, 1, "team", "not a team"},
			{nccl.Team{NRanks: 2, Rank: 0, Stride: 0}, 1, "team", "not a team"},
			{nccl.Team{NRanks: 8, Rank: 1, Stride: 1}, 1, "team", "outside this communicator's 4 ranks"},
			{nccl.Team{NRanks: 2, Rank: 0, Stride: 4}, 1, "team", "world ranks 1 to 5"},
			{nccl.Team{NRanks: 2, Rank: 1, Stride: 2}, 1, "team", "world ranks -1 to 1"},
			{good, 0, "nBarriers", "at least 1"},
			{good, -3, "nBarriers", "at least 1"},
			{good, math.MaxInt32/4 + 1, "nBarriers", "past NCCL's int"},
		} {
			_, err := c.GINBarrierResource(tc.team, tc.n)
			wantArgErr(t, err, "GINBarrierResource", tc.arg, tc.words)
		}
		noNCCLCall(t, "ncclGinBarrierCreateRequirement")
		if _, err := c.GINBarrierResource(nccl.Team{NRanks: 2, Rank: 0, Stride: 2}, 1); err != nil {
			t.Errorf("a team of ranks 1 and 3: %v", err)
		}
		var null nccl.Communicator
		if _, err := null.GINBarrierResource(good, 1); !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("on the null communicator: %v", err)
		}
		// A GIN barrier serves a device communicator of its own communicator.
		other := fakeComm(t, 4, 1, nil)
		g, _ := c.GINBarrierResource(good, 1)
		_, err := other.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g},
			GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)})
		wantArgErr(t, err, "CreateDevComm", "DevCommRequirements.Resources[0]", "another communicator")
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GINBarrierResource(good, 1); !errors.Is(err, nccl.ErrClosed) && !errors.Is(err, nccl.ErrNotInitialized) {
			t.Errorf("on a destroyed communicator: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, nil)
		_, err := c.GINBarrierResource(nccl.Team{NRanks: 1, Stride: 1}, 1)
		wantUnsupported(t, "GINBarrierResource", err, "ncclGinBarrierCreateRequirement", 22807)
	})
}

// GINForceEnable makes NCCL (2.29.7 and later) ask for a FULL GIN
// connection whatever GINConnectionType says ("ginForceEnable set to true,
// defaulting ginConnectionType to NCCL_GIN_CONNECTION_FULL"): on a
// communicator whose GIN is railed only, GINForceEnable with
// GINConnectionRail is refused from the properties (ErrUnsupported),
// before NCCL, as FULL alone is.
func TestFakeGINForceEnableMeansFull(t *testing.T) {
	faketest.Run(t, railedOnlyGIN, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1)
		g := ginBarrier(t, c, world, 1)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g},
			GINForceEnable: nccl.Ptr(true), GINConnectionType: nccl.Ptr(nccl.GINConnectionRail)})
		if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "GINForceEnable") {
			t.Errorf("GINForceEnable with GINConnectionRail on a railed-only communicator: %v, want an error wrapping ErrUnsupported that names GINForceEnable", err)
		}
		noNCCLCall(t, "ncclDevCommCreate")
	})
}

// A communicator whose GIN is railed only (NCCL's globalGinSupport RAIL:
// its properties say GIN type NONE and a railed GIN type): NCCL makes a
// device communicator with a RAIL connection, and refuses a FULL one with
// ncclInvalidArgument (2.30.7's ncclDevrCommCreateInternal). The fake
// answers the same.
func TestFakeGINRailOnly(t *testing.T) {
	faketest.Run(t, railedOnlyGIN, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1)
		g := ginBarrier(t, c, world, 1)
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g},
			GINConnectionType: nccl.Ptr(nccl.GINConnectionRail)})
		if err != nil {
			t.Fatalf("a RAIL connection on a railed-only communicator: %v", err)
		}
		if s, err := g.GINSignal(); err != nil || s != 0 {
			t.Errorf("GINSignal = %d, %v; want 0", s, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		nccl.WithoutDevCommPropertyChecks(func() {
			_, err = c.CreateDevComm(&nccl.DevCommRequirements{GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)})
		})
		var ne *nccl.Error
		if !errors.As(err, &ne) || ne.Code != nccl.InvalidArgument || !strings.Contains(ne.Detail, "supports only NCCL_GIN_CONNECTION_RAIL") {
			t.Errorf("a FULL connection on a railed-only communicator: %v, want NCCL's ncclInvalidArgument", err)
		}
	})
}

// With GINForceEnable NCCL 2.30.7 asks for a FULL connection even where
// GINConnectionType says RAIL, so it makes the hybrid world GIN barrier
// (BarrierCount × nRanks signals) that a RAIL connection goes without: a
// GIN barrier listed after it starts past those signals.
func TestFakeGINBarrierForceEnableRail(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_GIN_TYPE=2", "FAKE_NCCL_RAILED_GIN_TYPE=2"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1) // one LSA team of 4: the rail team is this rank alone
		for _, tc := range []struct {
			force bool
			want  uint32
		}{
			// 2 signals, then the hybrid rail barrier's 1 × 1, then (FULL
			// only) the hybrid world barrier's 1 × 4.
			{false, 2 + 1},
			{true, 2 + 1 + 4},
		} {
			g := ginBarrier(t, c, world, 1)
			d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{g}, GINSignalCount: nccl.Ptr(2),
				BarrierCount: nccl.Ptr(1), GINForceEnable: nccl.Ptr(tc.force), GINConnectionType: nccl.Ptr(nccl.GINConnectionRail)})
			if err != nil {
				t.Fatal(err)
			}
			if s, err := g.GINSignal(); err != nil || s != tc.want {
				t.Errorf("GINForceEnable %v, GINConnectionRail: GINSignal = %d, %v; want %d", tc.force, s, err, tc.want)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// NCCL numbers GIN signals in an int: GINSignalCount, then its own
// barriers', then each resource's (ncclDevrCommCreateInternal's
// ginSignalTotal). GIN barriers whose signals each fit an int can still
// add up past it, wrapping NCCL's total around to a small or negative
// count (too few signal shadows, handles past them): the binding refuses
// that before NCCL.
func TestFakeGINSignalsAddUpPastInt(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_GIN_TYPE=2"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 4, 1)
		const n = math.MaxInt32/4 - 1 // × 4 ranks: 2^31 - 8 signals, within an int
		a := ginBarrier(t, c, world, n)
		b := ginBarrier(t, c, world, n)
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{a, b},
			GINSignalCount: nccl.Ptr(math.MaxInt32), GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)})
		wantArgErr(t, err, "CreateDevComm", "DevCommRequirements.Resources[0]", "past NCCL's int")
		noNCCLCall(t, "ncclDevCommCreate")
		// The refusal gives the claims back.
		d, err := c.CreateDevComm(&nccl.DevCommRequirements{Resources: []*nccl.DevResource{a},
			GINConnectionType: nccl.Ptr(nccl.GINConnectionFull)})
		if err != nil {
			t.Fatalf("one barrier alone: %v", err)
		}
		d.Close()
	})
}

package nccl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
)

// CFT (Compute Fabric Transport, NCCL 2.31.2) moves data between GPUs
// through CUDA fabric logical endpoints (LEs), which kernels address by an
// endpoint id and an offset. NCCL gives a communicator CFT where its GPUs
// support unicast and multicast logical endpoints (Blackwell), NCCL was
// built with CUDA 13.3 or later, the driver is 13.3 or later, and
// NCCL_CFT_ENABLE is not 0 (NVIDIA's 2.31.2 src/cft_dev_runtime.cc). No
// GPU before Blackwell has it: an H200 never does.

// CFTTeamMode selects the shape of the team [Communicator.TeamCFT] returns
// (ncclCftTeamMode_t, NCCL 2.31.2).
type CFTTeamMode int32

// CFT team modes.
const (
	// CFTTeamFlat is every rank of this rank's CFT unicast group
	// (NCCL_CFT_TEAM_FLAT).
	CFTTeamFlat CFTTeamMode = 0
	// CFTTeamHierMultimem is the ranks of the CFT group with this rank's
	// index in the other multicast CFT groups (NCCL_CFT_TEAM_HIER_MULTIMEM).
	CFTTeamHierMultimem CFTTeamMode = 1
	// CFTTeamHierLSA is the ranks of the CFT group with this rank's index
	// in the other LSA teams (NCCL_CFT_TEAM_HIER_LSA).
	CFTTeamHierLSA CFTTeamMode = 2
)

// String is the C name, e.g. "NCCL_CFT_TEAM_FLAT"; other values print as
// "ncclCftTeamMode_t(N)".
func (m CFTTeamMode) String() string {
	switch m {
	case CFTTeamFlat:
		return "NCCL_CFT_TEAM_FLAT"
	case CFTTeamHierMultimem:
		return "NCCL_CFT_TEAM_HIER_MULTIMEM"
	case CFTTeamHierLSA:
		return "NCCL_CFT_TEAM_HIER_LSA"
	}
	return fmt.Sprintf("ncclCftTeamMode_t(%d)", int32(m))
}

// TeamCFT is this rank's CFT team in the shape mode asks for (ncclTeamCft,
// NCCL 2.31.2). NCCL initializes its device runtime for it on first use.
// On a communicator without CFT the flat CFT team is this rank alone
// ({1, 0, 1}), and so is a hierarchical one whose inner groups are single
// ranks; a hierarchical team NCCL answers empty (its inner group, the LSA
// team, is larger than the CFT team, as it is without CFT on NVLink-
// connected GPUs) is an error wrapping [ErrUnsupported] that says so, and
// an empty team because NCCL's device runtime failed an [*Error] with
// [ErrInternal]. A mode outside the three is an [*ArgError]. Local: not
// collective.
func (c *Communicator) TeamCFT(mode CFTTeamMode) (Team, error) {
	const op = "TeamCFT"
	if _, err := require(capi.SymTeamCft); err != nil {
		return Team{}, err
	}
	if mode < CFTTeamFlat || mode > CFTTeamHierLSA {
		return Team{}, argErr(op, "mode", "%d: not NCCL_CFT_TEAM_FLAT (0), NCCL_CFT_TEAM_HIER_MULTIMEM (1) or NCCL_CFT_TEAM_HIER_LSA (2)", int32(mode))
	}
	t, err := c.teamCFT(op, mode)
	if err != nil || t.NRanks > 0 {
		return t, err
	}
	if mode != CFTTeamFlat {
		// A device runtime that works gives a flat team of one rank at
		// least: then the hierarchical shape is what is empty.
		if flat, ferr := c.teamCFT(op, CFTTeamFlat); ferr == nil && flat.NRanks > 0 {
			inner := "multicast CFT group"
			if mode == CFTTeamHierLSA {
				inner = "LSA team"
			}
			return Team{}, fmt.Errorf("nccl: %s: ncclTeamCft(%s) returned an empty team: this rank's CFT team (%v) "+
				"is smaller than its %s, so no %s shape of it exists (without CFT, which needs Blackwell GPUs "+
				"and CUDA 13.3, the CFT team is the rank alone): %w", op, mode, flat, inner, mode, ErrUnsupported)
		}
	}
	return Team{}, emptyTeam(op, "ncclTeamCft")
}

// TeamCFTMultimem is this rank's multicast CFT team: the ranks of its CFT
// multicast group (ncclTeamCftMultimem, NCCL 2.31.2). On a communicator
// without CFT it is this rank alone ({1, 0, 1}). An empty team because
// NCCL's device runtime failed is an [*Error] with [ErrInternal]. Local:
// not collective.
func (c *Communicator) TeamCFTMultimem() (Team, error) {
	return c.team("TeamCFTMultimem", "ncclTeamCftMultimem", capi.SymTeamCftMultimem, capi.TeamCFTMultimem, takeWork)
}

// teamCFT is ncclTeamCft(mode), possibly empty.
func (c *Communicator) teamCFT(op string, mode CFTTeamMode) (Team, error) {
	var raw capi.Team
	err := c.call(context.Background(), completed, op, "ncclTeamCft", takeWork, nil, func(ptr uintptr) (capi.Status, error) {
		var r int32
		raw, r = capi.TeamCFT(ptr, int32(mode))
		return capi.Status{Code: r}, nil
	})
	if err != nil {
		return Team{}, err
	}
	if raw.NRanks <= 0 {
		return Team{}, nil
	}
	return teamOf(raw), nil
}

// CFTAddress is where a kernel's CFT operations find a byte of a window: a
// logical endpoint id (ncclCftLeId) and the offset within that endpoint,
// the pair NCCL's device-side ncclCft operations take.
type CFTAddress struct {
	Endpoint uint32 `json:"endpoint"` // the logical endpoint (ncclCftLeId)
	Offset   uint64 `json:"offset"`   // the byte's offset in it
}

// String reads "le 0x101+0x200000".
func (a CFTAddress) String() string { return fmt.Sprintf("le %#x+%#x", a.Endpoint, a.Offset) }

// CFTAddress is the CFT address of the byte at offsetBytes of the window
// of member peer of team, a CFT team of this rank ([Communicator.TeamCFT])
// (ncclGetCftDeviceLeInfo, NCCL 2.31.2). The binding checks the team, the
// member and the offset, and that the member is in this rank's flat CFT
// team (NCCL computes an endpoint of another group from it without a
// word): an [*ArgError] otherwise. Errors of NCCL's: see
// [Window.CFTPeerAddress]. Not collective.
func (w *Window) CFTAddress(team Team, peer int, offsetBytes uint64) (CFTAddress, error) {
	const op = "Window.CFTAddress"
	if _, err := require(capi.SymGetCftDeviceLeInfo); err != nil {
		return CFTAddress{}, err
	}
	switch {
	case !team.valid():
		return CFTAddress{}, argErr(op, "team", "%v is not a team (get one from Communicator.TeamCFT)", team)
	case peer < 0 || peer >= team.NRanks:
		return CFTAddress{}, argErr(op, "peer", "%d: outside the team's %d members", peer, team.NRanks)
	}
	if err := w.checkOffset(op, offsetBytes); err != nil {
		return CFTAddress{}, err
	}
	// This rank's flat CFT team, asked under this call's name.
	flat, err := w.c.teamCFT(op, CFTTeamFlat)
	if err != nil {
		return CFTAddress{}, err
	}
	if flat.NRanks <= 0 {
		return CFTAddress{}, emptyTeam(op, "ncclTeamCft")
	}
	if i := int64(flat.Rank) + int64(peer-team.Rank)*int64(team.Stride); i < 0 || i >= int64(flat.NRanks) {
		return CFTAddress{}, argErr(op, "team", "%v, member %d: CFT rank %d, outside this rank's flat CFT team %v: not a CFT team of this rank", team, peer, i, flat)
	}
	t := team.raw()
	return w.cftQuery(op, "ncclGetCftDeviceLeInfo", func(win uintptr) (uint32, uint64, capi.Status) {
		return capi.GetCftDeviceLeInfo(win, offsetBytes, peer, t)
	})
}

// CFTPeerAddress is the CFT address of the byte at offsetBytes of the
// window of world rank peer (ncclGetPeerDeviceLeInfo, NCCL 2.31.2). NCCL
// refuses a peer outside this rank's flat CFT team (an [*Error] with
// [ErrInvalidArgument]). The logical endpoints must exist: the
// communicator was made with [Config.HostCFTMode] [HostCFTEnable] (not
// [HostCFTDisable]), or a device communicator with
// [DevCommRequirements.CFTCaps] [CFTUnicast] was made before; else NCCL
// fails with ncclInvalidUsage ([ErrInvalidUsage]). On a communicator
// without CFT it returns an error wrapping both [ErrUnsupported] and
// NCCL's [*Error] (ncclInvalidArgument). Not collective.
func (w *Window) CFTPeerAddress(peer int, offsetBytes uint64) (CFTAddress, error) {
	const op = "Window.CFTPeerAddress"
	if _, err := require(capi.SymGetPeerDeviceLeInfo); err != nil {
		return CFTAddress{}, err
	}
	if w == nil || w.c == nil {
		return CFTAddress{}, closedErr(op, "window")
	}
	n, _, _, err := w.c.ident(op)
	if err != nil {
		return CFTAddress{}, err
	}
	if err := checkRank(op, "peer", peer, n); err != nil {
		return CFTAddress{}, err
	}
	if err := w.checkOffset(op, offsetBytes); err != nil {
		return CFTAddress{}, err
	}
	return w.cftQuery(op, "ncclGetPeerDeviceLeInfo", func(win uintptr) (uint32, uint64, capi.Status) {
		return capi.GetPeerDeviceLeInfo(win, offsetBytes, peer)
	})
}

// CFTMultimemAddress is the multicast CFT address of the byte at
// offsetBytes of the window, for the ranks of this rank's multicast CFT
// team ([Communicator.TeamCFTMultimem]) (ncclGetMultimemDeviceLeInfo,
// NCCL 2.31.2). Where the multicast endpoint does not exist yet (a device
// communicator with [CFTMultimem] makes it), NCCL makes it here, which
// needs multicast (NVLS) support, else it fails with ncclInvalidArgument
// ([ErrInvalidArgument]); in NVIDIA's 2.31.2 source that first call also
// exchanges the endpoint with the other ranks of the multicast CFT team
// and waits for them, so make it on all of them. On a communicator without
// CFT it returns an error wrapping both [ErrUnsupported] and NCCL's
// [*Error]. Not collective otherwise.
func (w *Window) CFTMultimemAddress(offsetBytes uint64) (CFTAddress, error) {
	const op = "Window.CFTMultimemAddress"
	if _, err := require(capi.SymGetMultimemDeviceLeInfo); err != nil {
		return CFTAddress{}, err
	}
	if err := w.checkOffset(op, offsetBytes); err != nil {
		return CFTAddress{}, err
	}
	return w.cftQuery(op, "ncclGetMultimemDeviceLeInfo", func(win uintptr) (uint32, uint64, capi.Status) {
		return capi.GetMultimemDeviceLeInfo(win, offsetBytes)
	})
}

// noCFTDetail is what NCCL's logical-endpoint queries say
// (ncclGetLastError) on a communicator without CFT.
const noCFTDetail = "without CFT support in the communicator"

// noLEDetail is what they say before the logical endpoints exist.
const noLEDetail = "before LE creation"

// cftQuery runs one logical-endpoint query of NCCL (fn) on the window.
func (w *Window) cftQuery(op, fn string, call func(win uintptr) (uint32, uint64, capi.Status)) (CFTAddress, error) {
	var a CFTAddress
	var st capi.Status
	_, _, err := w.query(op, func(_, win uintptr) (uintptr, capi.Status) {
		a.Endpoint, a.Offset, st = call(win)
		return 0, st
	})
	if err != nil {
		return CFTAddress{}, err
	}
	if err := statusErr(op, fn, st); err != nil {
		var ne *Error
		if errors.As(err, &ne) && ne.Code == InvalidArgument && strings.Contains(ne.Detail, noCFTDetail) {
			return CFTAddress{}, fmt.Errorf("nccl: %s: this communicator has no CFT (CUDA fabric logical endpoints "+
				"need Blackwell GPUs, NCCL built with CUDA 13.3 or later, a 13.3 driver and NCCL_CFT_ENABLE not 0): %w (%w)",
				op, ErrUnsupported, err)
		}
		if errors.As(err, &ne) && ne.Code == InvalidUsage && strings.Contains(ne.Detail, noLEDetail) {
			return CFTAddress{}, fmt.Errorf("nccl: %s: the communicator has no CFT logical endpoints yet: make it with "+
				"Config.HostCFTMode HostCFTEnable (not HostCFTDisable), or make a device communicator with DevCommRequirements.CFTCaps first: %w", op, err)
		}
		return CFTAddress{}, err
	}
	return a, nil
}

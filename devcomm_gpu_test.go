package nccl_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/gputest"
)

// GPU tests of devcomm.go.

// devCommSize is the ncclDevComm_t size of release r.
// From 2.31 NCCL writes its own layout, whose size the communicator's
// properties report (devCommRuntimeVersionSize: 256 bytes on 2.31.0a16).
func devCommSize(t *testing.T, r nccl.Release, c *nccl.Communicator) int {
	t.Helper()
	switch {
	case r >= 23100:
		p, err := c.Properties()
		if err != nil || p.DevCommRuntimeVersionSize == nil {
			t.Fatalf("NCCL %s: Properties = %+v, %v; want devCommRuntimeVersionSize", r, p, err)
		}
		return *p.DevCommRuntimeVersionSize
	case r < 22807:
		return 88
	case r < 22905:
		return 200
	case r < 23000:
		return 224
	}
	return 240
}

// checkDevComm creates a device communicator on c (rank of n) and checks
// it, or that the loaded NCCL cleanly refuses it. It reports whether one
// was made.
func checkDevComm(t *testing.T, r nccl.Release, c *nccl.Communicator, rank, n int) bool {
	t.Helper()
	d, err := c.CreateDevComm(nil)
	switch {
	case r < 22803:
		sinceOK(t, "CreateDevComm", err, r, 22803, "ncclDevCommCreate")
		return false
	case err != nil && r >= 22902 && errors.Is(err, nccl.ErrUnsupported):
		// The properties say no device-API support (ranks on distinct "hosts").
		t.Logf("rank %d: no device communicator: %v", rank, err)
		return false
	case err != nil && r < 22902 && errors.Is(err, nccl.ErrInvalidUsage):
		var se *nccl.SymmetricMemoryError
		if !errors.As(err, &se) || !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("rank %d: refusal without symmetric memory: %v, want a *SymmetricMemoryError", rank, err)
		} else if n == 1 && r < 22807 && se.Since != 22807 {
			t.Errorf("rank %d: one-rank refusal on NCCL %s: Since %s, want 2.28.7", rank, r, se.Since)
		}
		t.Logf("rank %d: NCCL %s refuses a device communicator (no symmetric memory): %v", rank, r, err)
		return false
	case err != nil:
		t.Fatalf("rank %d: CreateDevComm: %v", rank, err)
	}
	if want := devCommSize(t, r, c); d.Size() != want {
		t.Errorf("Size %d on NCCL %s, want %d", d.Size(), r, want)
	}
	b, err := d.Bytes()
	if err != nil || len(b) != d.Size() {
		t.Fatalf("Bytes: %d bytes, %v", len(b), err)
	}
	off := 0
	if r >= 23000 {
		if m := binary.LittleEndian.Uint32(b); m != 0xcafebeef {
			t.Errorf("devComm magic %#x", m)
		}
		off = 8
	}
	if gr, gn := binary.LittleEndian.Uint32(b[off:]), binary.LittleEndian.Uint32(b[off+4:]); int(gr) != rank || int(gn) != n {
		t.Errorf("devComm rank %d nRanks %d, want %d, %d", gr, gn, rank, n)
	}
	dp, err := d.DevicePtr()
	if err != nil || dp == 0 {
		t.Fatalf("DevicePtr = %#x, %v", dp, err)
	}
	dev, _ := c.Device()
	onDev, err := cuda.Wrap[uint8](dp, d.Size(), dev).ToHost()
	if err != nil || !slices.Equal(onDev, b) {
		t.Errorf("device copy differs from Bytes (%v)", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("DevComm.Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second DevComm.Close: %v", err)
	}
	if _, err := d.DevicePtr(); !errors.Is(err, nccl.ErrClosed) {
		t.Errorf("DevicePtr after Close: %v", err)
	}
	return true
}

// checkDevCommRanks is the several-rank part (run by TestGPURegistrationRanks).
func checkDevCommRanks(t *testing.T, r nccl.Release, c *nccl.Communicator, rank, n int) {
	t.Helper()
	checkDevComm(t, r, c, rank, n)
}

func TestGPUDevCommOneRank(t *testing.T) {
	r := gputest.Require(t)
	c := initOne(t)
	defer c.Destroy()
	made := checkDevComm(t, r, c, 0, 1)
	t.Logf("NCCL %s: device communicator made: %v", r, made)

	// Requirements: fields newer than the release, GIN without a connection.
	_, err := c.CreateDevComm(&nccl.DevCommRequirements{GINVASignalsRequired: nccl.Ptr(true)})
	if r >= 22803 {
		sinceOK(t, "ginVaSignalsRequired", err, r, 23007, "ncclDevCommRequirements_t.ginVaSignalsRequired")
	}
	_, err = c.CreateDevComm(&nccl.DevCommRequirements{BarrierCount: nccl.Ptr(1)})
	switch {
	case r >= 22907:
		wantArg(t, "a GIN barrier without a connection", err, "DevCommRequirements.GINConnectionType")
	case r >= 22803 && r < 22807:
		sinceOK(t, "barrierCount", err, r, 22807, "ncclDevCommRequirements_t.barrierCount")
	}
	_, err = c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(-2)})
	if r >= 22803 {
		wantArg(t, "negative LSA barrier count", err, "DevCommRequirements.LSABarrierCount")
	}
	if r >= 22902 && made {
		mm, _ := c.MultimemSupport()
		_, err := c.CreateDevComm(&nccl.DevCommRequirements{LSAMultimem: nccl.Ptr(true)})
		if !mm && !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("LSAMultimem without multimem support: %v, want ErrUnsupported", err)
		}
		t.Logf("multimem support %v: LSAMultimem: %v", mm, err)
	}
	// Destroy closes an open device communicator; CreateDevComm after it fails.
	d := initOne(t)
	dc, err := d.CreateDevComm(nil)
	if err == nil {
		if err := d.Destroy(); err != nil {
			t.Errorf("Destroy with a device communicator: %v", err)
		}
		if err := dc.Close(); err != nil {
			t.Errorf("Close after Destroy: %v", err)
		}
	} else {
		d.Destroy()
	}
	// After Destroy: closed; on a release without ncclDevCommCreate the
	// gate answers first (seen on NCCL 2.27.7), as it did before Destroy.
	after, err2 := d.CreateDevComm(nil)
	switch {
	case errors.Is(err2, nccl.ErrClosed):
	case errors.Is(err, nccl.ErrUnsupported) && errors.Is(err2, nccl.ErrUnsupported):
	default:
		t.Errorf("CreateDevComm after Destroy: %v, %v; want ErrClosed (or ErrUnsupported where the release lacks it: %v)", after, err2, err)
	}
}

package nccl_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

func ptrNVLS(m nccl.NVLSHostMode) *nccl.NVLSHostMode { return &m }

// NVLSHostMode: the documented values (any OR of the two DISABLE_ flags,
// NVLSHostDisable) land in nvlsHostMode declaring 2.32.3; every other
// value is an ArgError naming the field; unset sends NCCL_CONFIG_UNDEF_INT.
func TestConfigNVLSHostMode(t *testing.T) {
	if nccl.NVLSHostEnable != 0 || nccl.NVLSHostDisableTransport != 1 || nccl.NVLSHostDisableSymmetricMultimem != 2 ||
		nccl.NVLSHostDisable != math.MaxInt32 {
		t.Fatalf("values %d %d %d %d, want nccl4py's NcclNvlsHostMode 0 1 2 2147483647", nccl.NVLSHostEnable,
			nccl.NVLSHostDisableTransport, nccl.NVLSHostDisableSymmetricMultimem, nccl.NVLSHostDisable)
	}
	for _, m := range []nccl.NVLSHostMode{nccl.NVLSHostEnable, nccl.NVLSHostDisableTransport,
		nccl.NVLSHostDisableSymmetricMultimem, nccl.NVLSHostDisableTransport | nccl.NVLSHostDisableSymmetricMultimem,
		nccl.NVLSHostDisable} {
		got, _ := encodeConfig(t, &nccl.Config{NVLSHostMode: ptrNVLS(m)}, 23203)
		want := unsetConfig(23203)
		want.NvlsHostMode = int32(m)
		if got != want {
			t.Errorf("NVLSHostMode %d: encoded %+v, want %+v", m, got, want)
		}
	}
	if got, _ := encodeConfig(t, &nccl.Config{}, 23203); got.NvlsHostMode != undef {
		t.Errorf("unset NVLSHostMode sent %d, want NCCL_CONFIG_UNDEF_INT", got.NvlsHostMode)
	}
	for _, m := range []nccl.NVLSHostMode{4, 5, 8, -1, math.MinInt32, math.MaxInt32 - 1, 1 << 30} {
		wantConfigArg(t, &nccl.Config{NVLSHostMode: ptrNVLS(m)}, 23203, "NVLSHostMode")
	}
	_, _, err := nccl.EncodeConfigForTest(&nccl.Config{NVLSHostMode: ptrNVLS(4)}, "Init", 23203)
	if err == nil || !strings.Contains(err.Error(), "NVLSHostDisable") {
		t.Errorf("NVLSHostMode 4: %v, want an error naming the valid values", err)
	}
}

// configLines are the fake's "config" log lines (what the library read of
// an ncclConfig_t).
func configLines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range faketest.LogLines(t) {
		if strings.HasPrefix(l, "config ") {
			out = append(out, l)
		}
	}
	return out
}

// End to end: a 2.32.3 library gets the 120-byte ncclConfig_t and reads
// nvlsHostMode as set; 2.31.0a16, 2.31.2 and older libraries get the
// 112-byte one; a 2.31.2 library refuses NVLSHostMode before NCCL is called.
func TestFakeConfigNVLSHostMode(t *testing.T) {
	for _, tc := range []struct {
		mode *nccl.NVLSHostMode
		read string
	}{
		{ptrNVLS(nccl.NVLSHostDisableTransport | nccl.NVLSHostDisableSymmetricMultimem), "3"},
		{ptrNVLS(nccl.NVLSHostDisable), "2147483647"},
		{ptrNVLS(nccl.NVLSHostEnable), "0"},
		{nil, "-2147483648"},
	} {
		faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
			c := fakeComm(t, 1, 0, &nccl.Config{NVLSHostMode: tc.mode, HostCFTMode: ptrCFT(nccl.HostCFTDisable)})
			child, err := c.Split(0, 0, &nccl.Config{NVLSHostMode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			defer child.Abort()
			want := []string{
				"config ncclCommInitRankConfig size=120 version=23203 hostCftMode=2 nvlsHostMode=" + tc.read,
				"config ncclCommSplit size=120 version=23203 hostCftMode=-2147483648 nvlsHostMode=" + tc.read,
			}
			if got := configLines(t); !slices.Equal(got, want) {
				t.Errorf("the fake read %q, want %q", got, want)
			}
		})
	}
	for _, r := range []int{23007, 23100, 23102} {
		faketest.Run(t, faketest.Env{Release: r}, func(t *testing.T) {
			fakeComm(t, 1, 0, &nccl.Config{CommName: "older"})
			host := "-"
			if r >= 23102 {
				host = "-2147483648"
			}
			want := []string{fmt.Sprintf("config ncclCommInitRankConfig size=112 version=%d hostCftMode=%s nvlsHostMode=-", r, host)}
			if got := configLines(t); !slices.Equal(got, want) {
				t.Errorf("NCCL %s read %q, want %q", nccl.Release(r), got, want)
			}
			id := newFakeID(t)
			before := faketest.Calls(t, "ncclCommInitRankConfig")
			_, err := nccl.Init(1, 0, id, &nccl.Config{NVLSHostMode: ptrNVLS(nccl.NVLSHostDisable)})
			wantUnsupported(t, "NVLSHostMode on "+nccl.Release(r).String(), err, "ncclConfig_t.nvlsHostMode", 23203)
			if want := "nccl: ncclConfig_t.nvlsHostMode: requires NCCL 2.32.3, loaded " + nccl.Release(r).String(); err == nil || err.Error() != want {
				t.Errorf("%v, want %q (the README's example)", err, want)
			}
			if n := faketest.Calls(t, "ncclCommInitRankConfig") - before; n != 0 {
				t.Errorf("the refused Init called ncclCommInitRankConfig %d times", n)
			}
		})
	}
}

// NVIDIA's documentation: the host NVLS mode does not change the
// communicator's reported multimem support. The fake reports the same
// MultimemSupport whatever the mode.
func TestFakeNVLSHostModeKeepsMultimemSupport(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23203, Extra: []string{"FAKE_NCCL_MULTIMEM=1"}}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{NVLSHostMode: ptrNVLS(nccl.NVLSHostDisable)})
		if ok, err := c.MultimemSupport(); err != nil || !ok {
			t.Errorf("MultimemSupport with NVLSHostDisable = %v, %v; want true", ok, err)
		}
	})
}

package perf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// In-place alltoall times ncclAlltoAll with aliased buffers from NCCL 2.28
// on, as nccl-tests does (it timed a group of sends and receives); before
// 2.28 both columns use sends and receives, as nccl-tests' fallback.
func TestInPlaceAllToAllCallsNCCLAlltoAll(t *testing.T) {
	for _, tc := range []struct {
		release, agg    int
		alltoall, sends int
	}{
		// 1 warm-up + 1 sync + 3 timed out of place, 1 sync + 3 timed in place.
		{22803, 1, 9, 0},
		{22703, 1, 0, 9},
		// -m 2: the timed operations in groups of two, in place too.
		{22803, 2, 15, 0},
	} {
		t.Run(strconv.Itoa(tc.release)+"/"+strconv.Itoa(tc.agg), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "calls.log")
			if faketest.InChild() {
				log = os.Getenv("FAKE_NCCL_LOG")
			}
			faketest.Run(t, faketest.Env{Release: tc.release, Extra: []string{"FAKE_NCCL_LOG=" + log}}, func(t *testing.T) {
				w, err := LocalWorld(context.Background(), []int{0}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				o := DefaultOptions("alltoall")
				o.MinBytes, o.MaxBytes, o.Iters, o.Check, o.AggIters = 4096, 4096, 3, 0, tc.agg
				before := calls(t, log)
				if _, err := Run(context.Background(), o, w, nil); err != nil {
					t.Fatal(err)
				}
				after := calls(t, log)
				a2a := after["ncclAlltoAll"] - before["ncclAlltoAll"]
				sends := after["ncclSend"] - before["ncclSend"]
				if a2a != tc.alltoall || sends != tc.sends {
					t.Errorf("NCCL %d: %d ncclAlltoAll and %d ncclSend calls, want %d and %d", tc.release, a2a, sends, tc.alltoall, tc.sends)
				}
			})
		})
	}
}

// calls counts the fake's logged calls by name.
func calls(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		n[strings.TrimSpace(l)]++
	}
	return n
}

// alltoallv's generated pattern is nccl-tests' distance-weighted one: on
// 4 ranks rank 0 sends 0, 1/6, 2/6 and 3/6 of its bytes (spread 1), a
// quarter each (spread 0); every rank sends and receives the same total,
// and what rank q receives is packed from each source in rank order.
func TestAlltoallvPattern(t *testing.T) {
	const total = 1 << 20
	for j, want := range []uint64{0, total / 6 &^ 15, 2 * total / 6 &^ 15, 3 * total / 6 &^ 15} {
		if got := alltoallvPeerBytes(0, j, 4, total, 1); got != want {
			t.Errorf("spread 1: 0 -> %d: %d bytes, want %d", j, got, want)
		}
		if got := alltoallvPeerBytes(0, j, 4, total, 0); got != total/4 {
			t.Errorf("spread 0: 0 -> %d: %d bytes, want %d", j, got, total/4)
		}
	}
	for _, n := range []int{1, 2, 3, 5} {
		b := &bench{nranks: n, opts: Options{AlltoallvSpread: nccl.Ptr(0.7)}}
		b.dt, _ = lookupType("float")
		b.coll, _ = lookupTest("alltoallv")
		b.setSize(3 << 20)
		for q := 0; q < n; q++ {
			var sent, recvd uint64
			for p := 0; p < n; p++ {
				sent += alltoallvPeerBytes(q, p, n, b.cnt.param*uint64(n)*4, 0.7) / 4
			}
			l := b.alltoallvLayout(q)
			for _, s := range l {
				if s.src == srcInput {
					recvd += s.n
				}
			}
			if sent != b.cnt.send || recvd != b.cnt.recv || l.count() != b.cnt.recv {
				t.Errorf("%d ranks, rank %d: sends %d, receives %d, layout %d; counts %+v", n, q, sent, recvd, l.count(), b.cnt)
			}
		}
	}
}

// A failure of the in-place ncclAlltoAll reads like perf's other errors
// ("perf: in-place alltoall: ...") and wraps an *nccl.Error whose Op is the
// binding's operation name, as Error.Op promises (it was the phrase
// "AllToAll (in place)").
func TestInPlaceAllToAllErrorNamesOperation(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22803}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.Init(1, 0, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Destroy()
		err = allToAllInPlace(c, 0, 1, nccl.DataType(99), cuda.Stream{})
		var ne *nccl.Error
		if !errors.As(err, &ne) {
			t.Fatalf("err = %v, want an *nccl.Error", err)
		}
		if ne.Op != "AllToAll" || !strings.HasPrefix(err.Error(), "perf: in-place alltoall: nccl: AllToAll: ") {
			t.Errorf("err = %q (Op %q), want \"perf: in-place alltoall: nccl: AllToAll: ...\" with Op AllToAll", err, ne.Op)
		}
	})
}

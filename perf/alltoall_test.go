package perf

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// In-place alltoall times ncclAlltoAll with aliased buffers from NCCL 2.28
// on, as nccl-tests does (it timed a group of sends and receives); before
// 2.28 both columns use sends and receives, as nccl-tests' fallback.
func TestInPlaceAllToAllCallsNCCLAlltoAll(t *testing.T) {
	for _, tc := range []struct {
		release         int
		alltoall, sends int
	}{
		// 1 warm-up + 1 sync + 3 timed out of place, 1 sync + 3 timed in place.
		{22803, 9, 0},
		{22703, 0, 9},
	} {
		t.Run(strconv.Itoa(tc.release), func(t *testing.T) {
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
				o.MinBytes, o.MaxBytes, o.Iters, o.Check = 4096, 4096, 3, 0
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

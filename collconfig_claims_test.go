package nccl_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// The README's and collconfig.go's limits, at the limit: a CollConfig
// built once with 4 Ext entries and 256 bytes of strings (the AlgSelection
// and the entries' strings together) makes one cgo call and allocates
// nothing, call after call.
func TestCollConfigNoAllocationAtTheLimit(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(1)...)
		alg := "ring,tree"
		rest := 256 - len(alg)
		cfg := &nccl.CollConfig{MaxCTAs: nccl.Ptr(2), AlgSelection: alg, Ext: []nccl.ConfigExt{
			{VendorID: 1, OptionID: 1, String: strings.Repeat("a", rest/2)},
			{VendorID: 1, OptionID: 2, String: strings.Repeat("b", rest-rest/2)},
			{VendorID: 1, OptionID: 3, Int: 7},
			{VendorID: 1, OptionID: 4, Pointer: 0x1000},
		}}
		call := func() {
			if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatal(err)
			}
		}
		wantHotPath(t, "AllReduceWith (4 entries and 256 bytes of strings)", call)
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "alg="+alg)
	})
}

// A CollConfig may be changed as soon as the call returns: the next call
// sends the new values, the binding keeping nothing of the old ones.
func TestCollConfigChangedBetweenCalls(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		b := collBuf(t, 0, f32s(4)...)
		cfg := &nccl.CollConfig{MaxCTAs: nccl.Ptr(2), AlgSelection: "ring", Ext: []nccl.ConfigExt{{VendorID: 1, OptionID: -1, String: "first"}}}
		if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "maxCTAs=2", "alg=ring")
		*cfg.MaxCTAs = 3
		cfg.AlgSelection = "tree"
		cfg.Ext[0].String = "second"
		if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		line := lastCollConfig(t, "ncclAllReduceConfig")
		wantFields(t, line, "maxCTAs=3", "alg=tree")
		if !strings.Contains(line, ":second") || strings.Contains(line, "first") {
			t.Errorf("the second call sent %q, want the changed Ext string only", line)
		}
	})
}

// A nil config is the plain call on any release, for all eight ...With
// methods: on the oldest release the binding loads (2.19.1), before the
// Config functions (2.30.7) and with them (2.31.2), the plain C function
// is called and its Config variant is not.
func TestCollConfigNilIsPlainEveryRelease(t *testing.T) {
	for _, release := range []int{21901, 23007, 23102} {
		collConfigFake(t, release, func(t *testing.T) {
			c := collComm(t, 1, 0, 0)
			one := collBuf(t, 0, f32s(4)...)
			s := cuda.Stream{}
			calls := []struct {
				fn   string
				call func() error
			}{
				{"ncclAllReduce", func() error { return c.AllReduceWith(nil, one, one, nccl.Sum, s) }},
				{"ncclBroadcast", func() error { return c.BroadcastWith(nil, one, one, 0, s) }},
				{"ncclReduce", func() error { return c.ReduceWith(nil, one, one, nccl.Max, 0, s) }},
				{"ncclAllGather", func() error { return c.AllGatherWith(nil, one, collBuf(t, 0, f32s(4)...), s) }},
				{"ncclReduceScatter", func() error { return c.ReduceScatterWith(nil, one, collBuf(t, 0, f32s(4)...), nccl.Sum, s) }},
			}
			if release >= 22803 { // the plain AllToAll, Gather and Scatter are 2.28.3's
				calls = append(calls, []struct {
					fn   string
					call func() error
				}{
					{"ncclAlltoAll", func() error { return c.AllToAllWith(nil, one, collBuf(t, 0, f32s(4)...), s) }},
					{"ncclGather", func() error { return c.GatherWith(nil, one, collBuf(t, 0, f32s(4)...), 0, s) }},
					{"ncclScatter", func() error { return c.ScatterWith(nil, one, collBuf(t, 0, f32s(4)...), 0, s) }},
				}...)
			}
			for _, tc := range calls {
				if err := tc.call(); err != nil {
					t.Errorf("%s through ...With(nil) on %d: %v", tc.fn, release, err)
					continue
				}
				if n := faketest.Calls(t, tc.fn); n != 1 {
					t.Errorf("%s called %d times on %d, want 1", tc.fn, n, release)
				}
				if n := len(collConfigLines(t, tc.fn+"Config")); n != 0 {
					t.Errorf("%sConfig called on %d with a nil config", tc.fn, release)
				}
			}
		})
	}
}

// CollConfig's doc: a config can be shared by goroutines that do not
// change it (run under -race: the binding only reads it).
func TestCollConfigSharedByGoroutines(t *testing.T) {
	collConfigFake(t, 23203, func(t *testing.T) {
		c := collComm(t, 1, 0, 0)
		cfg := &nccl.CollConfig{MaxCTAs: nccl.Ptr(2), AlgSelection: "ring", Ext: []nccl.ConfigExt{{VendorID: 1, OptionID: -1, String: "shared"}}}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			b := collBuf(t, 0, f32s(4)...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if err := c.AllReduceWith(cfg, b, b, nccl.Sum, cuda.Stream{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := len(collConfigLines(t, "ncclAllReduceConfig")); n != 200 {
			t.Errorf("the fake read %d configs, want 200", n)
		}
		wantFields(t, lastCollConfig(t, "ncclAllReduceConfig"), "maxCTAs=2", "alg=ring")
	})
}

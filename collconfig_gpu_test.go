package nccl_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/gputest"
)

// The per-collective config on a real NCCL, two ranks sharing GPU 0. On a
// release without the nccl*Config functions (before 2.31) every ...With
// call with a config is refused naming its C function and 2.31.0, and a
// nil config is the plain collective. On 2.31 every ...With collective
// gives the plain collective's results, the fields the loaded layout lacks
// are refused, and NCCL's tuning log (NCCL_DEBUG_SUBSYS=TUNING, written to
// NCCL_DEBUG_FILE and printed into the test log) shows what it chose for
// the plain call and for MaxCTAs 1 (and, from 2.31.2, AlgSelection "tree").
func TestGPUCollConfig(t *testing.T) {
	dir := t.TempDir()
	if gputest.IsRank() {
		dir = os.Getenv("NCCL4GO_COLLCONFIG_DIR")
	}
	env := []string{"NCCL4GO_COLLCONFIG_DIR=" + dir, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=TUNING",
		"NCCL_DEBUG_FILE=" + filepath.Join(dir, "nccl.%p.log")}
	gputest.RunRanks(t, 2, 120*time.Second, env, func(t *testing.T, rank, n int, id nccl.UniqueID) {
		c, err := nccl.Init(n, rank, id, nil)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		defer c.Destroy()
		r, _ := nccl.Version()
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		const count = 1 << 20
		host := make([]float32, count*n)
		for i := range host {
			host[i] = float32(i%97 + rank)
		}
		send, err := cuda.AllocFrom(0, host)
		if err != nil {
			t.Fatal(err)
		}
		defer send.Free()
		plain, err := cuda.Alloc[float32](0, count*n)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Free()
		with, err := cuda.Alloc[float32](0, count*n)
		if err != nil {
			t.Fatal(err)
		}
		defer with.Free()
		sb, pb, wb := nccl.BufferOf(send), nccl.BufferOf(plain), nccl.BufferOf(with)
		part := func(b nccl.Buffer) nccl.Buffer { b.Count = count; return b }
		cfg := &nccl.CollConfig{MinCTAs: nccl.Ptr(1), MaxCTAs: nccl.Ptr(1)}

		type coll struct {
			name, fn      string
			plain, config func(cfg *nccl.CollConfig) error
		}
		colls := []coll{
			{"AllReduce", "ncclAllReduceConfig", func(*nccl.CollConfig) error { return c.AllReduce(sb, pb, nccl.Sum, s) },
				func(cfg *nccl.CollConfig) error { return c.AllReduceWith(cfg, sb, wb, nccl.Sum, s) }},
			{"Broadcast", "ncclBroadcastConfig", func(*nccl.CollConfig) error { return c.Broadcast(sb, pb, 1, s) },
				func(cfg *nccl.CollConfig) error { return c.BroadcastWith(cfg, sb, wb, 1, s) }},
			{"Reduce", "ncclReduceConfig", func(*nccl.CollConfig) error { return c.Reduce(sb, pb, nccl.Max, 0, s) },
				func(cfg *nccl.CollConfig) error { return c.ReduceWith(cfg, sb, wb, nccl.Max, 0, s) }},
			{"AllGather", "ncclAllGatherConfig", func(*nccl.CollConfig) error { return c.AllGather(part(sb), pb, s) },
				func(cfg *nccl.CollConfig) error { return c.AllGatherWith(cfg, part(sb), wb, s) }},
			{"ReduceScatter", "ncclReduceScatterConfig", func(*nccl.CollConfig) error { return c.ReduceScatter(sb, part(pb), nccl.Sum, s) },
				func(cfg *nccl.CollConfig) error { return c.ReduceScatterWith(cfg, sb, part(wb), nccl.Sum, s) }},
			{"AllToAll", "ncclAlltoAllConfig", func(*nccl.CollConfig) error { return c.AllToAll(sb, pb, s) },
				func(cfg *nccl.CollConfig) error { return c.AllToAllWith(cfg, sb, wb, s) }},
			{"Gather", "ncclGatherConfig", func(*nccl.CollConfig) error { return c.Gather(part(sb), pb, 1, s) },
				func(cfg *nccl.CollConfig) error { return c.GatherWith(cfg, part(sb), wb, 1, s) }},
			{"Scatter", "ncclScatterConfig", func(*nccl.CollConfig) error { return c.Scatter(sb, part(pb), 0, s) },
				func(cfg *nccl.CollConfig) error { return c.ScatterWith(cfg, sb, part(wb), 0, s) }},
		}
		if !capi.Present(capi.SymAllReduceConfig) {
			if r >= 23100 {
				t.Fatalf("NCCL %s lacks ncclAllReduceConfig", r)
			}
			for _, cl := range colls {
				err := cl.config(cfg)
				wantUnsupportedLoaded(t, cl.name+"With", err, cl.fn, 23100, r)
			}
			if err := c.AllReduceWith(nil, sb, wb, nccl.Sum, s); err != nil {
				t.Errorf("AllReduceWith(nil) on %s: %v", r, err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			t.Logf("rank %d: NCCL %s: the configured calls are refused (ncclAllReduceConfig is 2.31.0), a nil config runs the plain call", rank, r)
			return
		}
		for _, cl := range colls {
			if err := cl.plain(nil); err != nil {
				t.Fatalf("%s: %v", cl.name, err)
			}
			if err := cl.config(cfg); err != nil {
				t.Fatalf("%sWith: %v", cl.name, err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			p, _ := plain.ToHost()
			w, _ := with.ToHost()
			if root, rooted := map[string]int{"Reduce": 0, "Gather": 1}[cl.name]; rooted && rank != root {
				continue // recv is not written off the root
			}
			for i := range p {
				if p[i] != w[i] {
					t.Fatalf("%sWith: element %d is %v, the plain call's %v", cl.name, i, w[i], p[i])
				}
			}
		}
		if r < 23102 {
			err := c.AllReduceWith(&nccl.CollConfig{AlgSelection: "tree"}, sb, wb, nccl.Sum, s)
			var ue *nccl.UnsupportedError
			if !errors.As(err, &ue) || ue.Feature != "ncclCollConfig_t.algSelection" {
				t.Errorf("AlgSelection on %s: %v, want it unsupported", r, err)
			}
		} else if err := c.AllReduceWith(&nccl.CollConfig{AlgSelection: "tree"}, sb, wb, nccl.Sum, s); err != nil {
			t.Errorf("AlgSelection tree: %v", err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
	})
	if !gputest.IsRank() {
		printTuning(t, dir) // the ranks have exited: their NCCL logs are complete
	}
}

// printTuning logs the lines about AllReduce that NCCL's tuning log of each
// rank holds (its choice of algorithm, protocol and channels per call).
func printTuning(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "nccl.*.log"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		n := 0
		sc := bufio.NewScanner(fh)
		for sc.Scan() && n < 40 {
			if l := sc.Text(); strings.Contains(l, "AllReduce") {
				t.Logf("%s: %s", filepath.Base(f), l)
				n++
			}
		}
		fh.Close()
	}
}

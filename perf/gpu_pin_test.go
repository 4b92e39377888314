package perf_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/gputest"
	"github.com/nccl4go/nccl/perf"
	"github.com/nccl4go/nccl/rendezvous"
)

// pinProcess pins every thread of the process to one core (the threads
// made later inherit it), as mpirun's default --bind-to core does.
func pinProcess(core int) error {
	var mask [16]uint64
	mask[core/64] |= 1 << (core % 64)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); e != 0 {
			return fmt.Errorf("sched_setaffinity(%d, core %d): %w", tid, core, e)
		}
	}
	return nil
}

// jobWorld is the two-process world of a rank child: the communicator from
// id, and a host channel through a file store in dir.
func jobWorld(t *testing.T, rank, nranks int, id nccl.UniqueID, dir string) *perf.World {
	t.Helper()
	cfg := perf.CommConfig("all_reduce")
	cfg.Device = nccl.Ptr(0)
	comm, err := nccl.Init(nranks, rank, id, cfg)
	if err != nil {
		t.Fatalf("rank %d: Init: %v", rank, err)
	}
	t.Cleanup(func() { comm.Destroy() })
	st, err := rendezvous.OpenFileStore(filepath.Join(dir, "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rendezvous.Open(context.Background(), &rendezvous.Options{Job: &rendezvous.Job{Rank: rank, WorldSize: nranks}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &perf.World{Comms: []*nccl.Communicator{comm}, Proc: rank, NProcs: nranks, Host: s}
}

// Two processes on GPU 0, each pinned to a core of its own (mpirun's
// default binding), run small all-reduces and sendrecvs within 1.3x of
// the same processes unpinned (the engine's wait yields the core to NCCL's
// proxy thread; with runtime.Gosched it was 1.55-2.59x on an H200). Both
// use the host channel for coordination; results are checked.
func TestGPUPinnedTwoProcesses(t *testing.T) {
	gputest.Require(t)
	if runtime.NumCPU() < 2 && !gputest.IsRank() {
		t.Skip("needs two cores")
	}
	dir := os.Getenv("PERF_PIN_DIR")
	if !gputest.IsRank() {
		dir = t.TempDir()
	}
	times := map[string]float64{}
	for _, mode := range []string{"unpinned", "pinned", "unpinned-again"} {
		sub := filepath.Join(dir, mode)
		if !gputest.IsRank() {
			os.MkdirAll(sub, 0o755)
		}
		t.Run(mode, func(t *testing.T) {
			gputest.RunRanks(t, 2, 5*time.Minute, []string{"PERF_PIN_DIR=" + dir}, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
				if mode == "pinned" {
					if err := pinProcess(rank % runtime.NumCPU()); err != nil {
						t.Fatal(err)
					}
				}
				w := jobWorld(t, rank, nranks, id, sub)
				var total float64
				for _, test := range []string{"all_reduce", "sendrecv"} {
					o := perf.DefaultOptions(test)
					o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Warmup = 8, 1<<20, 8, 20, 5
					o.Timeout = 2 * time.Minute
					var out bytes.Buffer
					rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &out})
					if err != nil {
						t.Fatalf("%s %s: %v", mode, test, err)
					}
					if rep.Errors != 0 {
						t.Errorf("%s %s: %d wrong cells\n%s", mode, test, rep.Errors, out.String())
					}
					for _, r := range rep.Rows {
						total += r.OutOfPlace.Time + r.InPlace.Time
					}
					if rank == 0 {
						t.Logf("%s %s\n%s", mode, test, out.String())
					}
				}
				if rank == 0 {
					os.WriteFile(filepath.Join(sub, "total"), []byte(strconv.FormatFloat(total, 'g', -1, 64)), 0o644)
				}
			})
		})
		if !gputest.IsRank() {
			b, err := os.ReadFile(filepath.Join(sub, "total"))
			if err != nil {
				t.Fatalf("%s: no result: %v", mode, err)
			}
			times[mode], _ = strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		}
	}
	if gputest.IsRank() {
		return
	}
	unpinned := math.Min(times["unpinned"], times["unpinned-again"])
	ratio := times["pinned"] / unpinned
	t.Logf("sum of cell times: pinned %.1f us, unpinned %.1f and %.1f us: ratio %.3f (A/A %.3f)",
		times["pinned"], times["unpinned"], times["unpinned-again"], ratio, times["unpinned-again"]/times["unpinned"])
	if ratio > 1.3 {
		t.Errorf("pinned processes %.2fx slower than unpinned", ratio)
	}
}

// Every type and reduction on two processes (real NCCL reductions: the
// bit-exact check and the 2-ulp average), and alltoallv; through the host
// channel.
func TestGPUEveryTypeTwoProcesses(t *testing.T) {
	dir := os.Getenv("PERF_TYPES_DIR")
	if !gputest.IsRank() {
		gputest.Require(t)
		dir = t.TempDir()
	}
	gputest.RunRanks(t, 2, 5*time.Minute, []string{"PERF_TYPES_DIR=" + dir}, func(t *testing.T, rank, nranks int, id nccl.UniqueID) {
		w := jobWorld(t, rank, nranks, id, dir)
		for _, test := range []string{"all_reduce", "reduce_scatter", "reduce", "alltoallv", "alltoall"} {
			o := sweep(test)
			// Small: each operation between two processes on one GPU
			// takes milliseconds (socket transport).
			o.MaxBytes, o.Iters, o.Warmup, o.Type, o.Op = 4096, 1, 1, "all", "all"
			rep := runChecked(t, w, o)
			if len(rep.Skipped) > 0 {
				t.Logf("%s skipped %v", test, rep.Skipped)
			}
		}
	})
}

// The nccl-tests features on one rank: -I/-K, -S, -u, -R 1 and 2, -M, the
// ceiling, alltoallv.
func TestGPUFeaturesOneRank(t *testing.T) {
	gputest.Require(t)
	w, err := perf.LocalWorld(context.Background(), []int{0}, perf.CommConfig("all_reduce"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, mod := range map[string]func(o *perf.Options){
		"-I 1 -K 2": func(o *perf.Options) { o.PerIterTiming, o.PerIterSkip = true, 2 },
		"-I 1 -z 3": func(o *perf.Options) { o.PerIterTiming, o.Blocking = true, 3 },
		"-S 1":      func(o *perf.Options) { o.Timestamps = true },
		"-u 3":      func(o *perf.Options) { o.Unaligned, o.Type = 3, "all" },
		"-R 1":      func(o *perf.Options) { o.Register = 1 },
		"-R 2":      func(o *perf.Options) { o.Register = 2 },
		"-M 1":      func(o *perf.Options) { o.MemoryReport = true },
		"ceiling":   func(o *perf.Options) { o.Ceiling = true },
		"alltoallv": func(o *perf.Options) { o.Test = "alltoallv" },
	} {
		o := sweep("all_reduce")
		mod(&o)
		rep := runChecked(t, w, o)
		for _, r := range rep.Rows {
			if o.PerIterTiming && (r.OutOfPlace.PerIter == nil || len(r.OutOfPlace.PerIter.Times) != o.Iters || !(r.OutOfPlace.PerIter.Min > 0)) {
				t.Errorf("%s: %d bytes: per-iteration %+v", name, r.Size, r.OutOfPlace.PerIter)
			}
			if o.Ceiling && (r.Ceiling == nil || !(r.Ceiling.AlgBW > 0)) {
				t.Errorf("%s: %d bytes: ceiling %+v", name, r.Size, r.Ceiling)
			}
			if o.Ceiling && r.Size >= 1<<20 {
				t.Logf("%d bytes: all_reduce algbw %.1f GB/s, device memcpy %.1f GB/s (%.0f%%)", r.Size, r.OutOfPlace.AlgBW, r.Ceiling.AlgBW, 100*r.OutOfPlace.AlgBW/r.Ceiling.AlgBW)
			}
		}
		if o.MemoryReport {
			if rep.Memory == nil || rep.Memory.Buffers < 2*o.MaxBytes || rep.Memory.Init < 0 {
				t.Errorf("-M: %+v", rep.Memory)
			} else {
				t.Logf("-M: init %d, buffers %d, collectives %d bytes", rep.Memory.Init, rep.Memory.Buffers, rep.Memory.Collective)
			}
		}
	}
}

// -t 2 on GPU 0: two threads, each driving a one-rank communicator of its
// own, meeting at the thread barriers.
func TestGPUThreads(t *testing.T) {
	gputest.Require(t)
	var comms []*nccl.Communicator
	for range 2 {
		w, err := perf.LocalWorld(context.Background(), []int{0}, perf.CommConfig("all_reduce"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		comms = append(comms, w.Comms...)
	}
	o := sweep("all_reduce")
	o.Threads, o.PerIterTiming = 2, true
	rep := runChecked(t, &perf.World{Comms: comms, NProcs: 1}, o)
	if len(rep.Devices) != 2 {
		t.Errorf("%d device lines, want one per thread", len(rep.Devices))
	}
}

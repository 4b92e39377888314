package devapi_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/devapi"
	"github.com/nccl4go/nccl/internal/gputest"
)

// GPU tests of the device API. They need the NCCL device headers of the
// loaded library (NCCL4GO_NCCL_INCLUDE, or FindHeaders' usual places) and
// a compiler (NVRTC, else nvcc).

const (
	arBlocks  = 4
	arThreads = 256
)

// rankState is one rank's part of a device all-reduce over windows.
type rankState struct {
	c          *nccl.Communicator
	s          cuda.Stream
	send, recv cuda.Slice[float32]
	sw, rw     *nccl.Window
	dc         *nccl.DevComm
}

// setupRanks makes, on device 0, one communicator per rank of this
// process, a send and a receive window of n floats each and a device
// communicator with arBlocks LSA barriers, every collective step run by
// all ranks at once (one goroutine each). It returns the first refusal.
func setupRanks(t testing.TB, nranks, n int) ([]*rankState, error) {
	devs := make([]int, nranks)
	comms, err := nccl.InitAll(devs)
	if err != nil {
		return nil, fmt.Errorf("InitAll(%v): %w", devs, err)
	}
	rs := make([]*rankState, nranks)
	for i, c := range comms {
		rs[i] = &rankState{c: c}
	}
	// Together: a loop of Destroy deadlocks where finalize waits for the
	// other ranks (NCCL 2.31.0a16).
	t.Cleanup(func() { nccl.DestroyAll(comms...) })
	each := func(step string, f func(r *rankState) error) error {
		errs := make([]error, nranks)
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(r)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		return nil
	}
	if err := each("buffers", func(r *rankState) error {
		var err error
		if r.s, err = cuda.Device(0).NewStream(); err != nil {
			return err
		}
		t.Cleanup(func() { r.s.Destroy() })
		if r.send, err = nccl.MemAlloc[float32](0, n); err != nil {
			return err
		}
		t.Cleanup(func() { r.send.Free() })
		if r.recv, err = nccl.MemAlloc[float32](0, n); err != nil {
			return err
		}
		t.Cleanup(func() { r.recv.Free() })
		return nil
	}); err != nil {
		return nil, err
	}
	if err := each("RegisterWindow", func(r *rankState) error {
		var err error
		if r.sw, err = r.c.RegisterWindow(nccl.BufferOf(r.send), nccl.WindowCollSymmetric); err != nil {
			return err
		}
		r.rw, err = r.c.RegisterWindow(nccl.BufferOf(r.recv), nccl.WindowCollSymmetric)
		return err
	}); err != nil {
		return nil, err
	}
	if err := each("CreateDevComm", func(r *rankState) error {
		var err error
		r.dc, err = r.c.CreateDevComm(&nccl.DevCommRequirements{LSABarrierCount: nccl.Ptr(arBlocks)})
		return err
	}); err != nil {
		return nil, err
	}
	return rs, nil
}

var nvrtcOnce sync.Once

func loadKernels(t testing.TB) *devapi.Kernels {
	t.Helper()
	h, err := devapi.FindHeaders("")
	if err != nil {
		t.Skipf("no NCCL device headers for the loaded library (the device API cannot be compiled here): %v", err)
	}
	nvrtcOnce.Do(func() {
		// Which compiler handles NCCL's headers here: NVRTC alone first.
		t0 := time.Now()
		_, err := devapi.Compile(devapi.Source(), devapi.Options{Headers: h, Compiler: devapi.NVRTC, NoCache: true})
		msg := fmt.Sprint(err)
		if len(msg) > 1500 {
			msg = msg[:1500] + "..."
		}
		t.Logf("NVRTC alone on the ready kernels (%v): %s", time.Since(t0).Round(time.Millisecond), msg)
	})
	t0 := time.Now()
	k, err := devapi.Load(devapi.Options{Headers: h})
	if err != nil {
		t.Fatalf("compiling the ready kernels against %s (NCCL %s): %v", h.Dir, h.Release, err)
	}
	t.Logf("ready kernels compiled against %s (NCCL %s) in %v", h.Dir, h.Release, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() { k.Close() })
	return k
}

// fill gives rank r's send buffer the values r*1000 + i%1000 (exact in
// float32 sums) and clears its receive buffer.
func fill(t testing.TB, rs []*rankState, n int) []float32 {
	t.Helper()
	want := make([]float32, n)
	for r, st := range rs {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r*1000 + i%1000)
			want[i] += v[i]
		}
		if err := st.send.CopyFromHost(v); err != nil {
			t.Fatal(err)
		}
		if err := st.recv.Memset(0); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func check(t testing.TB, what string, rs []*rankState, want []float32) {
	t.Helper()
	for r, st := range rs {
		got, err := st.recv.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: rank %d element %d = %v, want %v", what, r, i, got[i], want[i])
			}
		}
	}
}

func syncAll(t testing.TB, rs []*rankState) {
	t.Helper()
	for _, st := range rs {
		if err := st.s.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
}

func launchAll(t testing.TB, k *devapi.Kernels, rs []*rankState, n int) {
	for _, st := range rs {
		if err := k.AllReduceSum(st.s, st.sw, 0, st.rw, 0, n, st.dc, arBlocks, arThreads); err != nil {
			t.Fatalf("AllReduceSum: %v", err)
		}
	}
}

func ncclAll(t testing.TB, rs []*rankState) {
	err := nccl.Group(func() error {
		for _, st := range rs {
			if err := st.c.AllReduce(nccl.BufferOf(st.send), nccl.BufferOf(st.recv), nccl.Sum, st.s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("AllReduce: %v", err)
	}
}

// TestGPUDeviceAllReduce: two ranks of this process on GPU 0 all-reduce
// from inside their own kernel (LSA loads and stores, LSA barriers): the
// result is exact and equal to Communicator.AllReduce's on the same data,
// also when the launches are captured into CUDA graphs replayed 100 times.
func TestGPUDeviceAllReduce(t *testing.T) {
	gputest.Require(t)
	if err := gputest.MultiRankGPU(); err != nil {
		t.Skipf("two ranks on one GPU: %v", err)
	}
	const n = 1 << 16
	rs, err := setupRanks(t, 2, n)
	if err != nil {
		t.Skipf("NCCL REFUSED the two-rank device-API setup on one GPU: %v (TestGPUDevCommOneRank proves the path with one rank)", err)
	}
	for _, st := range rs {
		if err := devapi.RequireLSA(st.c); err != nil {
			t.Skipf("REFUSED: %v", err)
		}
	}
	k := loadKernels(t)
	want := fill(t, rs, n)
	launchAll(t, k, rs, n)
	syncAll(t, rs)
	check(t, "device all-reduce", rs, want)

	fill(t, rs, n)
	ncclAll(t, rs)
	syncAll(t, rs)
	check(t, "Communicator.AllReduce on the same data", rs, want)

	// The same launches captured (one graph per rank's stream), replayed.
	fill(t, rs, n)
	execs := make([]*cuda.GraphExec, len(rs))
	for i, st := range rs {
		g, err := st.s.Capture(cuda.CaptureThreadLocal, func() error {
			return k.AllReduceSum(st.s, st.sw, 0, st.rw, 0, n, st.dc, arBlocks, arThreads)
		})
		if err != nil {
			t.Fatalf("capturing rank %d's launch: %v", i, err)
		}
		defer g.Destroy()
		if execs[i], err = g.Instantiate(); err != nil {
			t.Fatal(err)
		}
		defer execs[i].Destroy()
	}
	check(t, "nothing ran during capture", rs, make([]float32, n))
	for range 100 {
		for i, st := range rs {
			if err := execs[i].Launch(st.s); err != nil {
				t.Fatalf("graph launch: %v", err)
			}
		}
	}
	syncAll(t, rs)
	check(t, "100 graph replays", rs, want)
	t.Logf("device all-reduce of %d floats over 2 ranks on one GPU: exact, equal to AllReduce, and after 100 graph replays", n)
}

// TestGPUDeviceAllGather: the ready all-gather of two ranks on GPU 0 gives
// what Communicator.AllGather gives on the same data, exactly.
func TestGPUDeviceAllGather(t *testing.T) {
	gputest.Require(t)
	if err := gputest.MultiRankGPU(); err != nil {
		t.Skipf("two ranks on one GPU: %v", err)
	}
	const n = 1 << 16 // the receive buffer; count = n/2 per rank
	rs, err := setupRanks(t, 2, n)
	if err != nil {
		t.Skipf("NCCL REFUSED the two-rank device-API setup on one GPU: %v", err)
	}
	k := loadKernels(t)
	fill(t, rs, n)
	want := make([]float32, n)
	for r := range rs {
		for i := range n / 2 {
			want[r*n/2+i] = float32(r*1000 + i%1000)
		}
	}
	for _, st := range rs {
		if err := k.AllGather(st.s, st.sw, 0, st.rw, 0, n/2, st.dc, arBlocks, arThreads); err != nil {
			t.Fatalf("AllGather: %v", err)
		}
	}
	syncAll(t, rs)
	check(t, "device all-gather", rs, want)
	fill(t, rs, n)
	err = nccl.Group(func() error {
		for _, st := range rs {
			half, _ := st.send.Sub(0, n/2)
			if err := st.c.AllGather(nccl.BufferOf(half), nccl.BufferOf(st.recv), st.s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("AllGather: %v", err)
	}
	syncAll(t, rs)
	check(t, "Communicator.AllGather on the same data", rs, want)
}

// BenchmarkDeviceAllReduce times the device all-reduce (one kernel launch
// per rank) beside Communicator.AllReduce (a group of one call per rank)
// for small messages, two ranks of this process on GPU 0; and the device
// all-reduce replayed from a CUDA graph.
func BenchmarkDeviceAllReduce(b *testing.B) {
	gputest.Require(b)
	if err := gputest.MultiRankGPU(); err != nil {
		b.Skipf("two ranks on one GPU: %v", err)
	}
	const maxN = 1 << 18
	rs, err := setupRanks(b, 2, maxN)
	if err != nil {
		b.Skipf("REFUSED: %v", err)
	}
	k := loadKernels(b)
	for _, bytes := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		n := bytes / 4
		b.Run(fmt.Sprintf("device/%dKiB", bytes>>10), func(b *testing.B) {
			for b.Loop() {
				launchAll(b, k, rs, n)
			}
			syncAll(b, rs)
		})
		b.Run(fmt.Sprintf("nccl/%dKiB", bytes>>10), func(b *testing.B) {
			sub := make([]*rankState, len(rs))
			for i, st := range rs {
				c := *st
				c.send, _ = st.send.Sub(0, n)
				c.recv, _ = st.recv.Sub(0, n)
				sub[i] = &c
			}
			for b.Loop() {
				ncclAll(b, sub)
			}
			syncAll(b, rs)
		})
	}
}

// TestGPUDevCommOneRank proves the device-API path with one rank: a kernel
// reads its DevComm (rank, size, LSA rank and size), the LSA pointer to its
// own window (equal to the window's buffer, and the value there) and
// completes an LSA barrier.
func TestGPUDevCommOneRank(t *testing.T) {
	r := gputest.Require(t)
	rs, err := setupRanks(t, 1, 1024)
	var se *nccl.SymmetricMemoryError
	var ue *nccl.UnsupportedError
	if errors.As(err, &ue) && ue.Feature == "ncclDevCommCreate" {
		// A release without device communicators (before 2.28.3, seen on
		// 2.27.7): the refusal names the call and its first release, and
		// RequireLSA foresees it.
		comms, ierr := nccl.InitAll([]int{0})
		if ierr != nil {
			t.Fatal(ierr)
		}
		defer comms[0].Destroy()
		lsa := devapi.RequireLSA(comms[0])
		if ue.Since != 22803 || ue.Loaded != r || !errors.Is(lsa, nccl.ErrUnsupported) {
			t.Errorf("gated refusal %v (Since %s, Loaded %s), RequireLSA %v; want Since 2.28.3, Loaded %s, both ErrUnsupported", err, ue.Since, ue.Loaded, lsa, r)
		}
		t.Logf("GATED on NCCL %s as expected: %v; RequireLSA: %v", r, err, lsa)
		return
	}
	if r < 22807 && errors.As(err, &se) {
		// NCCL before 2.28.7 gives symmetric memory to no communicator
		// of one rank: the refusal must be typed, say why, and be
		// foreseen by RequireLSA.
		if se.Since != 22807 || se.Loaded != r || !errors.Is(err, nccl.ErrUnsupported) || !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("gated refusal %v: Since %s Loaded %s, want Since 2.28.7, Loaded %s, ErrUnsupported and ErrInvalidUsage", err, se.Since, se.Loaded, r)
		}
		comms, ierr := nccl.InitAll([]int{0})
		if ierr != nil {
			t.Fatal(ierr)
		}
		defer comms[0].Destroy()
		lsa := devapi.RequireLSA(comms[0])
		var ce *devapi.CapabilityError
		if !errors.As(lsa, &ce) || ce.Path != "LSA" || !errors.Is(lsa, nccl.ErrUnsupported) {
			t.Errorf("RequireLSA on a one-rank communicator of NCCL %s: %v, want a *CapabilityError", r, lsa)
		}
		t.Logf("GATED on NCCL %s as expected: %v; RequireLSA: %v", r, err, lsa)
		return
	}
	if err != nil {
		t.Fatalf("one-rank device-API setup: %v", err)
	}
	if err := devapi.RequireLSA(rs[0].c); err != nil {
		t.Fatalf("RequireLSA: %v", err)
	}
	k := loadKernels(t)
	st := rs[0]
	v := make([]float32, 1024)
	v[0] = 42.5
	if err := st.send.CopyFromHost(v); err != nil {
		t.Fatal(err)
	}
	p, err := k.Probe(st.s, st.sw, 0, st.dc)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	t.Logf("the kernel saw: %+v (window buffer %#x)", *p, st.send.Ptr())
	if p.Rank != 0 || p.NRanks != 1 || p.LSARank != 0 || p.LSASize != 1 || !p.BarrierDone || p.First != 42.5 || p.LSAPointer == 0 {
		t.Errorf("probe = %+v; want rank 0 of 1, LSA rank 0 of 1, the barrier done, 42.5 through the LSA pointer", *p)
	}
	if host, err := st.sw.LSAPointer(0, 0); err == nil && host != p.LSAPointer {
		t.Errorf("the kernel's LSA pointer %#x, the host API's %#x", p.LSAPointer, host)
	}
}

// TestGPUGates: on this single-GPU machine with NVLink multicast off,
// multimem and GIN kernels are refused with a reason (or, on NCCL before
// 2.29.2, the properties cannot tell).
func TestGPUGates(t *testing.T) {
	r := gputest.Require(t)
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Destroy()
	for name, err := range map[string]error{"LSA": devapi.RequireLSA(comms[0]),
		"multimem": devapi.RequireMultimem(comms[0]), "GIN": devapi.RequireGIN(comms[0])} {
		t.Logf("%s: %v", name, err)
		if name == "LSA" && r < 22807 && !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("LSA on a one-rank communicator of NCCL %s (no symmetric memory before 2.28.7): %v, want a refusal", r, err)
		}
		if name != "LSA" && !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("%s on one GPU without NVLink multicast or a network: %v, want a refusal", name, err)
		}
	}
}

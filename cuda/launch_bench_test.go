package cuda_test

import (
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/cudabridge"
	"github.com/nccl4go/nccl/internal/faketest"
)

// benchDriver loads the real driver where one with a device loads, else
// the fake (in this process: a benchmark runs no fake-library child).
func benchDriver(b *testing.B) string {
	b.Helper()
	if faketest.InChild() {
		b.Skip("benchmark: not in a fake-library child")
	}
	if n, err := cuda.Count(); err == nil && n > 0 {
		return "gpu"
	}
	_, cudaPath := faketest.Libraries(b, faketest.Env{})
	if err := cuda.Load(cudaPath); err != nil {
		b.Skipf("benchmark: no driver, and the fake does not load: %v", err)
	}
	return "fake"
}

// BenchmarkLaunch is the host cost of a kernel launch (an empty kernel
// with saxpy's four parameters: a float, two Slices, an int32; one block of
// 32 threads) through Function.Launch, beside the same launch written in C
// (cuLaunchKernel in a loop, the argument array built once), measured as
// BenchmarkAllReduceHostPath measures collectives. The target: go-ns/op at
// most c-ns/op + 100, and 0 allocations. On the fake driver it measures the
// binding alone.
//
// A real GPU runs such a kernel in a few microseconds, longer than a launch
// takes the host: thousands of launches in a row fill the stream's queue,
// and the loop then measures the GPU (on the H200, rounds of 2000 gave
// 3.5-7.7 us per launch for both loops, and their difference was noise).
// So every loop runs launchRound launches on an empty stream, and the
// stream is synchronized between loops with the timer stopped.
func BenchmarkLaunch(b *testing.B) {
	driver := benchDriver(b)
	dev := cuda.Device(0)
	_, f := loadKernel(b, dev, saxpyPTX, "noop")
	x, err := cuda.Alloc[float32](dev, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Free()
	s, err := dev.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	ctx, _ := cudabridge.PrimaryContext(int(dev))
	cfg := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(32)}
	a, n := float32(2), int32(256)
	goLoop := func(k int) {
		for range k {
			if err := f.Launch(s, cfg, a, x, x, n); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The C loop's arguments: the same bytes Launch writes.
	var buf [32]byte
	*(*float32)(unsafe.Pointer(&buf[0])) = a
	*(*uintptr)(unsafe.Pointer(&buf[8])) = x.Ptr()
	*(*uintptr)(unsafe.Pointer(&buf[16])) = x.Ptr()
	*(*int32)(unsafe.Pointer(&buf[24])) = n
	offs := [4]uint16{0, 8, 16, 24}
	ccfg := capi.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}
	cLoop := func(k int) {
		if r := capi.BenchLaunchLoop(ctx, f.Handle(), s.Handle(), &ccfg, &buf[0], &offs[0], 4, k, 0); r != 0 {
			b.Fatalf("C loop: CUresult %d", r)
		}
	}
	// The C loop passing the context each launch, as the binding's
	// trampoline gets it: the trampoline asks the driver for the current
	// context (cuCtxGetCurrent) before each launch.
	cCtxLoop := func(k int) {
		if r := capi.BenchLaunchLoop(ctx, f.Handle(), s.Handle(), &ccfg, &buf[0], &offs[0], 4, k, 1); r != 0 {
			b.Fatalf("C loop: CUresult %d", r)
		}
	}
	// The C loop with one locked read-modify-write after each launch, as
	// a Go call's return does (the runtime's atomic status changes): does
	// such an instruction cost more right after a launch? (On the H200:
	// -15 to 6 ns, no.)
	cLockLoop := func(k int) {
		capi.BenchSetLockEach(true)
		defer capi.BenchSetLockEach(false)
		cLoop(k)
	}
	// The crossing alone: the shim's launch called from Go with the
	// argument bytes built once, no binding logic.
	rawLoop := func(k int) {
		for range k {
			if r := capi.Launch(ctx, f.Handle(), s.Handle(), &ccfg, &buf[0], &offs[0], 4); r != 0 {
				b.Fatalf("raw launch: CUresult %d", r)
			}
		}
	}
	sync := func() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	goLoop(launchRound)
	cLoop(launchRound)
	sync()
	// Does the driver launch a function in its own context when the
	// thread has none current? (If so, a launch need not make it current.)
	r := capi.BenchLaunchLoop(ctx, f.Handle(), s.Handle(), &ccfg, &buf[0], &offs[0], 4, 2, 2)
	sync()
	b.Logf("launch with no current context: CUresult %d", r)
	b.Logf("driver: %s; rounds of %d launches, the stream synchronized between them (timer stopped)", driver, launchRound)

	b.Run("go", func(b *testing.B) {
		b.ReportAllocs()
		calls := runtime.NumCgoCall()
		i := 0
		for b.Loop() {
			if err := f.Launch(s, cfg, a, x, x, n); err != nil {
				b.Fatal(err)
			}
			if i++; i%launchRound == 0 {
				b.StopTimer()
				calls -= runtime.NumCgoCall()
				sync()
				calls += runtime.NumCgoCall()
				b.StartTimer()
			}
		}
		b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "cgo-calls/op")
		b.StopTimer()
		sync()
	})
	b.Run("c", func(b *testing.B) {
		b.ReportAllocs()
		for done := 0; done < b.N; done += launchRound {
			cLoop(min(launchRound, b.N-done))
			b.StopTimer()
			sync()
			b.StartTimer()
		}
	})
	b.Run("compare", func(b *testing.B) {
		// Paired rounds: each runs the loops, starting with a different
		// one each round (so that none always follows another's
		// synchronization), each on an empty stream. The figures are
		// medians over rounds: a shared machine's stalls hit single
		// rounds. floor-ns/op is one cgo call that does nothing, the
		// part of diff-ns/op that no Go binding avoids. The breakdown:
		// binding-ns/op (go - raw: the Go side's checks and argument
		// marshalling), ctx-ns/op (c-ctx - c: asking the driver for the
		// current context each launch) and aa-ns/op, the C loop against
		// itself (c2 - c: the spread no difference below means anything);
		// lock-ns/op: the C loop with one locked read-modify-write after
		// each launch, minus the C loop.
		floorLoop := func(k int) {
			for range k {
				if capi.BenchFloor() != 0 {
					b.Fatal("floor")
				}
			}
		}
		loops := [...]func(int){goLoop, cLoop, floorLoop, cCtxLoop, rawLoop, cLoop, cLockLoop}
		const nl = len(loops)
		var ns [nl][]float64
		var diff, binding, ctxCost, aa, lock []float64
		for done, r := 0, 0; done < b.N; r++ {
			k := min(launchRound, b.N-done)
			var t [nl]float64
			for j := range nl {
				i := (r + j) % nl
				t0 := time.Now()
				loops[i](k)
				t[i] = float64(time.Since(t0).Nanoseconds()) / float64(k)
				b.StopTimer()
				sync()
				b.StartTimer()
			}
			for i := range nl {
				ns[i] = append(ns[i], t[i])
			}
			diff = append(diff, t[0]-t[1])
			binding = append(binding, t[0]-t[4])
			ctxCost = append(ctxCost, t[3]-t[1])
			aa = append(aa, t[5]-t[1])
			lock = append(lock, t[6]-t[1])
			done += k
		}
		b.ReportMetric(medianOf(ns[0]), "go-ns/op")
		b.ReportMetric(medianOf(ns[1]), "c-ns/op")
		b.ReportMetric(medianOf(diff), "diff-ns/op")
		b.ReportMetric(medianOf(ns[2]), "floor-ns/op")
		b.ReportMetric(medianOf(ns[4]), "raw-ns/op")
		b.ReportMetric(medianOf(binding), "binding-ns/op")
		b.ReportMetric(medianOf(ctxCost), "ctx-ns/op")
		b.ReportMetric(medianOf(aa), "aa-ns/op")
		b.ReportMetric(medianOf(lock), "lock-ns/op")
	})
}

// launchRound is the number of launches between two synchronizations of
// BenchmarkLaunch's stream: few enough that the queue of a real GPU never
// fills (an empty kernel runs in a few microseconds, a launch takes the
// host about 2), many enough to amortize the timer.
const launchRound = 256

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

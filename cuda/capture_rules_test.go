package cuda_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/faketest"
)

// checkCaptureRules: the driver's rules for thread B querying events while
// thread A captures (the table of issue 17, measured on an H200):
//
//	B queries                        Global       ThreadLocal  Relaxed
//	an event recorded in the capture  907, broken  907, broken  907, broken
//	an unrelated event                900, broken  0, fine      0, fine
//
// and B in relaxed capture interaction mode (the watchdog's poller) breaks
// nothing with an unrelated event. "broken": EndCapture fails with 901.
func checkCaptureRules(t *testing.T) {
	dev := cuda.Device(0)
	for _, mode := range []cuda.CaptureMode{cuda.CaptureGlobal, cuda.CaptureThreadLocal, cuda.CaptureRelaxed} {
		for _, c := range []struct {
			name     string
			inside   bool  // query an event recorded inside the capture
			relaxed  bool  // B's interaction mode is relaxed
			want     int32 // B's result
			wantGood bool  // the capture survives
		}{
			{"captured event", true, false, 907, false},
			{"unrelated event", false, false, map[bool]int32{true: 900, false: 0}[mode == cuda.CaptureGlobal], mode != cuda.CaptureGlobal},
			{"unrelated event, relaxed thread", false, true, 0, true},
		} {
			t.Run(mode.String()+"/"+c.name, func(t *testing.T) {
				capStream, err := dev.NewStream()
				if err != nil {
					t.Fatal(err)
				}
				defer capStream.Destroy()
				other, err := dev.NewStream()
				if err != nil {
					t.Fatal(err)
				}
				defer other.Destroy()
				inside, err := dev.NewEventFlags(cuda.EventDisableTiming)
				if err != nil {
					t.Fatal(err)
				}
				unrelated, err := dev.NewEventFlags(cuda.EventDisableTiming)
				if err != nil {
					t.Fatal(err)
				}
				defer unrelated.Destroy()
				if err := unrelated.Record(other); err != nil {
					t.Fatal(err)
				}
				if err := other.Synchronize(); err != nil {
					t.Fatal(err)
				}
				began, queried := make(chan error), make(chan struct{})
				type ended struct {
					g   *cuda.Graph
					err error
				}
				end := make(chan ended)
				go func() { // thread A
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					err := capStream.BeginCapture(mode)
					if err == nil {
						err = inside.Record(capStream)
					}
					began <- err
					if err != nil {
						return
					}
					<-queried
					g, err := capStream.EndCapture()
					end <- ended{g, err}
				}()
				if err := <-began; err != nil {
					t.Fatalf("thread A: %v", err)
				}
				// Thread B.
				runtime.LockOSThread()
				if c.relaxed {
					if prev, r := capi.CuThreadExchangeStreamCaptureMode(int32(cuda.CaptureRelaxed)); r != 0 {
						t.Errorf("cuThreadExchangeStreamCaptureMode: %d", r)
					} else {
						defer capi.CuThreadExchangeStreamCaptureMode(prev)
					}
				}
				ev := unrelated
				if c.inside {
					ev = inside
				}
				got := queryEvent(ev)
				runtime.UnlockOSThread()
				close(queried)
				e := <-end
				if e.g != nil {
					e.g.Destroy()
				}
				// The captured event is destroyed after its graph.
				inside.Destroy()
				if int32(got) != c.want {
					t.Errorf("B's query = %v (%d), want %d", got, int32(got), c.want)
				}
				var ce *cuda.Error
				switch {
				case c.wantGood && e.err != nil:
					t.Errorf("EndCapture = %v, want the capture intact", e.err)
				case !c.wantGood && (!errors.As(e.err, &ce) || ce.Code != cuda.StreamCaptureInvalidated):
					t.Errorf("EndCapture = %v, want %v", e.err, cuda.StreamCaptureInvalidated)
				}
				if st, err := capStream.CaptureStatus(); err != nil || st != cuda.NotCapturing {
					t.Errorf("after EndCapture the stream is %v, %v", st, err)
				}
			})
		}
	}
}

func TestFakeCaptureRules(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_CAPTURE_RULES=1"}}, checkCaptureRules)
}

func TestGPUCaptureRules(t *testing.T) {
	requireGPU(t)
	checkCaptureRules(t)
}

// BenchmarkStreamCaptureInfo measures the driver's answer to "is this
// stream capturing?" (cuStreamGetCaptureInfo through the shim), which the
// watchdog asks once per stream and capture epoch rather than per
// operation. On a GPU machine it uses the real driver; elsewhere the fake.
func BenchmarkStreamCaptureInfo(b *testing.B) {
	if n, err := cuda.Count(); err != nil || n == 0 {
		_, cudaPath := faketest.Libraries(b, faketest.Env{})
		if err := cuda.Load(cudaPath); err != nil {
			b.Skipf("cannot load the fake CUDA driver: %v", err)
		}
	}
	s, err := cuda.Device(0).NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	b.ReportAllocs()
	for b.Loop() {
		if st, _, err := s.CaptureInfo(); err != nil || st != cuda.NotCapturing {
			b.Fatal(st, err)
		}
	}
}

// CaptureInfo and CaptureStatus allocate nothing, capturing or not (the
// watchdog asks them on its hot path; on the H200 CaptureInfo once cost
// 16 B and an allocation per call: its outputs escaped to the heap). The
// fake driver exports cuStreamGetCaptureInfo_v3, as CUDA 12.3+ does, so
// this follows the driver's code path.
func TestCaptureInfoNoAllocations(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		check := func(want cuda.CaptureStatus) {
			t.Helper()
			info := testing.AllocsPerRun(100, func() {
				if st, _, err := s.CaptureInfo(); err != nil || st != want {
					t.Fatalf("CaptureInfo: %v, %v; want %v", st, err, want)
				}
			})
			status := testing.AllocsPerRun(100, func() {
				if st, err := s.CaptureStatus(); err != nil || st != want {
					t.Fatalf("CaptureStatus: %v, %v; want %v", st, err, want)
				}
			})
			if info != 0 || status != 0 {
				t.Errorf("%v: %v allocations per CaptureInfo, %v per CaptureStatus; want 0", want, info, status)
			}
		}
		check(cuda.NotCapturing)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := s.BeginCapture(cuda.CaptureRelaxed); err != nil {
			t.Fatal(err)
		}
		check(cuda.Capturing)
		g, err := s.EndCapture()
		if err != nil {
			t.Fatal(err)
		}
		g.Destroy()
	})
}

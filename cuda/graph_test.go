package cuda_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

func TestGraphCapture(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		if st, err := s.CaptureStatus(); err != nil || st != cuda.NotCapturing {
			t.Fatalf("CaptureStatus before = %v, %v", st, err)
		}
		buf, err := cuda.AllocFrom(dev, []float32{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		var seen cuda.CaptureStatus
		var id uint64
		g, err := s.Capture(cuda.CaptureThreadLocal, func() error {
			var err error
			if seen, err = s.CaptureStatus(); err != nil {
				return err
			}
			if _, id, err = s.CaptureInfo(); err != nil {
				return err
			}
			return buf.MemsetAsync(0, s)
		})
		if err != nil {
			t.Fatalf("Capture: %v", err)
		}
		if seen != cuda.Capturing || id == 0 {
			t.Errorf("inside the capture: status %v, id %d; want %v and an id", seen, id, cuda.Capturing)
		}
		if st, id, err := s.CaptureInfo(); err != nil || st != cuda.NotCapturing || id != 0 {
			t.Errorf("CaptureInfo after = %v, %d, %v", st, id, err)
		}
		exec, err := g.Instantiate()
		if err != nil {
			t.Fatalf("Instantiate: %v", err)
		}
		for i := 0; i < 3; i++ {
			if err := exec.Launch(s); err != nil {
				t.Fatalf("Launch %d: %v", i, err)
			}
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		other, _ := cuda.Device(1).NewStream()
		defer other.Destroy()
		if err := exec.Launch(other); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Launch on another device's stream: %v", err)
		}
		if err := g.Destroy(); err != nil {
			t.Errorf("Graph.Destroy: %v", err)
		}
		if err := g.Destroy(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("second Graph.Destroy: %v", err)
		}
		if _, err := g.Instantiate(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Instantiate after Destroy: %v", err)
		}
		if err := exec.Launch(s); err != nil {
			t.Errorf("an instance outlives its graph: %v", err)
		}
		if err := exec.Destroy(); err != nil {
			t.Errorf("GraphExec.Destroy: %v", err)
		}
		if err := exec.Launch(s); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Launch after Destroy: %v", err)
		}
		var nilG *cuda.Graph
		var nilE *cuda.GraphExec
		if nilG.Destroy() != nil || nilE.Destroy() != nil {
			t.Error("Destroy of nil failed")
		}
	})
}

func TestGraphCaptureErrors(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		if err := dev.DefaultStream().BeginCapture(cuda.CaptureGlobal); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("capturing the legacy default stream: %v", err)
		}
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		if err := s.BeginCapture(cuda.CaptureMode(7)); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("unknown mode: %v", err)
		}
		if _, err := s.EndCapture(); err == nil {
			t.Error("EndCapture without a capture succeeded")
		}
		// fn's error wins, and the stream is left not capturing.
		boom := errors.New("boom")
		if _, err := s.Capture(cuda.CaptureGlobal, func() error { return boom }); err != boom {
			t.Errorf("Capture returned %v, want fn's error", err)
		}
		if st, err := s.CaptureStatus(); err != nil || st != cuda.NotCapturing {
			t.Errorf("after a failed capture: %v, %v", st, err)
		}
		// A capture begun twice fails; CaptureStreams ends the first.
		if _, err := cuda.CaptureStreams([]cuda.Stream{s, s}, cuda.CaptureGlobal, func() error { return nil }); err == nil {
			t.Error("capturing one stream twice succeeded")
		}
		if st, _ := s.CaptureStatus(); st != cuda.NotCapturing {
			t.Errorf("after a failed double capture: %v", st)
		}
		if _, err := cuda.CaptureStreams(nil, cuda.CaptureGlobal, func() error { return nil }); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("no streams: %v", err)
		}
		// Ending on another thread fails outside relaxed mode.
		runtime.LockOSThread()
		if err := s.BeginCapture(cuda.CaptureThreadLocal); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			_, err := s.EndCapture()
			done <- err
		}()
		if err := <-done; err == nil {
			t.Error("EndCapture on another thread succeeded")
		}
		g, err := s.EndCapture()
		runtime.UnlockOSThread()
		if err != nil {
			t.Fatalf("EndCapture on the capturing thread: %v", err)
		}
		g.Destroy()
		// Several streams of two devices at once.
		s1, _ := cuda.Device(1).NewStream()
		defer s1.Destroy()
		gs, err := cuda.CaptureStreams([]cuda.Stream{s, s1}, cuda.CaptureThreadLocal, func() error { return nil })
		if err != nil || len(gs) != 2 {
			t.Fatalf("CaptureStreams = %v, %v", gs, err)
		}
		for _, g := range gs {
			e, err := g.Instantiate()
			if err != nil {
				t.Fatal(err)
			}
			e.Destroy()
			g.Destroy()
		}
		if cuda.CaptureThreadLocal.String() != "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL" || cuda.CaptureInvalidated.String() != "CU_STREAM_CAPTURE_STATUS_INVALIDATED" {
			t.Error("String names")
		}
	})
}

// A panic inside Capture ends the capture on the thread that began it
// (the stream is not left capturing) and goes on to the caller.
func TestCapturePanicEndsCapture(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		for _, mode := range []cuda.CaptureMode{cuda.CaptureGlobal, cuda.CaptureThreadLocal, cuda.CaptureRelaxed} {
			got := func() (p any) {
				defer func() { p = recover() }()
				s.Capture(mode, func() error { panic("boom") })
				return nil
			}()
			if got != "boom" {
				t.Errorf("%v: recovered %v, want the panic \"boom\"", mode, got)
			}
			if st, err := s.CaptureStatus(); err != nil || st != cuda.NotCapturing {
				t.Errorf("%v: after the panic the stream is %v (%v), want %v", mode, st, err, cuda.NotCapturing)
			}
		}
	})
}

// The capture results 900-908 have their C names.
func TestCaptureResultNames(t *testing.T) {
	for r, want := range map[cuda.Result]string{
		cuda.StreamCaptureUnsupported: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
		cuda.StreamCaptureInvalidated: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
		cuda.StreamCaptureImplicit:    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
		cuda.CapturedEvent:            "CUDA_ERROR_CAPTURED_EVENT",
		cuda.StreamCaptureWrongThread: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	} {
		if r.String() != want {
			t.Errorf("Result(%d) = %q, want %q", int32(r), r.String(), want)
		}
	}
}

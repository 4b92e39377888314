package cuda_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

func TestStreams(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := cuda.Device(1).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if s.Handle() == 0 {
			t.Fatal("NewStream gave the default stream")
		}
		if d, ok := s.Device(); !ok || d != 1 {
			t.Errorf("Device = %s, %v", d, ok)
		}
		if h, d, err := resolveStream(s); err != nil || h != s.Handle() || d != 1 {
			t.Errorf("Resolve = %#x, %d, %v", h, d, err)
		}
		if err := s.Synchronize(); err != nil {
			t.Errorf("Synchronize: %v", err)
		}
		if done, err := s.Done(); err != nil || !done {
			t.Errorf("Done = %v, %v", done, err)
		}
		if err := s.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if err := s.Destroy(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("a second Destroy: %v, want ErrClosed", err)
		}
		if err := s.Synchronize(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Synchronize after Destroy: %v", err)
		}
		if _, err := s.Done(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Done after Destroy: %v", err)
		}
		if _, _, err := resolveStream(s); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Resolve after Destroy: %v", err)
		}

		// Default and wrapped streams are not ours to destroy.
		def := cuda.Device(0).DefaultStream()
		if def.Handle() != 0 {
			t.Errorf("DefaultStream handle %#x", def.Handle())
		}
		if err := def.Synchronize(); err != nil {
			t.Errorf("DefaultStream.Synchronize: %v", err)
		}
		if err := def.Destroy(); err == nil {
			t.Error("Destroy of the default stream succeeded")
		}
		var zero cuda.Stream
		if err := zero.Destroy(); err == nil {
			t.Error("Destroy of the zero Stream succeeded")
		}
		if h, d, err := resolveStream(zero); h != 0 || d != -1 || err != nil {
			t.Errorf("zero Resolve = %#x, %d, %v", h, d, err)
		}
		if _, ok := zero.Device(); ok {
			t.Error("the zero Stream has a device")
		}
		if err := zero.Synchronize(); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("zero Synchronize: %v", err)
		}
		owned, _ := cuda.Device(0).NewStream()
		defer owned.Destroy()
		w := cuda.StreamOf(owned.Handle(), 0)
		if err := w.Destroy(); err == nil {
			t.Error("Destroy of a wrapped stream succeeded")
		}
		if err := w.Synchronize(); err != nil {
			t.Errorf("the wrapped stream still works: %v", err)
		}
	})
}

func TestEvents(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		start, err := cuda.Device(0).NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		end, err := cuda.Device(0).NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		var ce *cuda.Error
		if _, err := cuda.Elapsed(start, end); !errors.As(err, &ce) || ce.Code != cuda.InvalidHandle {
			t.Errorf("Elapsed of unrecorded events: %v, want CUDA_ERROR_INVALID_HANDLE", err)
		}
		if err := start.Record(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		if err := end.Record(s); err != nil {
			t.Fatal(err)
		}
		if err := end.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if done, err := end.Done(); err != nil || !done {
			t.Errorf("Done = %v, %v", done, err)
		}
		d, err := cuda.Elapsed(start, end)
		if err != nil || d < 2*time.Millisecond || d > time.Second {
			t.Errorf("Elapsed = %v, %v; want about 2ms", d, err)
		}
		// Recording on the default stream of the event's device works; a
		// stream of another device is rejected.
		if err := start.Record(cuda.Device(0).DefaultStream()); err != nil {
			t.Errorf("Record on the default stream: %v", err)
		}
		if err := start.Record(cuda.Stream{}); err != nil {
			t.Errorf("Record on the zero Stream: %v", err)
		}
		other, _ := cuda.Device(1).NewStream()
		defer other.Destroy()
		if err := start.Record(other); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Record on a stream of cuda:1: %v", err)
		}
		if err := start.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := start.Destroy(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("a second Destroy: %v", err)
		}
		if err := start.Record(s); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Record after Destroy: %v", err)
		}
		if err := start.Synchronize(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Synchronize after Destroy: %v", err)
		}
		if _, err := start.Done(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Done after Destroy: %v", err)
		}
		if _, err := cuda.Elapsed(start, end); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Elapsed after Destroy: %v", err)
		}
		if _, err := cuda.Elapsed(end, start); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("Elapsed after Destroy (end): %v", err)
		}
		end.Destroy()
		var nilEvent *cuda.Event
		if err := nilEvent.Destroy(); err != nil {
			t.Errorf("Destroy of a nil event: %v", err)
		}
		if err := nilEvent.Record(s); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("Record of a nil event: %v", err)
		}
	})
}

package cuda_test

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/cudabridge"
	"github.com/nccl4go/nccl/internal/faketest"
)

//go:embed testdata/saxpy.ptx
var saxpyPTX []byte

func loadSaxpy(t *testing.T, dev cuda.Device) (*cuda.Module, *cuda.Function) {
	t.Helper()
	return loadKernel(t, dev, saxpyPTX, "saxpy")
}

// loadKernel loads code on dev (unloaded when the test ends) and returns
// the module and its kernel name.
func loadKernel(t testing.TB, dev cuda.Device, code []byte, name string) (*cuda.Module, *cuda.Function) {
	t.Helper()
	m, err := dev.LoadModule(code)
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() { m.Unload() })
	f, err := m.Function(name)
	if err != nil {
		t.Fatalf("Function: %v", err)
	}
	return m, f
}

func TestLaunchSaxpy(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(1)
		_, f := loadSaxpy(t, dev)
		if sizes, ok := f.ParamSizes(); !ok || len(sizes) != 4 || sizes[0] != 4 || sizes[1] != 8 || sizes[3] != 4 {
			t.Errorf("ParamSizes = %v, %v; want [4 8 8 4], true", sizes, ok)
		}
		const n = 1000
		xs, ys := make([]float32, n), make([]float32, n)
		for i := range xs {
			xs[i], ys[i] = float32(i), float32(2*i+1)
		}
		x, _ := cuda.AllocFrom(dev, xs)
		y, _ := cuda.AllocFrom(dev, ys)
		defer x.Free()
		defer y.Free()
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		cfg := cuda.LaunchConfig{Grid: cuda.Dim((n + 255) / 256), Block: cuda.Dim(256)}
		if err := f.Launch(s, cfg, float32(3), x, y, int32(n)); err != nil {
			t.Fatalf("Launch: %v", err)
		}
		// The zero Stream: the device's legacy default stream.
		if err := f.Launch(cuda.Stream{}, cfg, float32(1), x, y, int32(n)); err != nil {
			t.Fatalf("Launch on the zero Stream: %v", err)
		}
		got, err := y.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if want := 3*xs[i] + ys[i] + xs[i]; got[i] != want {
				t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
			}
		}
	})
}

// echoModule's kernel echo writes its parameters' bytes, at the offsets
// the driver reports, to its first argument.
const echoModule = "FAKECUBIN\nkernel echo 8,4,1,8,2,12,8,16 echo\nkernel count 8 count\n"

type triple struct {
	A int32
	B float32
	C uint32
}

type pair struct{ X, Y float64 }

func TestLaunchArgumentBytes(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		_, f := loadKernel(t, dev, []byte(echoModule), "echo")
		out, _ := cuda.Alloc[uint8](dev, 80)
		defer out.Free()
		out.Memset(0)
		h := cuda.Float16From(1.5)
		err := f.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)},
			out, int32(-7), true, 2.25, h, triple{A: 5, B: 0.5, C: 9}, uintptr(0xdead), pair{1, -2})
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		b, _ := out.ToHost()
		le := binary.LittleEndian
		checks := []struct {
			name      string
			got, want uint64
		}{
			{"pointer", le.Uint64(b[0:]), uint64(out.Ptr())},
			{"int32", uint64(le.Uint32(b[8:])), uint64(uint32(0xfffffff9))},
			{"bool", uint64(b[12]), 1},
			{"float64", le.Uint64(b[16:]), math.Float64bits(2.25)},
			{"Float16", uint64(le.Uint16(b[24:])), uint64(h)},
			{"struct.A", uint64(le.Uint32(b[28:])), 5},
			{"struct.B", uint64(le.Uint32(b[32:])), uint64(math.Float32bits(0.5))},
			{"struct.C", uint64(le.Uint32(b[36:])), 9},
			{"uintptr", le.Uint64(b[40:]), 0xdead},
			{"pair.X", le.Uint64(b[48:]), math.Float64bits(1)},
			{"pair.Y", le.Uint64(b[56:]), math.Float64bits(-2)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: kernel saw %#x, want %#x", c.name, c.got, c.want)
			}
		}
		// An argument larger than the small buffer takes the large one.
		m2, err := dev.LoadModule([]byte("FAKECUBIN\nkernel big 8,600 echo\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Unload()
		big, _ := m2.Function("big")
		var blob [600]byte
		for i := range blob {
			blob[i] = byte(i * 7)
		}
		out2, _ := cuda.Alloc[uint8](dev, 608)
		defer out2.Free()
		if err := big.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)}, out2, blob); err != nil {
			t.Fatalf("Launch with a 600-byte argument: %v", err)
		}
		b2, _ := out2.ToHost()
		if [600]byte(b2[8:]) != blob {
			t.Errorf("the 600-byte argument arrived changed")
		}
		// One past the tiny buffer (64 bytes), within the small one: a
		// device communicator's size.
		m3, err := dev.LoadModule([]byte("FAKECUBIN\nkernel mid 8,200 echo\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer m3.Unload()
		mid, _ := m3.Function("mid")
		var blob3 [200]byte
		copy(blob3[:], blob[:])
		out3, _ := cuda.Alloc[uint8](dev, 208)
		defer out3.Free()
		if err := mid.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)}, out3, blob3); err != nil {
			t.Fatalf("Launch with a 200-byte argument: %v", err)
		}
		if b3, _ := out3.ToHost(); [200]byte(b3[8:]) != blob3 {
			t.Errorf("the 200-byte argument arrived changed")
		}
	})
}

func TestLaunchErrors(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_CC=80"}}, func(t *testing.T) {
		dev := cuda.Device(0)
		if _, err := dev.LoadModule(nil); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("LoadModule(nil) = %v, want ErrInvalidValue", err)
		}
		_, err := dev.LoadModule([]byte("not a module"))
		var me *cuda.ModuleError
		if !errors.As(err, &me) || me.Log == "" || !strings.Contains(err.Error(), "JIT log") {
			t.Errorf("LoadModule(garbage) = %v, want a *ModuleError with the JIT log", err)
		}
		m, f := loadSaxpy(t, dev)
		if _, err := m.Function("nope"); !errors.Is(err, &cuda.Error{Code: cuda.NotFound}) && !strings.Contains(fmtErr(err), "no kernel \"nope\"") {
			t.Errorf("Function(nope) = %v", err)
		}
		x, _ := cuda.Alloc[float32](dev, 4)
		defer x.Free()
		other, _ := cuda.Alloc[float32](cuda.Device(1), 4)
		defer other.Free()
		freed, _ := cuda.Alloc[float32](dev, 4)
		freed.Free()
		one := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(4)}
		bad := []struct {
			name string
			cfg  cuda.LaunchConfig
			args []any
			want string
		}{
			{"too few", one, []any{float32(1), x, x}, "3 arguments for kernel saxpy, which takes 4"},
			{"wrong size", one, []any{2.0, x, x, int32(4)}, "8 bytes, but parameter 0 of kernel saxpy has 4"},
			{"Go int", one, []any{float32(1), x, x, 4}, "convert it to int32 or int64"},
			{"pointer", one, []any{float32(1), x, &struct{ p *int }{}, int32(4)}, "holds Go pointers"},
			{"string", one, []any{float32(1), x, "y", int32(4)}, "holds Go pointers"},
			{"nil", one, []any{float32(1), x, nil, int32(4)}, "nil argument"},
			{"other device", one, []any{float32(1), x, other, int32(4)}, "memory on cuda:1"},
			{"zero grid", cuda.LaunchConfig{Block: cuda.Dim(1)}, []any{float32(1), x, x, int32(4)}, "X must be at least 1"},
			{"cluster before 9.0", cuda.LaunchConfig{Grid: cuda.Dim(2), Block: cuda.Dim(1), Cluster: cuda.Dim(2)},
				[]any{float32(1), x, x, int32(4)}, "need compute capability 9.0"},
		}
		for _, c := range bad {
			err := f.Launch(cuda.Stream{}, c.cfg, c.args...)
			if !errors.Is(err, cuda.ErrInvalidValue) || !strings.Contains(fmtErr(err), c.want) {
				t.Errorf("%s: Launch = %v; want ErrInvalidValue saying %q", c.name, err, c.want)
			}
		}
		if err := f.Launch(cuda.Stream{}, one, float32(1), x, freed, int32(4)); !errors.Is(err, cuda.ErrClosed) || !strings.Contains(err.Error(), "args[2]") {
			t.Errorf("a freed Slice: %v, want ErrClosed naming args[2]", err)
		}
		mn, _ := dev.LoadModule([]byte("FAKECUBIN\nkernel nosize\n"))
		defer mn.Unload()
		nosize, _ := mn.Function("nosize")
		if _, known := nosize.ParamSizes(); known {
			t.Error("ParamSizes of a kernel the driver has no parameter information for: known")
		}
		if err := nosize.Launch(cuda.Stream{}, one, [3000]byte{}, [3000]byte{}); !errors.Is(err, cuda.ErrInvalidValue) || !strings.Contains(err.Error(), "no room left") {
			t.Errorf("6000 bytes of arguments: %v", err)
		}
		if err := nosize.Launch(cuda.Stream{}, one, [3000]byte{}); err != nil {
			t.Errorf("3000 bytes of arguments: %v", err)
		}
		// The driver's checks come back as *Error.
		err = f.Launch(cuda.Stream{}, cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(2048)}, float32(1), x, x, int32(4))
		if !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("2048 threads a block: %v, want the driver's invalid value", err)
		}
		big := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(32), SharedMemBytes: 64 << 10}
		if err := f.Launch(cuda.Stream{}, big, float32(1), x, x, int32(4)); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("64 KiB of dynamic shared memory before SetMaxDynamicSharedMemory: %v", err)
		}
		if err := f.SetMaxDynamicSharedMemory(64 << 10); err != nil {
			t.Fatal(err)
		}
		if v, err := f.Attribute(cuda.FuncMaxDynamicSharedBytes); err != nil || v != 64<<10 {
			t.Errorf("Attribute(FuncMaxDynamicSharedBytes) = %d, %v", v, err)
		}
		if err := f.Launch(cuda.Stream{}, big, float32(1), x, x, int32(4)); err != nil {
			t.Errorf("64 KiB after SetMaxDynamicSharedMemory: %v", err)
		}
		s, _ := dev.NewStream()
		s.Destroy()
		if err := f.Launch(s, one, float32(1), x, x, int32(4)); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("destroyed stream: %v, want ErrClosed", err)
		}
		s1, _ := cuda.Device(1).NewStream()
		defer s1.Destroy()
		if err := f.Launch(s1, one, float32(1), x, x, int32(4)); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("stream of another device: %v", err)
		}
		m.Unload()
		if err := f.Launch(cuda.Stream{}, one, float32(1), x, x, int32(4)); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("after Unload: %v, want ErrClosed", err)
		}
		if err := m.Unload(); !errors.Is(err, cuda.ErrClosed) {
			t.Errorf("second Unload: %v, want ErrClosed", err)
		}
	})
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestLaunchAttributesAndOccupancy(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		_, f := loadSaxpy(t, dev)
		per, err := f.MaxActiveBlocksPerMultiprocessor(256, 0)
		if err != nil || per != 8 {
			t.Fatalf("MaxActiveBlocksPerMultiprocessor(256, 0) = %d, %v; want 8 (the fake's 2048 threads an SM)", per, err)
		}
		if _, err := f.MaxActiveBlocksPerMultiprocessor(0, 0); !errors.Is(err, cuda.ErrInvalidValue) {
			t.Errorf("block size 0: %v", err)
		}
		sms, _ := dev.Attribute(cuda.AttrMultiprocessorCount)
		x, _ := cuda.AllocFrom(dev, []float32{1, 2})
		y, _ := cuda.AllocFrom(dev, []float32{1, 1})
		defer x.Free()
		defer y.Free()
		coop := cuda.LaunchConfig{Grid: cuda.Dim(per * sms), Block: cuda.Dim(256), Cooperative: true}
		if err := f.Launch(cuda.Stream{}, coop, float32(2), x, y, int32(2)); err != nil {
			t.Fatalf("cooperative launch of a grid that fits: %v", err)
		}
		coop.Grid = cuda.Dim(per*sms + 1)
		if err := f.Launch(cuda.Stream{}, coop, float32(2), x, y, int32(2)); err == nil ||
			!strings.Contains(err.Error(), "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE") && !strings.Contains(err.Error(), "720") {
			t.Errorf("cooperative grid one block too large: %v", err)
		}
		cl := cuda.LaunchConfig{Grid: cuda.Dim(4), Block: cuda.Dim(32), Cluster: cuda.Dim(2)}
		if err := f.Launch(cuda.Stream{}, cl, float32(2), x, y, int32(2)); err != nil {
			t.Errorf("cluster launch on compute capability 9.0: %v", err)
		}
		got, _ := y.ToHost()
		if want := []float32{5, 9}; got[0] != want[0] || got[1] != want[1] {
			t.Errorf("after a cooperative and a cluster saxpy: %v, want %v", got, want)
		}
	})
}

func TestLaunchCapture(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		_, f := loadKernel(t, dev, []byte(echoModule), "count")
		counter, _ := cuda.AllocFrom(dev, []int32{0})
		defer counter.Free()
		s, _ := dev.NewStream()
		defer s.Destroy()
		one := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(1)}
		g, err := s.Capture(cuda.CaptureThreadLocal, func() error {
			for range 3 {
				if err := f.Launch(s, one, counter); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Capture of launches: %v", err)
		}
		defer g.Destroy()
		if got, _ := counter.ToHost(); got[0] != 0 {
			t.Errorf("captured launches ran at capture: counter %d, want 0", got[0])
		}
		exec, err := g.Instantiate()
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Destroy()
		if err := exec.Launch(s); err != nil {
			t.Fatalf("graph launch: %v", err)
		}
		if err := f.Launch(s, one, counter); err != nil {
			t.Fatal(err)
		}
		if got, _ := counter.ToHost(); got[0] != 1 {
			t.Errorf("after capture, a plain launch: counter %d, want 1", got[0])
		}
	})
}

// TestLaunchAllocations: a launch with a Slice, scalars and a struct makes
// no heap allocation.
func TestLaunchAllocations(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		dev := cuda.Device(0)
		m, _ := dev.LoadModule([]byte("FAKECUBIN\nkernel k 8,4,12,8,2\n"))
		defer m.Unload()
		f, err := m.Function("k")
		if err != nil {
			t.Fatal(err)
		}
		x, _ := cuda.Alloc[float32](dev, 16)
		defer x.Free()
		s, _ := dev.NewStream()
		defer s.Destroy()
		cfg := cuda.LaunchConfig{Grid: cuda.Dim(1), Block: cuda.Dim(32)}
		a, tr, h := float32(1), triple{1, 2, 3}, cuda.BFloat16From(2)
		allocs := testing.AllocsPerRun(100, func() {
			a++
			if err := f.Launch(s, cfg, x, a, tr, 2.5, h); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Launch: %v allocations per launch, want 0", allocs)
		}
	})
}

// checkLaunchWithoutContext: with no context current on the thread, the
// driver launches a function in its module's context (measured on an H200,
// driver 580: CUresult 0; the fake models it), so a launch does not depend
// on what another library left current.
func checkLaunchWithoutContext(t *testing.T) {
	dev := cuda.Device(0)
	_, f := loadKernel(t, dev, saxpyPTX, "noop")
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	ctx, err := cudabridge.PrimaryContext(int(dev))
	if err != nil {
		t.Fatal(err)
	}
	var buf [32]byte
	offs := [4]uint16{0, 8, 16, 24}
	cfg := capi.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}
	if r := capi.BenchLaunchLoop(ctx, f.Handle(), s.Handle(), &cfg, &buf[0], &offs[0], 4, 2, 2); r != 0 {
		t.Errorf("launch with no current context: CUresult %d, want 0", r)
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("Synchronize after it: %v", err)
	}
}

func TestLaunchWithoutCurrentContext(t *testing.T) {
	faketest.Run(t, faketest.Env{}, checkLaunchWithoutContext)
}

package nccl_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/gputest"
)

// The GPU tests of the collectives: every collective, every element type
// the loaded NCCL has and every reduction operator, in place and out of
// place, checked element by element against a host reference computed in
// float64 from random data. Each rank regenerates every rank's input from
// the shared seeds, so it can check its own results alone.

// collEnv is one rank's view of a test run.
type collEnv struct {
	c       *nccl.Communicator
	rank, n int
	dev     cuda.Device
	s       cuda.Stream
	rel     nccl.Release
	fp8Red  bool // fp8 reductions work: NCCL 2.24.3 and a GPU of compute capability 9.0
	root    int  // root of the rooted collectives
}

func newCollEnv(t *testing.T, c *nccl.Communicator, root int) *collEnv {
	t.Helper()
	rel, err := nccl.Version()
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NRanks()
	if err != nil {
		t.Fatal(err)
	}
	rank, err := c.Rank()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := c.Device()
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy() })
	major, _, err := dev.ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	return &collEnv{c: c, rank: rank, n: n, dev: dev, s: s, rel: rel, fp8Red: rel >= 22403 && major >= 9, root: root}
}

// typeInfo describes an element type for the host reference.
type typeInfo struct {
	isInt, signed bool
	u             float64 // unit roundoff
}

func infoOf(dt nccl.DataType) typeInfo {
	switch dt {
	case nccl.Int8, nccl.Int32, nccl.Int64:
		return typeInfo{isInt: true, signed: true}
	case nccl.Uint8, nccl.Uint32, nccl.Uint64:
		return typeInfo{isInt: true}
	case nccl.Float16:
		return typeInfo{u: 0x1p-11}
	case nccl.BFloat16:
		return typeInfo{u: 0x1p-8}
	case nccl.Float32:
		return typeInfo{u: 0x1p-24}
	case nccl.Float64:
		return typeInfo{u: 0x1p-53}
	case nccl.Float8E4M3:
		return typeInfo{u: 0x1p-4}
	case nccl.Float8E5M2:
		return typeInfo{u: 0x1p-3}
	}
	panic("unknown type")
}

func toF64[T cuda.Elem](v T) float64 {
	switch x := any(v).(type) {
	case int8:
		return float64(x)
	case uint8:
		return float64(x)
	case int32:
		return float64(x)
	case uint32:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	case float64:
		return x
	case cuda.Float16:
		return float64(x.Float32())
	case cuda.BFloat16:
		return float64(x.Float32())
	case cuda.Float8E4M3:
		return float64(x.Float32())
	case cuda.Float8E5M2:
		return float64(x.Float32())
	}
	panic("unreachable")
}

func fromF64[T cuda.Elem](f float64) T {
	var z T
	var v any
	switch any(z).(type) {
	case int8:
		v = int8(f)
	case uint8:
		v = uint8(f)
	case int32:
		v = int32(f)
	case uint32:
		v = uint32(f)
	case int64:
		v = int64(f)
	case uint64:
		v = uint64(f)
	case float32:
		v = float32(f)
	case float64:
		v = f
	case cuda.Float16:
		v = cuda.Float16From(float32(f))
	case cuda.BFloat16:
		v = cuda.BFloat16From(float32(f))
	case cuda.Float8E4M3:
		v = cuda.Float8E4M3From(float32(f))
	case cuda.Float8E5M2:
		v = cuda.Float8E5M2From(float32(f))
	}
	return v.(T)
}

// opCase is a reduction operator under test.
type opCase struct {
	name   string
	op     nccl.RedOp // built-in, or -1 for PreMulSum
	device bool       // PreMulSum with a device scalar
}

var opCases = []opCase{
	{"sum", nccl.Sum, false}, {"prod", nccl.Prod, false}, {"max", nccl.Max, false},
	{"min", nccl.Min, false}, {"avg", nccl.Avg, false},
	{"premulsum", -1, false}, {"premulsum-device", -1, true},
}

// preMulScalar is the PreMulSum scalar of a rank: each rank its own.
func preMulScalar(ti typeInfo, rank int) float64 {
	if ti.isInt {
		return float64(2 + rank%2)
	}
	return 1.5 + 0.5*float64(rank%3)
}

// genInput is rank's input for one case: count random values of T, chosen
// so that no reduction over n ranks overflows, never all zeros or ones.
func genInput[T cuda.Elem](seed uint64, rank, n, count int, op string) []T {
	ti := infoOf(cuda.DTypeOf[T]())
	rng := rand.New(rand.NewPCG(seed, uint64(rank)+1))
	out := make([]T, count)
	for i := range out {
		var f float64
		switch {
		case ti.isInt && op == "prod":
			if ti.signed {
				f = float64(rng.IntN(3) + 1) // 1..3
				if rng.IntN(2) == 0 {
					f = -f
				}
			} else {
				f = float64(rng.IntN(3) + 2) // 2..4
			}
			if n > 3 {
				f = math.Copysign(math.Min(math.Abs(f), 2), f)
			}
		case ti.isInt:
			limit := 100 // max, min
			switch op {
			case "sum", "avg", "move":
				limit = 60 / n
			case "premulsum", "premulsum-device":
				limit = 40 / n
			}
			if ti.signed {
				f = float64(rng.IntN(2*limit+1) - limit)
			} else {
				f = float64(rng.IntN(2*limit + 1))
			}
		case op == "prod":
			f = 0.5 + rng.Float64() // [0.5, 1.5)
		case op == "max" || op == "min":
			f = 8*rng.Float64() - 4
		default:
			f = 0.25 + 0.75*rng.Float64()
			if rng.IntN(2) == 0 {
				f = -f
			}
		}
		out[i] = fromF64[T](f)
	}
	return out
}

// reduceRef is the reduction of the ranks' inputs in float64, with an error
// bound per element: exact for integers and for max and min; for sums
// (n+2) unit roundoffs of the sum of magnitudes, which covers any order of
// rounded additions and the rounded pre-multiplications.
func reduceRef[T cuda.Elem](in [][]T, oc opCase, ti typeInfo) (ref, tol []float64) {
	n, count := len(in), len(in[0])
	ref, tol = make([]float64, count), make([]float64, count)
	for i := range count {
		var acc, mag float64
		switch oc.name {
		case "prod":
			acc = 1
			for r := range n {
				acc *= toF64(in[r][i])
			}
			mag = math.Abs(acc)
		case "max", "min":
			acc = toF64(in[0][i])
			for r := 1; r < n; r++ {
				if v := toF64(in[r][i]); (oc.name == "max") == (v > acc) {
					acc = v
				}
			}
		case "premulsum", "premulsum-device":
			for r := range n {
				v := preMulScalar(ti, r) * toF64(in[r][i])
				acc += v
				mag += math.Abs(v)
			}
		default: // sum, avg
			for r := range n {
				v := toF64(in[r][i])
				acc += v
				mag += math.Abs(v)
			}
			if oc.name == "avg" {
				if ti.isInt {
					acc = math.Trunc(acc / float64(n)) // NCCL divides the integer sum, toward zero
				} else {
					acc /= float64(n)
				}
				mag /= float64(n)
			}
		}
		ref[i] = acc
		if !ti.isInt && oc.name != "max" && oc.name != "min" {
			tol[i] = float64(n+2)*ti.u*mag + 1e-300
		}
	}
	return ref, tol
}

// checkClose compares got with ref within tol (exact where tol is 0).
func checkClose[T cuda.Elem](t *testing.T, what string, got []T, ref, tol []float64) {
	t.Helper()
	bad := 0
	for i := range got {
		g := toF64(got[i])
		if math.Abs(g-ref[i]) > tol[i] || math.IsNaN(g) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v (tolerance %g)", what, i, g, ref[i], tol[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements wrong in all", what, bad)
	}
}

// checkEqual compares got with want bit for bit.
func checkEqual[T cuda.Elem](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d elements, want %d", what, len(got), len(want))
		return
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements wrong in all", what, bad)
	}
}

// upload copies host data to a new device slice, freed at the end of the test.
func upload[T cuda.Elem](t *testing.T, dev cuda.Device, host []T) cuda.Slice[T] {
	t.Helper()
	s, err := cuda.AllocFrom(dev, host)
	if err != nil {
		t.Fatalf("AllocFrom: %v", err)
	}
	t.Cleanup(func() { s.Free() })
	return s
}

// download waits for the stream and copies s to the host.
func download[T cuda.Elem](t *testing.T, e *collEnv, s cuda.Slice[T]) []T {
	t.Helper()
	if err := e.s.Synchronize(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	h, err := s.ToHost()
	if err != nil {
		t.Fatalf("ToHost: %v", err)
	}
	return h
}

func sub[T cuda.Elem](t *testing.T, s cuda.Slice[T], i, j int) cuda.Slice[T] {
	t.Helper()
	p, err := s.Sub(i, j)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// must fails the test at once when a call fails: the other ranks would
// otherwise wait for a call that never comes.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// makeOp returns the RedOp of a case for this rank, and a close function.
func makeOp[T cuda.Elem](t *testing.T, e *collEnv, oc opCase, ti typeInfo) (nccl.RedOp, func()) {
	t.Helper()
	if oc.op >= 0 {
		return oc.op, func() {}
	}
	scalar := fromF64[T](preMulScalar(ti, e.rank))
	var op *nccl.CustomOp
	var err error
	if oc.device {
		op, err = nccl.PreMulSumDevice(e.c, upload(t, e.dev, []T{scalar}))
	} else {
		op, err = nccl.PreMulSum(e.c, scalar)
	}
	must(t, "PreMulSum", err)
	if op.Type() != cuda.DTypeOf[T]() {
		t.Errorf("CustomOp.Type = %v", op.Type())
	}
	return op.Op(), func() {
		if err := op.Close(); err != nil {
			t.Errorf("CustomOp.Close: %v", err)
		}
		if err := op.Close(); err != nil {
			t.Errorf("second CustomOp.Close: %v", err)
		}
	}
}

// runCollectives checks every collective for element type T.
func runCollectives[T cuda.Elem](t *testing.T, e *collEnv) {
	dt := cuda.DTypeOf[T]()
	ti := infoOf(dt)
	const count = 999
	n, rank := e.n, e.rank
	if nccl.DataTypeSince(dt) > e.rel {
		s := upload(t, e.dev, make([]T, 4))
		err := e.c.AllGather(nccl.BufferOf(s), nccl.BufferOf(s), e.s)
		if !errors.Is(err, nccl.ErrUnsupported) {
			t.Errorf("%s on NCCL %s: %v, want ErrUnsupported", dt, e.rel, err)
		}
		t.Logf("%s: needs NCCL %s, loaded %s: only the refusal checked", dt, nccl.DataTypeSince(dt), e.rel)
		return
	}
	seed := uint64(dt) << 32
	inputs := func(seed uint64, count int, op string) (mine []T, all [][]T) {
		all = make([][]T, n)
		for r := range n {
			all[r] = genInput[T](seed, r, n, count, op)
		}
		return all[rank], all
	}

	// Reductions: AllReduce, Reduce and ReduceScatter, every operator.
	for oi, oc := range opCases {
		if nccl.IsFloat8(dt) && !e.fp8Red {
			s := upload(t, e.dev, make([]T, 4))
			err := e.c.AllReduce(nccl.BufferOf(s), nccl.BufferOf(s), nccl.Sum, e.s)
			if !errors.Is(err, nccl.ErrUnsupported) {
				t.Errorf("%s AllReduce without sm_90 or NCCL 2.24.3: %v, want ErrUnsupported", dt, err)
			}
			break
		}
		for _, inPlace := range []bool{false, true} {
			what := fmt.Sprintf("%s %s in-place=%v", dt, oc.name, inPlace)
			op, closeOp := makeOp[T](t, e, oc, ti)

			// AllReduce.
			mine, all := inputs(seed+uint64(oi)<<8+1, count, oc.name)
			ref, tol := reduceRef(all, oc, ti)
			send := upload(t, e.dev, mine)
			recv := send
			if !inPlace {
				recv = upload(t, e.dev, make([]T, count))
			}
			err := e.c.AllReduce(nccl.BufferOf(send), nccl.BufferOf(recv), op, e.s)
			if nccl.IsFloat8(dt) && e.n == 1 && (oc.name == "avg" || strings.HasPrefix(oc.name, "premulsum")) {
				// NCCL's one-rank path has no fp8 scaling kernel
				// (src/device/onerank.cu): the binding says so first.
				if !errors.Is(err, nccl.ErrUnsupported) || !strings.Contains(err.Error(), "one-rank") {
					t.Errorf("AllReduce %s on one rank: %v, want the one-rank fp8 refusal", what, err)
				}
				closeOp()
				break
			}
			must(t, "AllReduce "+what, err)
			checkClose(t, "AllReduce "+what, download(t, e, recv), ref, tol)

			// Reduce to e.root; other ranks pass no receive buffer out of place.
			mine, all = inputs(seed+uint64(oi)<<8+2, count, oc.name)
			ref, tol = reduceRef(all, oc, ti)
			send = upload(t, e.dev, mine)
			rb := nccl.Buffer{}
			recv = send
			if inPlace {
				rb = nccl.BufferOf(send)
			} else if rank == e.root {
				recv = upload(t, e.dev, make([]T, count))
				rb = nccl.BufferOf(recv)
			}
			must(t, "Reduce "+what, e.c.Reduce(nccl.BufferOf(send), rb, op, e.root, e.s))
			if rank == e.root {
				checkClose(t, "Reduce "+what, download(t, e, recv), ref, tol)
			}

			// ReduceScatter; in place, recv is this rank's block of send.
			mine, all = inputs(seed+uint64(oi)<<8+3, n*count, oc.name)
			ref, tol = reduceRef(all, oc, ti)
			send = upload(t, e.dev, mine)
			if inPlace {
				recv = sub(t, send, rank*count, (rank+1)*count)
			} else {
				recv = upload(t, e.dev, make([]T, count))
			}
			must(t, "ReduceScatter "+what, e.c.ReduceScatter(nccl.BufferOf(send), nccl.BufferOf(recv), op, e.s))
			checkClose(t, "ReduceScatter "+what, download(t, e, recv), ref[rank*count:(rank+1)*count], tol[rank*count:(rank+1)*count])
			closeOp()
		}
	}

	// Data movement: exact.
	for _, inPlace := range []bool{false, true} {
		what := fmt.Sprintf("%s in-place=%v", dt, inPlace)

		// Broadcast from e.root; other ranks pass no send buffer out of place.
		mine, all := inputs(seed+0x10, count, "move")
		recv := upload(t, e.dev, make([]T, count))
		sb := nccl.Buffer{}
		if inPlace {
			if rank == e.root {
				must(t, "CopyFromHost", recv.CopyFromHost(mine))
			}
			sb = nccl.BufferOf(recv)
		} else if rank == e.root {
			sb = nccl.BufferOf(upload(t, e.dev, mine))
		}
		must(t, "Broadcast "+what, e.c.Broadcast(sb, nccl.BufferOf(recv), e.root, e.s))
		checkEqual(t, "Broadcast "+what, download(t, e, recv), all[e.root])

		// AllGather; in place, send is this rank's block of recv.
		mine, all = inputs(seed+0x11, count, "move")
		recv = upload(t, e.dev, make([]T, n*count))
		var send cuda.Slice[T]
		if inPlace {
			send = sub(t, recv, rank*count, (rank+1)*count)
			must(t, "CopyFromHost", send.CopyFromHost(mine))
		} else {
			send = upload(t, e.dev, mine)
		}
		must(t, "AllGather "+what, e.c.AllGather(nccl.BufferOf(send), nccl.BufferOf(recv), e.s))
		got := download(t, e, recv)
		for r := range n {
			checkEqual(t, fmt.Sprintf("AllGather %s block %d", what, r), got[r*count:(r+1)*count], all[r])
		}

		if e.rel < 22803 {
			s := upload(t, e.dev, make([]T, n))
			err := e.c.AllToAll(nccl.BufferOf(s), nccl.BufferOf(upload(t, e.dev, make([]T, n))), e.s)
			if !errors.Is(err, nccl.ErrUnsupported) {
				t.Errorf("AllToAll on NCCL %s: %v, want ErrUnsupported", e.rel, err)
			}
			continue
		}

		// AllToAll: out of place only (NCCL has no in-place form).
		if !inPlace {
			const k = 333
			mine, all = inputs(seed+0x12, n*k, "move")
			send = upload(t, e.dev, mine)
			recv = upload(t, e.dev, make([]T, n*k))
			must(t, "AllToAll "+what, e.c.AllToAll(nccl.BufferOf(send), nccl.BufferOf(recv), e.s))
			got = download(t, e, recv)
			for r := range n {
				checkEqual(t, fmt.Sprintf("AllToAll %s block %d", what, r), got[r*k:(r+1)*k], all[r][rank*k:(rank+1)*k])
			}
		}

		// Gather to e.root; in place, the root's send is its block of recv.
		mine, all = inputs(seed+0x13, count, "move")
		rb := nccl.Buffer{}
		if rank == e.root {
			recv = upload(t, e.dev, make([]T, n*count))
			rb = nccl.BufferOf(recv)
		}
		if inPlace && rank == e.root {
			send = sub(t, recv, rank*count, (rank+1)*count)
			must(t, "CopyFromHost", send.CopyFromHost(mine))
		} else {
			send = upload(t, e.dev, mine)
		}
		must(t, "Gather "+what, e.c.Gather(nccl.BufferOf(send), rb, e.root, e.s))
		if rank == e.root {
			got = download(t, e, recv)
			for r := range n {
				checkEqual(t, fmt.Sprintf("Gather %s block %d", what, r), got[r*count:(r+1)*count], all[r])
			}
		} else {
			must(t, "stream", e.s.Synchronize())
		}

		// Scatter from e.root; in place, the root's recv is its block of send.
		mine, all = inputs(seed+0x14, n*count, "move")
		sb = nccl.Buffer{}
		var sendAll cuda.Slice[T]
		if rank == e.root {
			sendAll = upload(t, e.dev, mine)
			sb = nccl.BufferOf(sendAll)
		}
		if inPlace && rank == e.root {
			recv = sub(t, sendAll, rank*count, (rank+1)*count)
		} else {
			recv = upload(t, e.dev, make([]T, count))
		}
		must(t, "Scatter "+what, e.c.Scatter(sb, nccl.BufferOf(recv), e.root, e.s))
		checkEqual(t, "Scatter "+what, download(t, e, recv), all[e.root][rank*count:(rank+1)*count])
	}

	// Point-to-point in a group: to itself, and around the ring.
	mine, all := inputs(seed+0x20, count, "move")
	send := upload(t, e.dev, mine)
	self := upload(t, e.dev, make([]T, count))
	prev := upload(t, e.dev, make([]T, count))
	err := nccl.Group(func() error {
		return errors.Join(
			e.c.Send(nccl.BufferOf(send), rank, e.s),
			e.c.Recv(nccl.BufferOf(self), rank, e.s),
			e.c.Send(nccl.BufferOf(send), (rank+1)%n, e.s),
			e.c.Recv(nccl.BufferOf(prev), (rank+n-1)%n, e.s))
	})
	must(t, "Send/Recv group", err)
	checkEqual(t, fmt.Sprintf("%s Recv from self", dt), download(t, e, self), all[rank])
	checkEqual(t, fmt.Sprintf("%s Recv from rank %d", dt, (rank+n-1)%n), download(t, e, prev), all[(rank+n-1)%n])
}

// typeRuns lists runCollectives for every element type.
var typeRuns = []struct {
	name string
	run  func(*testing.T, *collEnv)
}{
	{"int8", runCollectives[int8]}, {"uint8", runCollectives[uint8]},
	{"int32", runCollectives[int32]}, {"uint32", runCollectives[uint32]},
	{"int64", runCollectives[int64]}, {"uint64", runCollectives[uint64]},
	{"float16", runCollectives[cuda.Float16]}, {"float32", runCollectives[float32]},
	{"float64", runCollectives[float64]}, {"bfloat16", runCollectives[cuda.BFloat16]},
	{"float8e4m3", runCollectives[cuda.Float8E4M3]}, {"float8e5m2", runCollectives[cuda.Float8E5M2]},
}

func runAllTypes(t *testing.T, e *collEnv) {
	t.Logf("rank %d/%d, root %d, NCCL %s, fp8 reductions %v", e.rank, e.n, e.root, e.rel, e.fp8Red)
	for _, tr := range typeRuns {
		tr.run(t, e)
		if t.Failed() {
			t.Fatalf("stopping after failures in %s", tr.name)
		}
	}
}

func TestGPUCollectivesOneRank(t *testing.T) {
	gputest.Require(t)
	c := collInit(t)
	runAllTypes(t, newCollEnv(t, c, 0))
}

// Two ranks (processes sharing GPU 0), root 1.
func TestGPUCollectivesTwoRanks(t *testing.T) {
	gputest.RunRanks(t, 2, 90*time.Second, nil, func(t *testing.T, rank, n int, id nccl.UniqueID) {
		c, err := nccl.Init(n, rank, id, nil)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		defer c.Destroy()
		runAllTypes(t, newCollEnv(t, c, 1))
	})
}

// Three ranks, root 2 and then root 1 (a root in the middle), for the types
// whose handling differs most: an integer, a float and a half type.
func TestGPUCollectivesThreeRanks(t *testing.T) {
	gputest.RunRanks(t, 3, 90*time.Second, nil, func(t *testing.T, rank, n int, id nccl.UniqueID) {
		c, err := nccl.Init(n, rank, id, nil)
		if err != nil {
			t.Fatalf("rank %d: Init: %v", rank, err)
		}
		defer c.Destroy()
		for _, root := range []int{2, 1} {
			e := newCollEnv(t, c, root)
			runCollectives[int32](t, e)
			runCollectives[float32](t, e)
			runCollectives[cuda.BFloat16](t, e)
		}
	})
}

// collInit creates a one-rank communicator on device 0.
func collInit(t testing.TB) *nccl.Communicator {
	t.Helper()
	comms, err := nccl.InitAll([]int{0})
	if err != nil {
		t.Fatalf("InitAll: %v", err)
	}
	t.Cleanup(func() { comms[0].Destroy() })
	return comms[0]
}

// One goroutine drives a group over several communicators of this process:
// one per GPU, or two ranks on GPU 0 where NCCL allows it.
func TestGPUGroupOverCommunicators(t *testing.T) {
	gputest.Require(t)
	ndev, err := cuda.Count()
	if err != nil {
		t.Fatal(err)
	}
	devs := []int{0, 1}
	if ndev < 2 {
		if err := gputest.MultiRankGPU(); err != nil {
			t.Skipf("one GPU, and ranks cannot share it in one process: %v", err)
		}
		devs = []int{0, 0}
	}
	comms, err := nccl.InitAll(devs)
	if err != nil {
		t.Fatalf("InitAll(%v): %v", devs, err)
	}
	defer func() {
		// Together: a loop of Destroy deadlocks where finalize waits for the
		// other ranks (NCCL 2.31.0a16).
		if err := nccl.DestroyAll(comms...); err != nil {
			t.Errorf("DestroyAll: %v", err)
		}
	}()
	const count = 4096
	n := len(comms)
	// Ranks sharing a GPU need a stream each: on one stream the ranks'
	// kernels would run one after the other, each waiting for the other.
	streams := make([]cuda.Stream, n)
	for r := range n {
		s, err := cuda.Device(devs[r]).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		streams[r] = s
	}
	sends := make([]cuda.Slice[float32], n)
	recvs := make([]cuda.Slice[float32], n)
	ring := make([]cuda.Slice[float32], n)
	in := make([][]float32, n)
	for r := range n {
		in[r] = genInput[float32](7, r, n, count, "sum")
		sends[r] = upload(t, cuda.Device(devs[r]), in[r])
		recvs[r] = upload(t, cuda.Device(devs[r]), make([]float32, count))
		ring[r] = upload(t, cuda.Device(devs[r]), make([]float32, count))
	}
	err = nccl.Group(func() error {
		var errs []error
		for r, c := range comms {
			errs = append(errs,
				c.AllReduce(nccl.BufferOf(sends[r]), nccl.BufferOf(recvs[r]), nccl.Sum, streams[r]),
				c.Send(nccl.BufferOf(sends[r]), (r+1)%n, streams[r]),
				c.Recv(nccl.BufferOf(ring[r]), (r+n-1)%n, streams[r]))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("Group: %v", err)
	}
	oc := opCases[0]
	ref, tol := reduceRef(in, oc, infoOf(nccl.Float32))
	for r := range n {
		if err := streams[r].Synchronize(); err != nil {
			t.Fatal(err)
		}
		got, err := recvs[r].ToHost()
		must(t, "ToHost", err)
		checkClose(t, fmt.Sprintf("rank %d AllReduce", r), got, ref, tol)
		got, err = ring[r].ToHost()
		must(t, "ToHost", err)
		checkEqual(t, fmt.Sprintf("rank %d Recv", r), got, in[(r+n-1)%n])
	}
}

// One goroutine drives a group over two independent one-rank communicators
// on GPU 0 (any NCCL release, one GPU): an all-reduce and a self
// send/receive on each, all in one group.
func TestGPUGroupOverIndependentCommunicators(t *testing.T) {
	gputest.Require(t)
	const n, count = 2, 4096
	comms := make([]*nccl.Communicator, n)
	streams := make([]cuda.Stream, n)
	for i := range n {
		cs, err := nccl.InitAll([]int{0})
		if err != nil {
			t.Fatalf("InitAll([0]) #%d: %v", i, err)
		}
		comms[i] = cs[0]
		defer comms[i].Destroy()
		s, err := cuda.Device(0).NewStream()
		must(t, "NewStream", err)
		defer s.Destroy()
		streams[i] = s
	}
	in := make([][]float32, n)
	sends := make([]cuda.Slice[float32], n)
	recvs := make([]cuda.Slice[float32], n)
	selfs := make([]cuda.Slice[float32], n)
	for i := range n {
		in[i] = genInput[float32](11, i, n, count, "sum")
		sends[i] = upload(t, 0, in[i])
		recvs[i] = upload(t, 0, make([]float32, count))
		selfs[i] = upload(t, 0, make([]float32, count))
	}
	err := nccl.Group(func() error {
		var errs []error
		for i, c := range comms {
			errs = append(errs,
				c.AllReduce(nccl.BufferOf(sends[i]), nccl.BufferOf(recvs[i]), nccl.Sum, streams[i]),
				c.Send(nccl.BufferOf(sends[i]), 0, streams[i]),
				c.Recv(nccl.BufferOf(selfs[i]), 0, streams[i]))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("Group: %v", err)
	}
	for i := range n {
		must(t, "Synchronize", streams[i].Synchronize())
		got, err := recvs[i].ToHost()
		must(t, "ToHost", err)
		checkEqual(t, fmt.Sprintf("communicator %d AllReduce", i), got, in[i])
		got, err = selfs[i].ToHost()
		must(t, "ToHost", err)
		checkEqual(t, fmt.Sprintf("communicator %d Recv from self", i), got, in[i])
	}
}

// The zero Stream is the legacy default stream; a custom operator is
// refused once closed, and for another type.
func TestGPUDefaultStreamAndCustomOpLifetime(t *testing.T) {
	gputest.Require(t)
	c := collInit(t)
	in := []float32{1.5, -2.25, 3}
	buf := upload(t, 0, in)
	op, err := nccl.PreMulSum(c, float32(2))
	must(t, "PreMulSum", err)
	must(t, "AllReduce", c.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), op.Op(), cuda.Stream{}))
	must(t, "sync", cuda.Device(0).Synchronize())
	got, err := buf.ToHost()
	must(t, "ToHost", err)
	checkEqual(t, "PreMulSum on the default stream", got, []float32{3, -4.5, 6})

	other := upload(t, 0, []float64{1})
	if err := c.AllReduce(nccl.BufferOf(other), nccl.BufferOf(other), op.Op(), cuda.Stream{}); !errors.Is(err, nccl.ErrInvalidArgument) {
		t.Errorf("float32 operator on float64 buffers: %v, want ErrInvalidArgument", err)
	}
	must(t, "Close", op.Close())
	if err := c.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), op.Op(), cuda.Stream{}); !errors.Is(err, nccl.ErrInvalidArgument) {
		t.Errorf("closed operator: %v, want ErrInvalidArgument", err)
	}
	op2, err := nccl.PreMulSum(c, float32(3))
	must(t, "PreMulSum", err)
	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := op2.Close(); err != nil {
		t.Errorf("Close after Destroy: %v, want nil", err)
	}
}

// GroupSimulate refuses to issue work NCCL would run rather than simulate
// (here: a one-rank communicator, which NCCL runs at once) and leaves the
// data alone.
func TestGPUGroupSimulate(t *testing.T) {
	gputest.RequireFunc(t, capi.SymGroupSimulateEnd)
	c := collInit(t)
	est, err := nccl.GroupSimulate(func() error { return nil })
	if err != nil || est != 0 {
		t.Errorf("empty GroupSimulate = %v, %v; want 0, nil", est, err)
	}
	send := upload(t, 0, []float32{1, 2, 3})
	recv := upload(t, 0, []float32{7, 7, 7})
	est, err = nccl.GroupSimulate(func() error {
		return c.AllReduce(nccl.BufferOf(send), nccl.BufferOf(recv), nccl.Sum, cuda.Stream{})
	})
	if !errors.Is(err, nccl.ErrUnsupported) || est != 0 {
		t.Errorf("GroupSimulate(AllReduce) = %v, %v; want 0 and ErrUnsupported", est, err)
	}
	must(t, "sync", cuda.Device(0).Synchronize())
	got, err := recv.ToHost()
	must(t, "ToHost", err)
	checkEqual(t, "recv after a simulated AllReduce", got, []float32{7, 7, 7})
	// Outside the simulation the same call runs.
	must(t, "AllReduce", c.AllReduce(nccl.BufferOf(send), nccl.BufferOf(recv), nccl.Sum, cuda.Stream{}))
	must(t, "sync", cuda.Device(0).Synchronize())
	got, err = recv.ToHost()
	must(t, "ToHost", err)
	checkEqual(t, "recv after AllReduce", got, []float32{1, 2, 3})
}

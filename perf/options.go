package perf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nccl4go/nccl"
)

// Options are the settings of one benchmark run. Their names, meanings and
// defaults are nccl-tests' (src/common.cu); [DefaultOptions] returns them.
type Options struct {
	// Test is the collective: one of [Tests].
	Test string
	// Threads is the number of threads of this process (-t; 0 and 1: one),
	// each driving GPUs of the [World]'s communicators, in order.
	Threads int
	// GPUs is the number of GPUs (ranks) this process drives (-g): devices
	// first..first+GPUs-1, where first is NCCL_TESTS_DEVICE when set, else
	// localRank*GPUs. Devices, when set, lists them instead (a device may
	// repeat where NCCL lets ranks share a GPU).
	GPUs    int
	Devices []int
	// MinBytes and MaxBytes bound the sizes swept (-b, -e); the next size is
	// size*StepFactor when StepFactor > 1, else size+StepBytes (-f, -i).
	MinBytes, MaxBytes, StepBytes uint64
	StepFactor                    uint64
	// Iters is the number of timed iterations per size (-n), Warmup the
	// untimed ones at every power-of-two size first (-w), AggIters the
	// operations grouped into each iteration (-m), Cycles how many times
	// the sweep runs (-N; 0 runs until the context ends).
	Iters, Warmup, AggIters, Cycles int
	// Check is the number of checked runs per size (-c; 0 checks nothing).
	Check int
	// Op is the reduction: sum, prod, max, min, avg, mulsum or all (-o).
	Op string
	// Type is the data type: an nccl-tests type name or all (-d).
	Type string
	// Root is the root of rooted collectives, -1 for every rank (-r).
	Root int
	// Blocking waits for each operation (-z): 1 with a barrier after each
	// inner iteration, 2 without, 3 waits after each outer iteration and
	// excludes the barrier from the time.
	Blocking int
	// StreamNull runs on the legacy default stream (-y).
	StreamNull bool
	// Graph > 0 captures the timed iterations into a CUDA graph and
	// launches it Graph times (-G).
	Graph int
	// Timeout aborts a wait on the GPU longer than this (-T; 0: none).
	Timeout time.Duration
	// Average says how ranks' times combine across processes (-a): 0 rank
	// 0's, 1 the mean, 2 the minimum, 3 the maximum.
	Average int
	// CPUTime reports the host time to issue the operations instead of the
	// time to complete them (-C).
	CPUTime bool
	// MinBusBW, when > 0, fails the run if the average bus bandwidth is
	// below 90% of it (nccl-tests' NCCL_TESTS_MIN_BW).
	MinBusBW float64
	// PerIterTiming times every iteration with CUDA events (-I 1): each
	// [Cell] gets PerIter, and the table the i_min, i_max, i_p99 and i_cv%
	// columns. Not with CUDA graphs.
	PerIterTiming bool
	// PerIterSkip leaves the first iterations out of the per-iteration
	// summary (-K; needs PerIterTiming, below Iters).
	PerIterSkip int
	// Timestamps prints the wall-clock time at the end of each row (-S 1).
	Timestamps bool
	// Unaligned offsets the send and receive buffers by this many elements
	// (-u), so that NCCL sees unaligned addresses.
	Unaligned int
	// Register registers the buffers with each communicator (-R): 0 none,
	// 1 ncclCommRegister (local registration), 2 ncclCommWindowRegister
	// with NCCL_WIN_COLL_SYMMETRIC (symmetric windows, NCCL 2.27; 1 before,
	// as nccl-tests falls back).
	Register int
	// MemoryReport prints the GPU memory the run used (-M 1): at
	// communicator init (when the [World] measured it), for the buffers, and
	// during the collectives.
	MemoryReport bool
	// Ceiling measures, beside each row, the bandwidth limit of the path
	// it measured where known ([Row.Ceiling]): on one rank, a device memcpy
	// of the same bytes. Not an nccl-tests option; it adds that copy's
	// time to the run.
	Ceiling bool
	// AlltoallvSpread is alltoallv's distance weighting, 0 (equal shares)
	// to 1 (more to more distant ranks), nccl-tests'
	// NCCL_TESTS_ALLTOALLV_SPREAD; nil is its default, 1.
	AlltoallvSpread *float64
	// CTAPolicy is the communicator's NCCL_CTA_POLICY flags (-x): 1
	// efficiency, 2 zero (NCCL 2.28), 3 both (2.29); 0 leaves NCCL's
	// default (NCCL_CTA_POLICY_DEFAULT). It takes effect through
	// [Options.CommConfig].
	CTAPolicy int
}

// DefaultOptions are nccl-tests' defaults: 32 MiB only, 20 iterations, 1
// warm-up, check on, sum of floats, root 0.
func DefaultOptions(test string) Options {
	return Options{
		Test: test, GPUs: 1,
		MinBytes: 32 << 20, MaxBytes: 32 << 20, StepBytes: 1 << 20, StepFactor: 1,
		Iters: 20, Warmup: 1, AggIters: 1, Cycles: 1, Check: 1,
		Op: "sum", Type: "float", Root: 0, Average: 1,
	}
}

// OptionError is an option this package rejects.
type OptionError struct {
	Option string // the flag, e.g. "-b"
	Value  string
	Reason string
}

// Error reads "perf: -b 12X: invalid size: ...".
func (e *OptionError) Error() string {
	return fmt.Sprintf("perf: %s %s: %s", e.Option, e.Value, e.Reason)
}

// ParseSize parses a byte count as nccl-tests' parsesize does (sscanf
// "%lf %1s"): a number (decimal with an optional fraction and exponent, or
// a 0x hexadecimal integer), optional blanks, then optionally a unit whose
// first letter counts: K, M or G in either case (binary: 1024, 1024^2,
// 1024^3), so 32M, 32MB and 32MiB are the same size and the rest of the
// word is ignored. Any other letter, a negative size, NaN or infinity is
// an error. The result is truncated to whole bytes.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	n := numberPrefix(t)
	if n == 0 {
		return 0, fmt.Errorf("%q: not a size (a number, then optionally K, M or G)", s)
	}
	v, err := parseCNumber(t[:n])
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: not a size (a number, then optionally K, M or G)", s)
	}
	unit := 1.0
	if rest := strings.TrimLeft(t[n:], " \t\n\v\f\r"); rest != "" {
		switch rest[0] {
		case 'K', 'k':
			unit = 1 << 10
		case 'M', 'm':
			unit = 1 << 20
		case 'G', 'g':
			unit = 1 << 30
		default:
			return 0, fmt.Errorf("%q: unknown unit %q (K, M or G: binary units)", s, rest)
		}
	}
	if v < 0 {
		return 0, fmt.Errorf("%q: negative", s)
	}
	b := v * unit
	if b >= 1<<63 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return uint64(b), nil
}

// numberPrefix is the length of the number strtod would read at the start
// of s (0 when there is none): a sign, then 0x and hex digits, or decimal
// digits with an optional fraction and exponent.
func numberPrefix(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	isHex := func(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && isHex(s[i+2]) {
		i += 2
		for i < len(s) && isHex(s[i]) {
			i++
		}
		return i
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

// parseCNumber parses what numberPrefix found.
func parseCNumber(s string) (float64, error) {
	sign, u := 1.0, s
	if u != "" && (u[0] == '+' || u[0] == '-') {
		if u[0] == '-' {
			sign = -1
		}
		u = u[1:]
	}
	if len(u) > 2 && (u[1] == 'x' || u[1] == 'X') {
		n, err := strconv.ParseUint(u[2:], 16, 64)
		return sign * float64(n), err
	}
	v, err := strconv.ParseFloat(u, 64)
	return sign * v, err
}

// FormatSize writes n as nccl-tests' flags take it: 8, 1K, 32M, 1G.
func FormatSize(n uint64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "G"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "M"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "K"
	}
	return strconv.FormatUint(n, 10)
}

// dataType is one of nccl-tests' types.
type dataType struct {
	name string // nccl-tests' name, as printed
	dt   nccl.DataType
}

// types lists nccl-tests' types in its order (-d all runs them in this
// order; fp8 only on GPUs of compute capability 9.0 and newer).
var types = []dataType{
	{"int8", nccl.Int8}, {"uint8", nccl.Uint8}, {"int32", nccl.Int32}, {"uint32", nccl.Uint32},
	{"int64", nccl.Int64}, {"uint64", nccl.Uint64}, {"half", nccl.Float16}, {"float", nccl.Float32},
	{"double", nccl.Float64}, {"bfloat16", nccl.BFloat16}, {"f8e4m3", nccl.Float8E4M3}, {"f8e5m2", nccl.Float8E5M2},
}

// TypeNames lists the data type names -d takes, besides "all".
func TypeNames() []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = t.name
	}
	return out
}

// redOp is one of nccl-tests' reductions.
type redOp struct {
	name   string
	op     nccl.RedOp
	mulsum bool // PreMulSum, created per call
}

// ops lists nccl-tests' reductions in its order.
var ops = []redOp{
	{"sum", nccl.Sum, false}, {"prod", nccl.Prod, false}, {"max", nccl.Max, false},
	{"min", nccl.Min, false}, {"avg", nccl.Avg, false}, {"mulsum", 0, true},
}

// OpNames lists the reduction names -o takes, besides "all".
func OpNames() []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.name
	}
	return out
}

func lookupType(name string) (dataType, bool) {
	for _, t := range types {
		if t.name == name {
			return t, true
		}
	}
	return dataType{}, false
}

func lookupOp(name string) (redOp, bool) {
	for _, o := range ops {
		if o.name == name {
			return o, true
		}
	}
	return redOp{}, false
}

// Validate checks the options on their own (the number of ranks is checked
// when the run starts).
func (o *Options) Validate() error {
	if _, ok := lookupTest(o.Test); !ok {
		return &OptionError{"TEST", o.Test, "unknown test; one of " + strings.Join(Tests(), ", ")}
	}
	bad := func(opt string, v any, reason string) error {
		return &OptionError{opt, fmt.Sprint(v), reason}
	}
	switch {
	case o.Threads < 0:
		return bad("-t", o.Threads, "negative")
	case o.GPUs < 1 && len(o.Devices) == 0:
		return bad("-g", o.GPUs, "need at least 1 GPU")
	case o.MinBytes > o.MaxBytes:
		return bad("-b", o.MinBytes, fmt.Sprintf("larger than maxbytes %d", o.MaxBytes))
	case o.StepFactor <= 1 && o.StepBytes == 0:
		return bad("-i", 0, "a step of 0 bytes never ends (use -f for a factor)")
	case o.Iters < 1:
		return bad("-n", o.Iters, "need at least 1 iteration")
	case o.Warmup < 0:
		return bad("-w", o.Warmup, "negative")
	case o.AggIters < 1:
		return bad("-m", o.AggIters, "need at least 1")
	case o.Cycles < 0:
		return bad("-N", o.Cycles, "negative")
	case o.Check < 0:
		return bad("-c", o.Check, "negative")
	case o.Blocking < 0 || o.Blocking > 3:
		return bad("-z", o.Blocking, "one of 0, 1, 2, 3")
	case o.Graph < 0:
		return bad("-G", o.Graph, "negative")
	case o.Average < 0 || o.Average > 3:
		return bad("-a", o.Average, "one of 0 (rank 0), 1 (mean), 2 (min), 3 (max)")
	case o.Root < -1:
		return bad("-r", o.Root, "a rank, or -1 (all)")
	case o.Timeout < 0:
		return bad("-T", o.Timeout, "negative")
	case o.Graph > 0 && o.StreamNull:
		return bad("-G", o.Graph, "the legacy default stream (-y 1) cannot be captured")
	case o.PerIterTiming && o.Graph > 0:
		return bad("-I", 1, "per-iteration timing cannot time CUDA graph replays (-G)")
	case o.PerIterSkip < 0 || (o.PerIterSkip > 0 && o.PerIterSkip >= o.Iters):
		return bad("-K", o.PerIterSkip, fmt.Sprintf("skip 0 to %d of the %d iterations", o.Iters-1, o.Iters))
	case o.PerIterSkip > 0 && !o.PerIterTiming:
		return bad("-K", o.PerIterSkip, "needs per-iteration timing (-I 1)")
	case o.Unaligned < 0:
		return bad("-u", o.Unaligned, "negative")
	case o.Register < 0 || o.Register > 2:
		return bad("-R", o.Register, "one of 0 (none), 1 (local), 2 (symmetric)")
	case o.AlltoallvSpread != nil && !(*o.AlltoallvSpread >= 0 && *o.AlltoallvSpread <= 1):
		return bad("NCCL_TESTS_ALLTOALLV_SPREAD", *o.AlltoallvSpread, "between 0 and 1")
	case o.CTAPolicy < 0:
		return bad("-x", o.CTAPolicy, "a CTA policy: 0 (NCCL's default), 1, 2 or 3")
	}
	if o.Type != "all" {
		if _, ok := lookupType(o.Type); !ok {
			return bad("-d", o.Type, "unknown type; one of "+strings.Join(TypeNames(), ", ")+" or all")
		}
	}
	if o.Op != "all" {
		if _, ok := lookupOp(o.Op); !ok {
			return bad("-o", o.Op, "unknown op; one of "+strings.Join(OpNames(), ", ")+" or all")
		}
	}
	for _, d := range o.Devices {
		if d < 0 {
			return bad("-devices", d, "negative device")
		}
	}
	return nil
}

// spread is AlltoallvSpread or its default.
func (o *Options) spread() float64 {
	if o.AlltoallvSpread == nil {
		return 1
	}
	return *o.AlltoallvSpread
}

// sizes is the sweep of the run: MinBytes, then by StepFactor or
// StepBytes up to MaxBytes.
func (o *Options) sizes() []uint64 {
	var out []uint64
	for size := o.MinBytes; size <= o.MaxBytes; {
		out = append(out, size)
		next := size + o.StepBytes
		if o.StepFactor > 1 {
			next = size * o.StepFactor
			if size == 0 {
				next = 1 // nccl-tests would loop forever on 0*factor
			}
		}
		if next <= size { // overflow
			break
		}
		size = next
	}
	return out
}

// warmupSizes are the sizes warmed up: MinBytes doubling up to MaxBytes.
func (o *Options) warmupSizes() []uint64 {
	var out []uint64
	size := o.MinBytes
	if size == 0 { // nccl-tests would loop forever doubling 0
		out = append(out, 0)
		size = 1
	}
	for ; size <= o.MaxBytes; size *= 2 {
		out = append(out, size)
		if size > math.MaxUint64/2 {
			break
		}
	}
	return out
}

package perf

import (
	"sort"
)

// counts are one size's element counts, as nccl-tests' getCollByteCount
// computes them: send and recv are the buffers' counts, param the count
// passed to NCCL, sendInPlace and recvInPlace the offsets (per rank) of the
// in-place send and recv buffers inside recv.
type counts struct {
	send, recv, param        uint64
	sendInPlace, recvInPlace uint64
}

// blockOf is nccl-tests' per-rank block: count/nranks rounded down to a
// multiple of 16 bytes.
func blockOf(count, elt uint64, n int) uint64 {
	return (count / uint64(n)) &^ (16/elt - 1)
}

// collective describes one test: how counts follow from a size, the bus
// bandwidth factor, and how it runs and what it leaves in each rank's
// output.
type collective struct {
	kind    collKind
	name    string // the TEST argument, e.g. "all_reduce"
	program string // nccl-tests' binary, e.g. "all_reduce_perf"
	// opName is the redop column of tests without a reduction ("none"; ""
	// for hypercube); empty when the test loops over reductions.
	opName    string
	usesOp    bool // the test sweeps -o (a reduction, or sendrecv's loop)
	reduces   bool // the op is a reduction applied to the data
	rooted    bool // the test sweeps -r
	pow2      bool // runs only on a power-of-two number of ranks
	noInCheck bool // in-place results are not checked (#wrong is N/A)
	counts    func(count, elt uint64, n int) counts
	// busFactor is busbw/algbw; algFactor is algbw*sec/(param*elt).
	algFactor func(n int) float64
	busFactor func(n int) float64
	// algBytes, when set, replaces param*elt*algFactor: the bytes algbw
	// counts (alltoallv: the most a rank sends or receives).
	algBytes func(param, elt uint64, n int) uint64
}

// collKind names a test for the engine's hot path (a switch on an
// integer, not on the name).
type collKind uint8

const (
	collAllReduce collKind = iota
	collAllGather
	collBroadcast
	collReduce
	collReduceScatter
	collAllToAll
	collGather
	collScatter
	collSendRecv
	collHypercube
	collAllToAllV
)

var collectives = map[string]*collective{
	"all_reduce": {
		kind: collAllReduce, name: "all_reduce", program: "all_reduce_perf", usesOp: true, reduces: true,
		counts:    func(c, e uint64, n int) counts { return counts{send: c, recv: c, param: c} },
		algFactor: func(n int) float64 { return 1 },
		busFactor: func(n int) float64 { return float64(2*(n-1)) / float64(n) },
	},
	"all_gather": {
		kind: collAllGather, name: "all_gather", program: "all_gather_perf", opName: "none",
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b, recv: b * uint64(n), param: b, sendInPlace: b}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
	},
	"broadcast": {
		kind: collBroadcast, name: "broadcast", program: "broadcast_perf", opName: "none", rooted: true,
		counts:    func(c, e uint64, n int) counts { return counts{send: c, recv: c, param: c} },
		algFactor: func(n int) float64 { return 1 },
		busFactor: func(n int) float64 { return 1 },
	},
	"reduce": {
		kind: collReduce, name: "reduce", program: "reduce_perf", usesOp: true, reduces: true, rooted: true,
		counts:    func(c, e uint64, n int) counts { return counts{send: c, recv: c, param: c} },
		algFactor: func(n int) float64 { return 1 },
		busFactor: func(n int) float64 { return 1 },
	},
	"reduce_scatter": {
		kind: collReduceScatter, name: "reduce_scatter", program: "reduce_scatter_perf", usesOp: true, reduces: true,
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b * uint64(n), recv: b, param: b, recvInPlace: b}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
	},
	"alltoall": {
		kind: collAllToAll, name: "alltoall", program: "alltoall_perf", opName: "none", noInCheck: true,
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b * uint64(n), recv: b * uint64(n), param: b}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
	},
	"gather": {
		kind: collGather, name: "gather", program: "gather_perf", opName: "none", rooted: true,
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b, recv: b * uint64(n), param: b, sendInPlace: b}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
	},
	"scatter": {
		kind: collScatter, name: "scatter", program: "scatter_perf", opName: "none", rooted: true,
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b * uint64(n), recv: b, param: b, recvInPlace: b}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
	},
	"sendrecv": {
		kind: collSendRecv, name: "sendrecv", program: "sendrecv_perf", usesOp: true, noInCheck: true,
		counts:    func(c, e uint64, n int) counts { return counts{send: c, recv: c, param: c} },
		algFactor: func(n int) float64 { return 1 },
		busFactor: func(n int) float64 { return 1 },
	},
	"alltoallv": {
		// nccl-tests' generated pattern at its default spread (1.0: more
		// to more distant ranks); Options.AlltoallvSpread sets another.
		kind: collAllToAllV, name: "alltoallv", program: "alltoallv_perf", opName: "none", noInCheck: true,
		counts: func(c, e uint64, n int) counts {
			p := blockOf(c, e, n)
			v := alltoallvCount(p, e, n, 1)
			return counts{send: v, recv: v, param: p}
		},
		algFactor: func(n int) float64 { return float64(n) },
		busFactor: func(n int) float64 { return float64(n-1) / float64(n) },
		algBytes:  func(p, e uint64, n int) uint64 { return alltoallvCount(p, e, n, 1) * e },
	},
	"hypercube": {
		kind: collHypercube, name: "hypercube", program: "hypercube_perf", opName: "", pow2: true,
		counts: func(c, e uint64, n int) counts {
			b := blockOf(c, e, n)
			return counts{send: b, recv: b * uint64(n), param: b, sendInPlace: b}
		},
		algFactor: func(n int) float64 { return float64(n - 1) },
		busFactor: func(n int) float64 { return 1 },
	},
}

// Tests lists the tests, sorted; "all" runs each in turn.
func Tests() []string {
	out := make([]string, 0, len(collectives))
	for k := range collectives {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lookupTest(name string) (*collective, bool) {
	c, ok := collectives[name]
	return c, ok
}

// Program is nccl-tests' binary for a test, e.g. "all_reduce_perf", or ""
// for an unknown test.
func Program(test string) string {
	if c, ok := collectives[test]; ok {
		return c.program
	}
	return ""
}

// Bandwidth is nccl-tests' getBw: the algorithm bandwidth (bytes the
// collective moves per rank, in GB/s of 1e9 bytes) and the bus bandwidth
// (algbw times the collective's factor, comparable across rank counts) of
// an operation on count elements (the count passed to NCCL) of elt bytes
// over nranks ranks that took sec seconds.
func Bandwidth(test string, count, elt uint64, sec float64, nranks int) (algbw, busbw float64, ok bool) {
	c, found := collectives[test]
	if !found || nranks < 1 {
		return 0, 0, false
	}
	alg := float64(count*elt) * c.algFactor(nranks) / 1.0e9 / sec
	if c.algBytes != nil {
		alg = float64(c.algBytes(count, elt, nranks)) / 1.0e9 / sec
	}
	return alg, alg * c.busFactor(nranks), true
}

// BusFactor is busbw/algbw for a test on nranks ranks (doc/PERFORMANCE.md
// of nccl-tests): 2(n-1)/n for all_reduce, (n-1)/n for all_gather,
// reduce_scatter, alltoall, gather and scatter, 1 for the others.
func BusFactor(test string, nranks int) (float64, bool) {
	c, ok := collectives[test]
	if !ok || nranks < 1 {
		return 0, false
	}
	return c.busFactor(nranks), true
}

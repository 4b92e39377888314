package perf

// PlannedRows is the number of result rows a run of o on nranks ranks
// prints: sizes × data types × reductions × roots × cycles, as the engine
// sweeps them. It is 0 when o.Cycles is 0 (the run has no end), when the
// test needs a power-of-two number of ranks and nranks is not one, and for
// an unknown test. fp8 says whether every GPU runs the fp8 types (compute
// capability 9.0 and newer), which -d all includes only then. A sweep over
// all types or reductions may skip pairs the loaded NCCL refuses, so the
// rows printed can be fewer.
func PlannedRows(o Options, nranks int, fp8 bool) int {
	coll, ok := lookupTest(o.Test)
	if !ok || o.Cycles == 0 || nranks < 1 || coll.pow2 && nranks&(nranks-1) != 0 {
		return 0
	}
	nTypes := 1
	if o.Type == "all" {
		nTypes = 0
		for _, t := range types {
			if !isFP8(t) || fp8 {
				nTypes++
			}
		}
	}
	nOps := 1
	if coll.usesOp && o.Op == "all" {
		nOps = len(ops)
	}
	nRoots := 1
	if coll.rooted && o.Root == -1 {
		nRoots = nranks
	}
	return len(o.sizes()) * nTypes * nOps * nRoots * o.Cycles
}

func isFP8(t dataType) bool { return t.name == "f8e4m3" || t.name == "f8e5m2" }

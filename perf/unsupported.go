package perf

// UnsupportedFeature is an nccl-tests 2.19.6 option or variable that this
// engine does not provide, and why.
type UnsupportedFeature struct {
	Flag   string // the short flag, e.g. "-D" ("" for a variable)
	Name   string // the long flag or the environment variable
	Reason string
}

// Unsupported lists nccl-tests 2.19.6's features this engine does not run,
// with the reason, for the command's help and the README. Every other
// option of nccl-tests' getopt list (and NCCL_TESTS_DEVICE,
// NCCL_TESTS_MIN_BW, NCCL_TESTS_SPLIT_MASK, NCCL_TESTS_SPLIT,
// NCCL_TESTS_ALLTOALLV_SPREAD) has an [Options] field or is read by
// [JobWorld].
var Unsupported = []UnsupportedFeature{
	{"-D", "--device_implementation", "times nccl-tests' own CUDA kernels over NCCL's device API; not done yet: nccl4go perf has no port of those kernels"},
	{"-V", "--device_cta_count", "the CTA count of -D's kernels (see -D)"},
	{"-p", "--parallel_init", "not done yet: the communicators of every thread (-t) are created together, in one group, before the threads start"},
	{"", "NCCL_TESTS_ALLTOALLV_MATRIX_FILE, NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "not done yet: alltoallv runs nccl-tests' generated pattern (NCCL_TESTS_ALLTOALLV_SPREAD), not a traffic matrix read from a file"},
	{"", "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY", "not done yet: the per-rank alltoallv bandwidth lines"},
}

// Package perf is the benchmark engine behind `nccl4go perf`: nccl-tests'
// collective tests (2.19.6) run through the binding, with nccl-tests'
// timing, bus bandwidth, result check, table and JSON, and what the
// command adds: plots, comparisons of saved runs and the analysis of
// per-iteration times.
//
// # Running
//
// [Run] runs one test (see [Tests]: all_reduce, all_gather, broadcast,
// reduce, reduce_scatter, alltoall, gather, scatter, sendrecv, hypercube,
// alltoallv) with [Options], whose fields, meanings and defaults
// ([DefaultOptions]) are nccl-tests' flags, over a [World]: the
// communicators of this process. [Unsupported] lists the nccl-tests
// features it does not run, with the reason. Beyond nccl-tests,
// [Options.Ceiling] measures each row's limit where it is known
// ([Row.Ceiling]: on one rank, a device memcpy of the same bytes), so that
// a result reads as a ratio to its limit. [LocalWorld] makes one communicator per listed GPU of this
// process (nccl-tests' -g); [JobWorld] joins the processes of a launcher's
// job, one rank each (mpirun, srun, torchrun, nccl4go run: see package
// rendezvous; NCCL_TESTS_SPLIT_MASK and NCCL_TESTS_SPLIT split it by
// colour, see [SplitColor]). [Options.CommConfig] is the communicator
// configuration a run wants (nccl-tests', and -x's CTA policy). Run returns a [Report] on every process; only process 0
// reports as it goes.
//
// # Reporting
//
// A [Reporter] receives the run as it happens: the [Header] before the
// first result, each [Row] as it is measured, the [Report] at the end.
// [TableWriter] prints nccl-tests' table byte for byte where the run is the
// same, [NewCSVWriter] one CSV line per row, and [JSONWriter] nccl-tests'
// JSON file (version 3), row by row, so that a run cut short (Ctrl-C, a
// cancelled context, -N 0) still leaves a valid file: [CreateJSON] opens it
// as nccl-tests does (a new file, else path.0, path.1...) before the run,
// and [JSONWriter.CloseWithError] closes whatever is open. [Reporters]
// combines several. [WriteJSON] writes a finished report at once.
// [PlannedRows] is how many rows a run will print (a progress bar's total).
//
// # Reading results
//
// [ReadJSON] and [ReadJSONFile] read a JSON file written by this package
// or by nccl-tests itself into a [Series]. [Compare] and [WriteComparison]
// set runs side by side, size by size, with the largest time ratio. [Plot]
// and [PlotFile] draw bandwidth and time against size: one line per data
// type, reduction and root of each series, algorithm bandwidth where the
// bus bandwidth factor is 0 (one rank), in a colour-blind-safe palette with
// the legend outside the data. [Analyze] and [AnalyzeFile] read the
// per-iteration times of nccl-tests' -I 1 (and this package's) and find
// stragglers across processes and nodes, spikes above a threshold and the
// weight of iteration 0, as nccl-tests' tools/analyze_perf_json.py does;
// [WriteAnalysis] says it in words.
//
// # Sizes and bandwidth
//
// [ParseSize] reads sizes as nccl-tests' parsesize does (8, 1K, 32M, 32MB,
// 1GiB: binary units, the unit's first letter counts); [FormatSize] writes
// them back. [Bandwidth] and [BusFactor] are nccl-tests' algorithm and bus
// bandwidth.
//
// # Threads
//
// Run locks its goroutine to an OS thread while it runs and calls its
// Reporter from that goroutine. A World, a Reporter and a JSONWriter are
// used by one run at a time.
package perf

// Code generated from the command table (commands.go) by `go test -run TestCommandDocs -update`; DO NOT EDIT.

// Command nccl4go inspects and exercises NVIDIA NCCL from Go.
//
// Usage:
//
//	nccl4go info [--json] [--params]
//	    show the NCCL library, CUDA driver and GPUs found (or what is missing), nccl4go's version and which gated NCCL features it uses with the library
//	nccl4go probe [--json] [--devices 0,1,...] [--timeout 60s]
//	    create a communicator over the GPUs and show each rank's capabilities
//	nccl4go perf TEST [flags]
//	    measure bandwidth and latency as nccl-tests does: same flags, same table
//	nccl4go perf compare A.json B.json... [flags]
//	    compare runs saved with -J (nccl4go's or nccl-tests'), size by size
//	nccl4go perf analyze FILE.json... [flags]
//	    stragglers, spikes and warm-up in per-iteration times (nccl-tests' -I 1 -J FILE)
//	nccl4go trace analyze [--json] DUMP|DIR...
//	    say where the ranks' dumps disagree, who is behind and what each rank did last
//	nccl4go trace export [--format torch] -o DIR [--prefix P] DUMP|DIR...
//	    convert the ranks' dumps for PyTorch's flight-recorder analyzer
//	nccl4go run [-n N] [flags] PROGRAM [ARGS...]
//	    start N ranks of a program on this machine, torchrun-style, and supervise them
//
// 'nccl4go help COMMAND' and 'nccl4go COMMAND -h' show a command's flags. Long flags
// take one dash or two (-json, --json), but for perf's and its subcommands', which are
// read as nccl-tests' getopt reads them (two dashes: --json; -b8, -b 8, --minbytes=8).
//
// # Environment
//
//   - NCCL_LIBRARY: the path of libnccl.so.2 (else the dynamic loader's search)
//   - NCCL4GO_CUDA_LIBRARY: the path of libcuda.so.1 (else the dynamic loader's search)
//
// # Exit status
//
//   - 0: success; help; info's diagnosis, also when NCCL, the driver or a GPU is missing
//   - 1: the command failed, and says why on stderr (probe without NCCL or a GPU, perf with wrong results, a dump that cannot be read)
//   - 2: a bad command line: one line says what is wrong, the next where to read the usage
//   - N: run: the status of the first rank that failed (128+N: killed by signal N; 127: the program cannot be started); 128+N when run itself was interrupted by signal N and every rank exited 0 (141: its stdout was closed)
package main

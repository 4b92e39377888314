// Package trace is nccl4go's flight recorder: a record of the recent
// operations of every communicator of a process, its JSON dump, and an
// analyzer that reads the dumps of all ranks of a job and says, in words,
// where they disagree.
//
// It imports nothing of package nccl, which records into [Default] on every
// call; programs use it to dump (on demand, on a signal, when another rank
// asks) and the nccl4go command (`nccl4go trace analyze`) to read the dumps.
//
// # Recording
//
// A communicator is registered once ([Recorder.RegisterComm], with its name,
// hash, rank, size and device) and gets a *[Comm]. Each operation is one call,
// Comm.Record([Event]), which copies a few integers into the communicator's
// ring: no lock, no atomic read-modify-write, no allocation, no string
// (calls of Record on one Comm must not overlap: the nccl package makes them
// under the communicator's lock). The sequence number it returns counts the
// communicator's collectives (1, 2, ...), so the same number on every rank
// names the same collective; point-to-point operations count apart, local
// ones ([Abort], [Destroy], ...) not at all. When the watchdog follows an
// operation ([Event.Watched]), [Comm.Start] and [Comm.Complete] (or CompleteIn
// with a duration measured on the GPU) record its progress.
//
// Each communicator has a ring of its own, NCCL4GO_TRACE_BUFFER entries
// (128 bytes each; unset: [DefaultEntries], 2048, on by default as PyTorch's
// recorder is; 0: recording off; [Recorder.SetSize] changes it), so a busy
// communicator never pushes a quiet one's history out. Recording costs about
// 5 ns per call (BenchmarkRecord, on a 2-core VM). Enqueue times come from a coarse clock, a
// word refreshed every millisecond while recording goes on
// (NCCL4GO_TRACE_CLOCK=mono reads the monotonic clock instead, 15-50 ns
// more: 23 ns in BenchmarkClock on a 2-core VM); so do start and completion times, which the watchdog learns by
// polling every few milliseconds anyway. Dumps give Unix nanoseconds.
//
// # Dumping
//
// [Recorder.Dump] writes JSON to a writer, [Recorder.DumpFile] into a file
// named nccl4go-trace-rank<R>-pid<P>-<ms>.json. [Recorder.DumpOnSignal]
// dumps on SIGUSR1 (kill -USR1 <pid>). Across a job, [Recorder.RequestDump]
// sets the key nccl4go/trace/dump-request in the job's store, and every rank
// running [Recorder.WatchDumpRequests] dumps once per request: a watchdog
// that times out on one rank dumps there and asks the others.
//
// # Dump format
//
// A dump is one JSON object, schema "nccl4go-trace", version 1. The version
// changes when a field changes meaning or a new name appears in an
// enumerated field; readers refuse versions they do not know. Fields:
//
//	schema          "nccl4go-trace"
//	version         1
//	reason          why the dump was taken: "signal user defined signal 1",
//	                "request <id> from rank <r>: <reason>", or what the caller said
//	host, pid       the process
//	rank            the process's rank in the job (Recorder.SetRank, else the
//	                launcher's RANK and friends, else its first communicator's); -1 unknown
//	time_ns         when the dump was taken, Unix nanoseconds
//	clock           "mono": the times below are Go's monotonic clock, converted to Unix
//	                time (read every millisecond with the default NCCL4GO_TRACE_CLOCK,
//	                at every call with NCCL4GO_TRACE_CLOCK=mono)
//	buffer_entries  entries each communicator's ring holds
//	recorded        operations recorded into the rings of the communicators listed, in all
//	note            a problem with the configuration (e.g. an unreadable NCCL4GO_TRACE_BUFFER)
//	comms           the registered communicators:
//	  id                  number the entries refer to (per process)
//	  name                label given at registration
//	  hash                "0x" + 16 hex digits; the same on every rank of the communicator
//	  rank, size          this process's rank in it, and its number of ranks
//	  device              CUDA device ordinal, -1 unknown
//	  closed              true once destroyed or aborted
//	  last_seq            collectives enqueued (the last collective's sequence number)
//	  last_p2p_seq        point-to-point operations enqueued
//	  last_started_seq    highest collective the watchdog saw start (0: none or not watched)
//	  last_completed_seq  highest collective the watchdog saw complete
//	entries         the operations the rings still hold, oldest first:
//	  id            the entry's place in its communicator's history (0, 1, ...)
//	  comm          id of its communicator in comms
//	  seq           sequence number: among collectives, or among p2p operations; 0 for local ones
//	  class         "collective", "p2p" or "local"
//	  op            "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
//	                "AllToAll", "Gather", "Scatter", "Send", "Recv", "Signal", "PutSignal",
//	                "WaitSignal", "Init", "Split", "Shrink", "Grow", "Finalize", "Revoke",
//	                "Abort", "Destroy"
//	  dtype         element type, for operations that move data: "int8", "uint8", "int32",
//	                "uint32", "int64", "uint64", "float16", "float32", "float64",
//	                "bfloat16", "float8e4m3", "float8e5m2"
//	  count         the NCCL call's count argument, in elements
//	  bytes         count times the element size
//	  redop         reduction operator: "sum", "prod", "max", "min", "avg", "custom(N)"
//	  root          root rank of Broadcast, Reduce, Gather, Scatter
//	  peer          peer rank of Send, Recv, Signal, PutSignal
//	  stream        CUDA stream handle, "0x..." hex
//	  group         group the call was made in (0: none)
//	  enqueued_ns   when the call was made, Unix nanoseconds
//	  watched       whether the watchdog followed it (state and times below)
//	  state         "enqueued", "started" or "completed" (watched entries only)
//	  started_ns    when the watchdog saw it start
//	  completed_ns  when the watchdog saw it complete
//	  duration_ns   how long it ran: measured on the GPU when the watchdog gave it,
//	                else from started_ns (or enqueued_ns) to completed_ns
//
// Fields that do not apply to an entry are left out.
//
// # PyTorch's format
//
// [ExportTorch] converts the dumps of a job into PyTorch's flight-recorder
// format (one pickle per rank, version [TorchVersion]), and [WriteTorchDir]
// writes them as PyTorch names its files (nccl_trace_rank_<R>), so that
// PyTorch's analyzer (python -m torch.distributed.flight_recorder.fr_trace)
// and the tools built on its format read Go ranks; `nccl4go trace export
// -format torch` does it from the command line.
//
// # Analysis
//
// [Analyze] groups the dumps' communicators by hash and aligns their
// collectives by sequence number. It reports the first collective some rank
// did not enqueue (and who is behind, and what that rank did instead), or
// enqueued with another operation, count, type, operator or root; with the
// watchdog on, the collective some ranks did not complete; sends without
// their receives; and ranks that left no dump.
package trace

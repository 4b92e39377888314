// Package nccl is the Go binding of NVIDIA NCCL, the library of collective
// communication between GPUs: all-reduce, broadcast, all-gather,
// point-to-point and the rest, over NVLink, PCIe, InfiniBand and sockets.
//
// It offers what NCCL's Python binding (nccl4py) offers through its
// [Communicator] — creation, identity, device-API capability properties,
// lifecycle, collectives, point-to-point, groups, registration and device
// communicators — with typed buffers, context cancellation and errors that
// say what went wrong. Building needs only a C compiler for cgo: libnccl.so.2
// and libcuda.so.1 are opened at run time.
//
// A minimal program, one rank per process:
//
//	id := ... // nccl.NewUniqueID() on rank 0, sent to the others
//	c, err := nccl.Init(nranks, rank, id, &nccl.Config{Device: nccl.Ptr(localRank)})
//	if err != nil { ... }
//	defer c.Destroy()
//	buf, _ := cuda.Alloc[float32](cuda.Device(localRank), 1<<20)
//	err = c.AllReduce(nccl.BufferOf(buf), nccl.BufferOf(buf), nccl.Sum, cuda.Stream{})
//
// # Versions
//
// The library is loaded on first use, or by [Load]: an explicit path, else
// $NCCL_LIBRARY, else libnccl.so.2 through the dynamic loader. Nothing is
// loaded at import time. Every function is resolved once; one the loaded
// NCCL lacks makes its calls return an *[UnsupportedError] (errors.Is
// [ErrUnsupported]) naming the C function, the first release that has it and
// the loaded release. Each method's documentation names its NCCL call and
// that first release; one older than [MinRelease] means every supported
// release has it. NCCL's versioned structs are stamped with
// min([ABIRelease], loaded release), or older where a newer layout of the
// struct is not established (the properties of a 2.32 library, device
// requirements), and [CollConfig] is sent in the loaded release's own
// layout; only the fields the declared version defines are read: a property
// the loaded NCCL does not report is an error, never a zero that looks real. Releases from 2.19.1 ([MinRelease]) load; the binding
// is tested on a GPU against NCCL 2.28.3, 2.28.9 and 2.30.7, and on any
// machine against fake libraries that follow each release's behaviour.
//
// # Lifetimes
//
// A Communicator lives from [Init] (or Initialize, Split, Shrink, Grow) until
// Destroy or Abort. The zero Communicator is the null communicator. Resources
// made from a communicator (registered buffers, windows, custom reduction
// operators, device communicators) are tracked by it and closed by Destroy and
// Abort; closing one twice is safe. A communicator that becomes unreachable
// while initialized is reported ([SetLeakHandler]), never destroyed behind your
// back: Destroy is collective.
//
// # Threads
//
// A Communicator is safe for concurrent use: its NCCL calls are serialized.
// Calls that bind to a device (init, memory allocation) make the device's
// CUDA context current inside the same C call, so goroutines may move between
// threads. NCCL's groups are per OS thread: [Group] locks the goroutine to
// its thread for the whole group (see its rules).
//
// # Groups
//
// [Group](fn) runs fn between ncclGroupStart and ncclGroupEnd: the operations
// fn issues, on one communicator or several, are fused and launched when the
// outermost group ends (needed to drive several ranks from one goroutine,
// and for a Send and Recv that must run together). [GroupStart] and [GroupEnd]
// are the same pair for callers that cannot use a function. [Group]'s
// documentation states the rules groups follow (threads, other goroutines,
// teardown, outputs pending until the end). [GroupSimulate] estimates a
// group's time without launching it.
//
// # Blocking and cancellation
//
// A communicator is blocking by default: each call returns once NCCL has
// done its host-side work, and collectives cost one C call. [Config.Blocking]
// false makes it non-blocking: the plain calls (Init, Split, Finalize, ...)
// return as soon as NCCL has started them (ncclInProgress), and the
// communicator's next call or Wait waits for them; their *Context variants
// return only once the work is done, on every kind of communicator;
// and every wait — for init, split, shrink, grow, finalize, window
// registration — polls NCCL's state with backoff, so the *Context variants
// can end it: when the context ends, the communicator is aborted and the
// error matches both ctx.Err() and [ErrInProgress]. A blocking communicator
// waits inside NCCL, where nothing can interrupt it safely (aborting a
// communicator while another thread is inside its init would free memory
// NCCL still uses); its *Context variants check the context before calling
// NCCL. So: to bound an init that may never see its peers, make the
// communicator non-blocking. NCCL runs each group of a non-blocking
// communicator's work on a thread of its own, which costs microseconds per
// collective: a job can init non-blocking and Split into a blocking
// communicator for its hot loop.
//
// # Errors
//
// NCCL failures are *[Error] (with NCCL's last error message in Detail);
// arguments the binding rejects before calling NCCL are *[ArgError]; operations
// on a null or destroyed communicator are *[StateError]. errors.Is works with
// the sentinels [ErrInvalidArgument], [ErrInvalidUsage], [ErrUnhandledCUDA],
// [ErrSystem], [ErrInternal], [ErrRemote], ErrInProgress, [ErrTimeout],
// [ErrNotInitialized], [ErrClosed], ErrUnsupported and [ErrLibraryNotFound]. No
// function panics on bad input.
package nccl

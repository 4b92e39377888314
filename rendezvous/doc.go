// Package rendezvous is how the ranks of a job find each other and agree on
// an NCCL communicator: it reads the launcher's environment ([FromEnv]), holds
// a key-value store the ranks share (a client and server of PyTorch's
// [TCPStore] protocol, a file store, an in-memory store), and creates a
// communicator in one call ([Init]).
//
// A program that runs unchanged under nccl4go run, torchrun, mpirun, srun or
// a Kubernetes operator:
//
//	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
//	defer cancel()
//	comm, job, err := rendezvous.Init(ctx, nil)
//	if err != nil { ... }
//	defer comm.Destroy()
//	// job.Rank, job.WorldSize, job.LocalRank ...
//
// # The job
//
// FromEnv reads, in this order, nccl4go's own variables (NCCL4GO_*), then
// torchrun's, then torch-style variables set by Kubernetes operators, then
// Open MPI's, MPICH's (Hydra), MVAPICH's, PMIx's, and last Slurm's, only
// inside a job step (mpirun inside an sbatch script passes the batch step's
// SLURM_PROCID=0 to every rank). [FromLookup] and [FromMap] read any other
// source. A missing or contradictory value is an *[EnvError] naming every
// variable read.
//
// # The store
//
// Where the ranks meet: under nccl4go run, the launcher's store
// (NCCL4GO_STORE_ADDR, with a per-job secret); under torchrun, torchrun's
// agent store at MASTER_ADDR:MASTER_PORT, under the key prefix torch's
// workers use (/worker/attempt_<restart>); otherwise (mpirun, srun,
// Kubernetes) rank 0 hosts a server at MASTER_ADDR:MASTER_PORT, requiring
// NCCL4GO_STORE_SECRET when it is set. A job of one rank needs none.
//
// The TCP store speaks torch 2.1's protocol and later (torch before 2.1 has
// no VALIDATE handshake: [Dial] returns [ErrOldTorch] at once against its
// server, and [Server] closes its clients with a log line naming it). Server
// bounds what clients can make it hold: see [ServerOptions]. A [FileStore]
// survives writes that fail part way and follows its file when it is
// replaced.
//
// # Communicators
//
// Init (or [Open], then [Session.Communicator] for several communicators):
// picks the GPU from the local rank (modulo the devices CUDA_VISIBLE_DEVICES
// shows), has rank 0 create the unique id and publish it, and all ranks
// create the communicator. Jobs of more than RanksPerRoot ranks (default
// 128) use NCCL's scalable init: one id per group of ranks, each created by
// the group's first rank. The check-in and id exchange are pure Go over a
// [Store]; only the last step calls NCCL.
//
// # Cancellation and failures
//
// Every wait is bounded by the context. The communicator is non-blocking
// unless Config.Blocking says otherwise, so that the context bounds NCCL's
// init too; Split it into a blocking communicator for a hot loop. When a
// rank never arrives, every rank that did returns before its deadline with
// a *[MissingError] naming the missing ranks ("ranks 3, 5 of 8 never checked
// in"), which matches context.DeadlineExceeded. When a rank fails, it
// writes its error to the store and the others stop waiting with a
// *[RankError] carrying it. Each Communicator call (and each session of a
// store that outlives it) uses fresh keys.
//
// # Concurrency
//
// Stores and sessions are safe for concurrent use. Collective calls
// (Communicator, Barrier, AllGather) must be made in the same order on
// every rank.
package rendezvous

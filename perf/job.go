package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/rendezvous"
)

// CommConfig is the communicator configuration nccl-tests uses for a test
// with the loaded NCCL: blocking, NVLink-centric scheduling from NCCL 2.28
// on, and at most two P2P peers for sendrecv from 2.30 on.
func CommConfig(test string) *nccl.Config {
	cfg := &nccl.Config{Blocking: nccl.Ptr(true)}
	r, err := nccl.Version()
	if err != nil {
		return cfg
	}
	if r >= 22803 {
		cfg.NVLinkCentricSched = nccl.Ptr(true)
	}
	if test == "sendrecv" && r >= 23003 {
		cfg.MaxP2PPeers = nccl.Ptr(2)
	}
	return cfg
}

// LocalWorld creates one communicator per device, all in this process (a
// group of ncclCommInitRankConfig, as nccl-tests -g N does), with cfg (nil:
// NCCL's defaults). A device may repeat where NCCL lets ranks share a GPU
// (NCCL 2.30.3 and NCCL_MULTI_RANK_GPU_ENABLE=1). Close destroys the
// communicators.
func LocalWorld(ctx context.Context, devices []int, cfg *nccl.Config) (*World, error) {
	comms, err := nccl.InitAllContext(ctx, devices, cfg)
	if err != nil {
		return nil, err
	}
	return &World{Comms: comms, NProcs: 1, owned: true}, nil
}

// LocalDevices are the devices of nccl-tests' -g n for the process at
// localRank on its node: NCCL_TESTS_DEVICE (when set) or localRank*n, then
// the next n-1.
func LocalDevices(n, localRank int) []int {
	first := localRank * n
	if v, err := strconv.Atoi(os.Getenv("NCCL_TESTS_DEVICE")); err == nil {
		first = v
	}
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

// JobWorld joins the job the launcher describes (rendezvous.FromEnv: nccl4go
// run, mpirun, srun, torchrun...), one rank per process, with cfg. device,
// when >= 0, is this rank's GPU; otherwise rendezvous picks it from the
// local rank. The processes coordinate on the host through the job's
// rendezvous store ([World.Host]), as nccl-tests does through MPI: its
// barriers and reductions make no NCCL call. Close destroys the
// communicator and leaves the store.
func JobWorld(ctx context.Context, job *rendezvous.Job, device int, cfg *nccl.Config) (*World, error) {
	opts := &rendezvous.Options{Job: job, Config: cfg, Name: "nccl4go-perf"}
	if device >= 0 {
		opts.Device = &device
	}
	s, err := rendezvous.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	comm, err := s.Communicator(ctx, nil)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &World{Comms: []*nccl.Communicator{comm}, Proc: s.Job.Rank, NProcs: s.Job.WorldSize, Host: s, owned: true, session: s}, nil
}

// CollapsedWorld reports why a job of one rank looks like it was meant to
// have several: a launcher's size variable above 1 that the rendezvous did
// not take (for example an MPI the environment reader does not know), so
// that each process would run alone. It returns "" when nothing says so.
func CollapsedWorld(job *rendezvous.Job) string {
	if job != nil && job.WorldSize > 1 {
		return ""
	}
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "WORLD_SIZE", "NCCL4GO_WORLD_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n > 1 {
			return fmt.Sprintf("%s=%d but this process runs as a job of one rank: every process will benchmark alone", v, n)
		}
	}
	return ""
}

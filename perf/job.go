package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/versions"
	"github.com/nccl4go/nccl/rendezvous"
)

// CommConfig is the communicator configuration nccl-tests uses for a test
// with the loaded NCCL: blocking, NVLink-centric scheduling where the
// loaded NCCL has [nccl.Config.NVLinkCentricSched], and at most two P2P
// peers for sendrecv where it has [nccl.Config.MaxP2PPeers].
func CommConfig(test string) *nccl.Config {
	cfg := &nccl.Config{Blocking: nccl.Ptr(true)}
	r, err := nccl.Version()
	if err != nil {
		return cfg
	}
	if versions.ConfigNVLinkCentricSched.In(int(r)) {
		cfg.NVLinkCentricSched = nccl.Ptr(true)
	}
	if test == "sendrecv" && versions.ConfigMaxP2PPeers.In(int(r)) {
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
	before := freeMemory(devices)
	comms, err := nccl.InitAllContext(ctx, devices, cfg)
	if err != nil {
		return nil, err
	}
	return &World{Comms: comms, NProcs: 1, owned: true, InitMemory: usedSince(devices, before)}, nil
}

// freeMemory is each device's free memory (0 where unknown).
func freeMemory(devices []int) []uint64 {
	out := make([]uint64, len(devices))
	for i, d := range devices {
		out[i], _, _ = cuda.Device(d).MemInfo()
	}
	return out
}

// usedSince is the most memory any device lost since before.
func usedSince(devices []int, before []uint64) int64 {
	var most int64
	for i, f := range freeMemory(devices) {
		if before[i] != 0 && f != 0 {
			most = max(most, int64(before[i])-int64(f))
		}
	}
	return most
}

// CommConfig is the communicator configuration of a run with these
// options: [CommConfig] of the test, with the CTA policy of -x
// (NCCL_CTA_POLICY flags; the binding refuses a policy the loaded NCCL
// lacks).
func (o *Options) CommConfig() *nccl.Config {
	cfg := CommConfig(o.Test)
	if o.CTAPolicy > 0 {
		cfg.CTAPolicy = nccl.Ptr(nccl.CTAPolicy(o.CTAPolicy))
	}
	return cfg
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

// JobWorld joins the job the launcher describes ([rendezvous.FromEnv]: nccl4go
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
	var devs []int
	if d, err := s.Device(); err == nil {
		devs = []int{d}
	}
	before := freeMemory(devs)
	comm, err := s.Communicator(ctx, nil)
	if err != nil {
		s.Close()
		return nil, err
	}
	w := &World{Comms: []*nccl.Communicator{comm}, Proc: s.Job.Rank, NProcs: s.Job.WorldSize, Host: s, owned: true, session: s,
		InitMemory: usedSince(devs, before)}
	color, split, err := SplitColor(s.Job.Rank, os.Getenv)
	if err != nil || !split {
		if err != nil {
			w.Close()
		}
		return w, err
	}
	// NCCL_TESTS_SPLIT_MASK / NCCL_TESTS_SPLIT: one communicator per
	// colour, every group benchmarked at once; the processes still meet on
	// the host as one job, as nccl-tests' MPI_COMM_WORLD barriers do.
	child, err := comm.Split(color, s.Job.Rank, nil)
	if err == nil {
		err = comm.Destroy()
		w.Comms[0] = child
	} else {
		w.Close()
		return nil, err
	}
	w.Group = color
	return w, err
}

// SplitColor is the colour nccl-tests gives process proc from
// NCCL_TESTS_SPLIT_MASK (hexadecimal: proc & mask) or NCCL_TESTS_SPLIT
// ("AND n" or "&n", "OR n" or "|n", "MOD n" or "%n", "DIV n" or "/n";
// case-insensitive, n decimal or 0x-hexadecimal), read through getenv;
// split is false when neither is set. Processes of one colour form one
// communicator ([JobWorld] splits the job's by it).
func SplitColor(proc int, getenv func(string) string) (color int, split bool, err error) {
	if v := getenv("NCCL_TESTS_SPLIT_MASK"); v != "" {
		m, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(v), "0x"), "0X"), 16, 63)
		if err != nil {
			return 0, false, &OptionError{"NCCL_TESTS_SPLIT_MASK", v, "not a hexadecimal mask"}
		}
		return proc & int(m), true, nil
	}
	v := strings.TrimSpace(getenv("NCCL_TESTS_SPLIT"))
	if v == "" {
		return 0, false, nil
	}
	for _, op := range []struct {
		names []string
		f     func(p, n int) int
	}{
		{[]string{"AND", "&"}, func(p, n int) int { return p & n }},
		{[]string{"OR", "|"}, func(p, n int) int { return p | n }},
		{[]string{"MOD", "%"}, func(p, n int) int { return p % n }},
		{[]string{"DIV", "/"}, func(p, n int) int { return p / n }},
	} {
		for _, name := range op.names {
			if len(v) < len(name) || !strings.EqualFold(v[:len(name)], name) {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v[len(name):]), 0, 32)
			if err != nil || (n == 0 && (name == "MOD" || name == "%" || name == "DIV" || name == "/")) {
				return 0, false, &OptionError{"NCCL_TESTS_SPLIT", v, "want AND, OR, MOD or DIV (or &, |, %, /) and a number (not 0 for MOD and DIV)"}
			}
			return op.f(proc, int(n)), true, nil
		}
	}
	return 0, false, &OptionError{"NCCL_TESTS_SPLIT", v, "want AND, OR, MOD or DIV (or &, |, %, /) and a number"}
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

package rendezvous

import (
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Launcher names what started the job, as [FromEnv] found it.
type Launcher string

// The launchers [FromEnv] recognizes.
const (
	// LauncherNone: no launcher variables; the process is a job of one rank.
	LauncherNone Launcher = "none"
	// LauncherNCCL4Go: nccl4go run, or NCCL4GO_RANK and NCCL4GO_WORLD_SIZE set by hand.
	LauncherNCCL4Go Launcher = "nccl4go"
	// LauncherTorchrun: torchrun (torch elastic); its agent hosts the store.
	LauncherTorchrun Launcher = "torchrun"
	// LauncherTorchEnv: torch-style RANK and WORLD_SIZE without torch elastic,
	// as Kubernetes operators (Kubeflow PyTorchJob, JobSet manifests) set them.
	LauncherTorchEnv Launcher = "torch-env"
	// LauncherOpenMPI: Open MPI's mpirun (OMPI_COMM_WORLD_*).
	LauncherOpenMPI Launcher = "openmpi"
	// LauncherMPICH: MPICH's or Intel MPI's Hydra mpiexec (PMI_RANK, PMI_SIZE).
	LauncherMPICH Launcher = "mpich"
	// LauncherMVAPICH: MVAPICH's mpirun_rsh (MV2_COMM_WORLD_*).
	LauncherMVAPICH Launcher = "mvapich"
	// LauncherPMIx: a PMIx launcher (PMIX_RANK), with the size from Slurm or
	// NCCL4GO_WORLD_SIZE.
	LauncherPMIx Launcher = "pmix"
	// LauncherSlurm: a Slurm job step (srun).
	LauncherSlurm Launcher = "slurm"
)

// Environment variables of nccl4go. They take precedence over every
// launcher's: each one set replaces the value [FromEnv] found elsewhere.
const (
	EnvRank           = "NCCL4GO_RANK"
	EnvWorldSize      = "NCCL4GO_WORLD_SIZE"
	EnvLocalRank      = "NCCL4GO_LOCAL_RANK"
	EnvLocalWorldSize = "NCCL4GO_LOCAL_WORLD_SIZE"
	EnvNodeRank       = "NCCL4GO_NODE_RANK"
	EnvNumNodes       = "NCCL4GO_NNODES"
	EnvMasterAddr     = "NCCL4GO_MASTER_ADDR"
	EnvMasterPort     = "NCCL4GO_MASTER_PORT"
	// EnvStoreAddr is the host:port of a store some process already hosts
	// (nccl4go run's); no rank then hosts one.
	EnvStoreAddr = "NCCL4GO_STORE_ADDR"
	// EnvStoreSecret is the store's shared secret. A rank that hosts the
	// store requires it from clients; a client presents it.
	EnvStoreSecret = "NCCL4GO_STORE_SECRET"
	// EnvStorePrefix is a prefix for every key of the job in the store.
	EnvStorePrefix = "NCCL4GO_STORE_PREFIX"
	// EnvJobID names the job (the default port and the store's keys derive
	// from it where the launcher gives no port).
	EnvJobID = "NCCL4GO_JOB_ID"
)

// DefaultMasterPort is the store's port when neither the launcher nor
// MASTER_PORT gives one and there is no job id to derive one from (torch's
// default).
const DefaultMasterPort = 29500

// Job is one process's place in a job, as the launcher describes it.
type Job struct {
	// Launcher is what set the variables [FromEnv] read.
	Launcher Launcher
	// Rank is this process's rank, 0 to WorldSize-1.
	Rank int
	// WorldSize is the number of processes (ranks) of the job.
	WorldSize int
	// LocalRank is the rank among the processes on this node, 0 to
	// LocalWorldSize-1; [Init] picks the GPU from it.
	LocalRank int
	// LocalWorldSize is the number of processes on this node.
	LocalWorldSize int
	// NodeRank is this node's index, 0 to NumNodes-1 (-1: unknown).
	NodeRank int
	// NumNodes is the number of nodes (0: unknown).
	NumNodes int
	// MasterAddr and MasterPort are where rank 0 hosts the store (or where
	// torchrun's agent hosts it).
	MasterAddr string
	MasterPort int
	// StoreAddr is the host:port of a store hosted for the job by someone
	// else (nccl4go run, torchrun's agent); empty when rank 0 hosts it at
	// MasterAddr:MasterPort.
	StoreAddr string
	// StoreSecret is the store's shared secret (NCCL4GO_STORE_SECRET);
	// String never shows it.
	StoreSecret string
	// StorePrefix prefixes the job's keys in the store: torchrun's workers
	// share its agent's store under "/worker/attempt_<restart count>".
	StorePrefix string
	// JobID identifies the job where the launcher says (Slurm job and step,
	// MPI namespace, torch elastic run id); it may be empty.
	JobID string
	// RestartCount is TORCHELASTIC_RESTART_COUNT: how many times torchrun
	// restarted the workers.
	RestartCount int
	// ErrorFile is TORCHELASTIC_ERROR_FILE: where torchrun wants a failed
	// worker's error (JSON); empty when not under torchrun.
	ErrorFile string
	// Vars are the variables read, with their values (secrets masked), in
	// the order read.
	Vars []Var
}

// Var is an environment variable and its value.
type Var struct{ Name, Value string }

// String describes the job on one line, without the secret.
func (j *Job) String() string {
	s := fmt.Sprintf("%s: rank %d of %d, local rank %d of %d", j.Launcher, j.Rank, j.WorldSize, j.LocalRank, j.LocalWorldSize)
	if j.NodeRank >= 0 {
		s += fmt.Sprintf(", node %d", j.NodeRank)
		if j.NumNodes > 0 {
			s += fmt.Sprintf(" of %d", j.NumNodes)
		}
	}
	switch {
	case j.StoreAddr != "":
		s += ", store " + j.StoreAddr
	case j.WorldSize > 1:
		s += ", rank 0 hosts the store at " + net.JoinHostPort(j.MasterAddr, strconv.Itoa(j.MasterPort))
	}
	if j.StorePrefix != "" {
		s += " prefix " + j.StorePrefix
	}
	return s
}

// MaxWorldSize is the largest world size [FromEnv] accepts: 2^20 ranks, far
// above any job NCCL has run, and small enough that a per-rank table of
// the job ([Session.AllGather]'s) cannot exhaust memory by itself. A larger
// value is an *[EnvError].
const MaxWorldSize = 1 << 20

// EnvError is a job environment [FromEnv] cannot use: a value missing, out of
// range or contradicting another. It names the variables read and their
// values.
type EnvError struct {
	Launcher Launcher
	Problem  string
	Vars     []Var
}

// Error implements error.
func (e *EnvError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rendezvous: %s environment: %s", e.Launcher, e.Problem)
	if len(e.Vars) > 0 {
		b.WriteString(" (read")
		for i, v := range e.Vars {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s=%q", v.Name, v.Value)
		}
		b.WriteString(")")
	}
	return b.String()
}

// FromEnv returns the job as the process's launcher describes it in the
// environment. See [FromLookup] for the variables and their precedence.
func FromEnv() (*Job, error) {
	return fromLookup(os.LookupEnv, os.Getppid())
}

// FromMap is [FromLookup] over a map, for tests and for environments a
// program builds.
func FromMap(env map[string]string) (*Job, error) {
	return FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

// FromLookup returns the job described by the variables lookup returns
// (os.LookupEnv's signature). The first launcher whose variables are present
// sets the job, in this order:
//
//  1. nccl4go: NCCL4GO_RANK and NCCL4GO_WORLD_SIZE;
//  2. torchrun: RANK and WORLD_SIZE with TORCHELASTIC_RUN_ID or
//     TORCHELASTIC_RESTART_COUNT; LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK
//     (the node), MASTER_ADDR, MASTER_PORT, TORCHELASTIC_ERROR_FILE; with
//     TORCHELASTIC_USE_AGENT_STORE=True the agent's store at
//     MASTER_ADDR:MASTER_PORT, under the key prefix /worker/attempt_<restart>;
//  3. torch-style variables without torch elastic (Kubernetes operators):
//     RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK or
//     NODE_RANK, MASTER_ADDR, MASTER_PORT;
//  4. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//     (not _NODE_RANK, which is a rank among the node's processes, not the
//     node's index);
//  5. MPICH and Intel MPI (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
//     MPI_LOCALNRANKS;
//  6. MVAPICH: MV2_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
//  7. PMIx: PMIX_RANK, with the size from a Slurm step (srun --mpi=pmix);
//  8. Slurm, only inside a job step (SLURM_STEP_ID or SLURM_STEP_NODELIST
//     set), since mpirun inside an sbatch script passes the batch step's
//     SLURM_PROCID=0 to every rank: SLURM_PROCID, SLURM_NTASKS,
//     SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE,
//     SLURM_STEP_NODELIST (the master is its first host).
//
// Without any, the process is a job of one rank. Then each NCCL4GO_*
// variable that is set replaces the value found (NCCL4GO_LOCAL_RANK,
// NCCL4GO_MASTER_ADDR, NCCL4GO_STORE_ADDR, ...). The MPI launchers and Slurm
// give no master address: FromLookup takes MASTER_ADDR and MASTER_PORT when
// set (mpirun -x MASTER_ADDR), else 127.0.0.1 when every rank is on one node,
// else the first host of SLURM_JOB_NODELIST (mpirun inside sbatch, where the
// first node runs rank 0); without a port, the port derives from the job id
// (10000 + a hash of it modulo 20000), else is [DefaultMasterPort].
//
// Kubeflow's PyTorchJob with nprocPerNode > 1 sets RANK to the pod's index
// while WORLD_SIZE counts processes (pods × nprocPerNode), for torchrun to
// start inside each pod (PET_NPROC_PER_NODE, PET_NNODES, PET_NODE_RANK).
// A program started directly there sees a RANK that is not its rank:
// FromLookup reports that as an error saying to start the program with
// torchrun or nccl4go run.
//
// Without local variables, the local rank is the rank when every rank is on
// one node (MASTER_ADDR is a loopback address, or only one node), else 0 of
// 1 (one process per pod or container).
//
// A missing or contradictory value is an *[EnvError] naming the variables read.
func FromLookup(lookup func(string) (string, bool)) (*Job, error) {
	return fromLookup(lookup, 0)
}

// reader reads variables and remembers what it read.
type reader struct {
	lookup func(string) (string, bool)
	vars   []Var
	seen   map[string]bool
	l      Launcher
}

func (r *reader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	if ok {
		v = strings.TrimSpace(v)
	}
	if ok && !r.seen[name] {
		if r.seen == nil {
			r.seen = make(map[string]bool)
		}
		r.seen[name] = true
		shown := v
		if name == EnvStoreSecret && v != "" {
			shown = "(secret)"
		}
		r.vars = append(r.vars, Var{name, shown})
	}
	return v, ok && v != ""
}

// has reports whether name is set and not empty, without recording it.
func (r *reader) has(name string) bool {
	v, ok := r.lookup(name)
	return ok && strings.TrimSpace(v) != ""
}

func (r *reader) fail(format string, args ...any) error {
	return &EnvError{Launcher: r.l, Problem: fmt.Sprintf(format, args...), Vars: append([]Var(nil), r.vars...)}
}

// int reads a non-negative integer; ok is false when the variable is unset.
func (r *reader) int(name string) (n int, ok bool, err error) {
	v, ok := r.get(name)
	if !ok {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, true, r.fail("%s=%q is not a non-negative integer", name, v)
	}
	return n, true, nil
}

// first reads the first of names that is set.
func (r *reader) firstInt(names ...string) (n int, name string, err error) {
	for _, nm := range names {
		v, ok, err := r.int(nm)
		if err != nil || ok {
			return v, nm, err
		}
	}
	return 0, "", nil
}

func (r *reader) firstString(names ...string) string {
	for _, nm := range names {
		if v, ok := r.get(nm); ok {
			return v
		}
	}
	return ""
}

// fields of a job as a launcher gives them; "" names mean absent.
type found struct {
	rank, size, localRank, localSize, node, nodes int
	sizeName, localRankName, localSizeName        string
	rankName                                      string
	nodeName, nodesName                           string
	addr                                          string
	port                                          int
	jobID                                         string
}

func fromLookup(lookup func(string) (string, bool), ppid int) (*Job, error) {
	r := &reader{lookup: lookup}
	j := &Job{NodeRank: -1}
	var f found
	var err error
	switch {
	case r.has(EnvRank) || r.has(EnvWorldSize):
		j.Launcher = LauncherNCCL4Go
	case r.has("RANK") && (r.has("TORCHELASTIC_RUN_ID") || r.has("TORCHELASTIC_RESTART_COUNT")):
		j.Launcher = LauncherTorchrun
	case r.has("RANK") || r.has("WORLD_SIZE"):
		j.Launcher = LauncherTorchEnv
	case r.has("OMPI_COMM_WORLD_RANK"):
		j.Launcher = LauncherOpenMPI
	case r.has("PMI_RANK"):
		j.Launcher = LauncherMPICH
	case r.has("MV2_COMM_WORLD_RANK"):
		j.Launcher = LauncherMVAPICH
	case r.has("PMIX_RANK"):
		j.Launcher = LauncherPMIx
	case r.has("SLURM_PROCID") && (r.has("SLURM_STEP_ID") || r.has("SLURM_STEPID") || r.has("SLURM_STEP_NODELIST")):
		j.Launcher = LauncherSlurm
	default:
		j.Launcher = LauncherNone
	}
	r.l = j.Launcher
	switch j.Launcher {
	case LauncherNone:
		f = found{size: 1, localSize: 1, node: 0, nodes: 1, sizeName: "(none)", localRankName: "(none)", localSizeName: "(none)", nodeName: "(none)"}
	case LauncherNCCL4Go:
		f, err = r.triple(EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvNodeRank, EnvNumNodes)
		f.addr, f.port = r.firstString(EnvMasterAddr, "MASTER_ADDR"), 0
		f.jobID = r.firstString(EnvJobID)
	case LauncherTorchrun, LauncherTorchEnv:
		f, err = r.torch(j)
	case LauncherOpenMPI:
		f, err = r.triple("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
			"OMPI_COMM_WORLD_LOCAL_SIZE", "", "")
		f.jobID = r.firstString("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid")
	case LauncherMPICH:
		f, err = r.triple("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "", "")
		f.jobID = r.firstString("PMI_JOBID")
	case LauncherMVAPICH:
		f, err = r.triple("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
			"MV2_COMM_WORLD_LOCAL_SIZE", "", "")
		f.jobID = r.firstString("MPIRUN_ID")
	case LauncherPMIx:
		f, err = r.pmix()
	case LauncherSlurm:
		f, err = r.slurm()
	}
	if err != nil {
		return nil, err
	}
	if j.Launcher == LauncherNone && (r.petInt("PET_NNODES") > 1 || r.petInt("PET_NPROC_PER_NODE") > 1) {
		r.get("PET_NODE_RANK")
		r.get("PET_MASTER_ADDR")
		return nil, r.fail("Kubeflow's torch variables (PET_*) describe a job of several processes for torchrun to " +
			"start, but the program was started directly: start it with `torchrun --no-python ...` or " +
			"`nccl4go run --nnodes $PET_NNODES --node-rank $PET_NODE_RANK -n $PET_NPROC_PER_NODE " +
			"--master-addr $PET_MASTER_ADDR --master-port $PET_MASTER_PORT PROGRAM`")
	}
	if err := r.overrides(&f); err != nil {
		return nil, err
	}
	if err := r.complete(j, &f, ppid); err != nil {
		return nil, err
	}
	j.Vars = r.vars
	return j, nil
}

// triple reads rank, size, local rank, local size, node rank and node count
// from the named variables ("" for none the launcher sets). Rank and size
// are required.
func (r *reader) triple(rank, size, localRank, localSize, node, nodes string) (f found, err error) {
	f.rankName, f.sizeName = rank, size
	var ok bool
	if f.rank, ok, err = r.int(rank); err != nil {
		return f, err
	} else if !ok {
		r.get(size)
		return f, r.fail("%s is not set", rank)
	}
	if f.size, ok, err = r.int(size); err != nil {
		return f, err
	} else if !ok {
		return f, r.fail("%s is set but %s is not", rank, size)
	}
	f.localRank, f.localSize, f.node, f.nodes = -1, -1, -1, 0
	err = r.setInts([]intVar{
		{localRank, &f.localRank, &f.localRankName},
		{localSize, &f.localSize, &f.localSizeName},
		{node, &f.node, &f.nodeName},
		{nodes, &f.nodes, &f.nodesName},
	})
	return f, err
}

// torch reads torchrun's or a Kubernetes operator's variables.
func (r *reader) torch(j *Job) (found, error) {
	f, err := r.triple("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE")
	if err != nil {
		return f, err
	}
	if f.node < 0 {
		if v, ok, err := r.int("NODE_RANK"); err != nil {
			return f, err
		} else if ok {
			f.node, f.nodeName = v, "NODE_RANK"
		}
	}
	f.addr = r.firstString("MASTER_ADDR")
	if p, name, err := r.firstInt("MASTER_PORT"); err != nil {
		return f, err
	} else if name != "" {
		f.port = p
	}
	if j.Launcher == LauncherTorchrun {
		j.RestartCount, _, err = r.int("TORCHELASTIC_RESTART_COUNT")
		if err != nil {
			return f, err
		}
		j.ErrorFile, _ = r.get("TORCHELASTIC_ERROR_FILE")
		f.jobID = r.firstString("TORCHELASTIC_RUN_ID")
		if v, _ := r.get("TORCHELASTIC_USE_AGENT_STORE"); strings.EqualFold(v, "true") || v == "1" {
			if f.addr == "" || f.port == 0 {
				return f, r.fail("TORCHELASTIC_USE_AGENT_STORE is set but MASTER_ADDR or MASTER_PORT is not")
			}
			j.StoreAddr = net.JoinHostPort(f.addr, strconv.Itoa(f.port))
			j.StorePrefix = "/worker/attempt_" + strconv.Itoa(j.RestartCount)
		}
		return f, nil
	}
	// Kubeflow's PyTorchJob: RANK is the pod's index, WORLD_SIZE counts
	// processes, and torchrun is expected to start them.
	if n := r.petInt("PET_NPROC_PER_NODE"); n > 1 && f.localRank < 0 {
		r.get("PET_NNODES")
		r.get("PET_NODE_RANK")
		return f, r.fail("a Kubeflow PyTorchJob with nprocPerNode=%d sets RANK to the pod's index and WORLD_SIZE to the "+
			"number of processes (pods x %d), for torchrun to start %d processes in each pod: start the program with "+
			"`torchrun --nnodes=$PET_NNODES --node-rank=$PET_NODE_RANK --nproc-per-node=$PET_NPROC_PER_NODE "+
			"--master-addr=$PET_MASTER_ADDR --master-port=$PET_MASTER_PORT --no-python PROGRAM`, "+
			"or the same flags of `nccl4go run` (-n for --nproc-per-node)", n, n, n)
	}
	return f, nil
}

// petInt reads one of Kubeflow's PET_* counts; a value that is not a
// number ("auto", "gpu") counts as unknown (0).
func (r *reader) petInt(name string) int {
	v, ok := r.get(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// pmix reads PMIX_RANK; PMIx puts no size in the environment, so the size
// comes from a Slurm step (srun --mpi=pmix) or NCCL4GO_WORLD_SIZE.
func (r *reader) pmix() (found, error) {
	f := found{localRank: -1, localSize: -1, node: -1, rankName: "PMIX_RANK"}
	var ok bool
	var err error
	if f.rank, ok, err = r.int("PMIX_RANK"); err != nil || !ok {
		return f, err
	}
	f.jobID = r.firstString("PMIX_NAMESPACE")
	if r.has("SLURM_PROCID") && (r.has("SLURM_STEP_ID") || r.has("SLURM_STEP_NODELIST")) {
		s, err := r.slurm()
		if err != nil {
			return f, err
		}
		if s.rank != f.rank {
			return f, r.fail("PMIX_RANK=%d but SLURM_PROCID=%d", f.rank, s.rank)
		}
		s.rankName = "PMIX_RANK"
		return s, nil
	}
	if r.has(EnvWorldSize) {
		f.sizeName = EnvWorldSize // read by overrides
		return f, nil
	}
	return f, r.fail("PMIX_RANK is set but PMIx gives no world size in the environment: set %s", EnvWorldSize)
}

// slurm reads a Slurm job step's variables.
func (r *reader) slurm() (found, error) {
	f := found{localRank: -1, localSize: -1, node: -1, rankName: "SLURM_PROCID"}
	var ok bool
	var err error
	if f.rank, ok, err = r.int("SLURM_PROCID"); err != nil {
		return f, err
	} else if !ok {
		return f, r.fail("SLURM_PROCID is not set")
	}
	if f.size, f.sizeName, err = r.firstInt("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"); err != nil {
		return f, err
	} else if f.sizeName == "" {
		return f, r.fail("SLURM_PROCID is set but none of SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS")
	}
	if v, name, err := r.firstInt("SLURM_LOCALID"); err != nil {
		return f, err
	} else if name != "" {
		f.localRank, f.localRankName = v, name
	}
	if v, name, err := r.firstInt("SLURM_NODEID"); err != nil {
		return f, err
	} else if name != "" {
		f.node, f.nodeName = v, name
	}
	if f.nodes, f.nodesName, err = r.firstInt("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"); err != nil {
		return f, err
	}
	if tpn, ok := r.get("SLURM_STEP_TASKS_PER_NODE"); ok && f.node >= 0 {
		n, err := tasksOnNode(tpn, f.node)
		if err != nil {
			return f, r.fail("SLURM_STEP_TASKS_PER_NODE=%q: %v", tpn, err)
		}
		f.localSize, f.localSizeName = n, "SLURM_STEP_TASKS_PER_NODE"
	}
	if list := r.firstString("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"); list != "" {
		host, err := firstHost(list)
		if err != nil {
			return f, r.fail("%v", err)
		}
		f.addr = host
	}
	if a := r.firstString("MASTER_ADDR"); a != "" {
		f.addr = a
	}
	if p, name, err := r.firstInt("MASTER_PORT"); err != nil {
		return f, err
	} else if name != "" {
		f.port = p
	}
	if id := r.firstString("SLURM_JOB_ID", "SLURM_JOBID"); id != "" {
		f.jobID = id + "." + r.firstString("SLURM_STEP_ID", "SLURM_STEPID")
	}
	return f, nil
}

// intVar is an integer variable to read into a field of found: name (""
// for one the launcher does not set), the field, and where to note the
// variable's name (nil: nowhere).
type intVar struct {
	name      string
	v         *int
	foundName *string
}

// setInts sets each variable's field from the variables that are set.
func (r *reader) setInts(vars []intVar) error {
	for _, o := range vars {
		if o.name == "" {
			continue
		}
		v, ok, err := r.int(o.name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		*o.v = v
		if o.foundName != nil {
			*o.foundName = o.name
		}
	}
	return nil
}

// overrides applies the NCCL4GO_* variables that are set.
func (r *reader) overrides(f *found) error {
	if err := r.setInts([]intVar{
		{EnvRank, &f.rank, &f.rankName},
		{EnvWorldSize, &f.size, &f.sizeName},
		{EnvLocalRank, &f.localRank, &f.localRankName},
		{EnvLocalWorldSize, &f.localSize, &f.localSizeName},
		{EnvNodeRank, &f.node, &f.nodeName},
		{EnvNumNodes, &f.nodes, &f.nodesName},
		{EnvMasterPort, &f.port, nil},
	}); err != nil {
		return err
	}
	if v, ok := r.get(EnvMasterAddr); ok {
		f.addr = v
	}
	if v, ok := r.get(EnvJobID); ok {
		f.jobID = v
	}
	return nil
}

// complete checks the values found, fills in the defaults and the store.
func (r *reader) complete(j *Job, f *found, ppid int) error {
	if f.sizeName == "" {
		return r.fail("no world size is set")
	}
	if f.size < 1 {
		return r.fail("world size %s=%d is not positive", f.sizeName, f.size)
	}
	if f.size > MaxWorldSize {
		return r.fail("world size %s=%d is above %d, the most ranks this package runs", f.sizeName, f.size, MaxWorldSize)
	}
	if f.rank >= f.size {
		return r.fail("rank %d (%s) is not below the world size %d (%s)", f.rank, f.rankName, f.size, f.sizeName)
	}
	// Master address and port (not needed by a job of one rank).
	if f.addr == "" && j.Launcher != LauncherTorchrun && j.Launcher != LauncherTorchEnv {
		f.addr = r.firstString("MASTER_ADDR")
	}
	if f.port == 0 {
		if p, name, err := r.firstInt("MASTER_PORT"); err != nil {
			return err
		} else if name != "" {
			f.port = p
		}
	}
	oneNode := f.nodes == 1 || (f.localSize > 0 && f.localSize == f.size) || isLoopback(f.addr)
	if f.localRank < 0 && f.localSize < 0 {
		if oneNode || f.size == 1 {
			f.localRank, f.localSize = f.rank, f.size
		} else {
			f.localRank, f.localSize = 0, 1
		}
	}
	switch {
	case f.localRank >= 0 && f.localSize < 0:
		return r.fail("a local rank is set (%s=%d) but no local world size", f.localRankName, f.localRank)
	case f.localRank < 0 && f.localSize >= 0:
		return r.fail("a local world size is set (%s=%d) but no local rank", f.localSizeName, f.localSize)
	case f.localSize < 1:
		return r.fail("local world size %s=%d is not positive", f.localSizeName, f.localSize)
	case f.localRank >= f.localSize:
		return r.fail("local rank %d (%s) is not below the local world size %d (%s)", f.localRank, f.localRankName,
			f.localSize, f.localSizeName)
	case f.localSize > f.size:
		return r.fail("local world size %d (%s) exceeds the world size %d (%s)", f.localSize, f.localSizeName, f.size, f.sizeName)
	case f.nodes > 0 && f.node >= f.nodes:
		return r.fail("node rank %d (%s) is not below the number of nodes %d (%s)", f.node, f.nodeName, f.nodes, f.nodesName)
	case f.nodes > f.size:
		return r.fail("%d nodes (%s) for %d ranks (%s)", f.nodes, f.nodesName, f.size, f.sizeName)
	}
	if f.node < 0 && (oneNode || f.size == 1) {
		f.node = 0
	}
	if f.nodes == 0 && (oneNode || f.size == 1) {
		f.nodes = 1
		if f.node >= 1 {
			// A node rank set beside a count found only now ("one node").
			return r.fail("node rank %d (%s) is not below the number of nodes, 1 (all %d ranks are on one node)",
				f.node, f.nodeName, f.size)
		}
	}
	j.Rank, j.WorldSize, j.LocalRank, j.LocalWorldSize = f.rank, f.size, f.localRank, f.localSize
	j.NodeRank, j.NumNodes = f.node, f.nodes
	j.JobID = f.jobID
	mpi := j.Launcher == LauncherOpenMPI || j.Launcher == LauncherMPICH || j.Launcher == LauncherMVAPICH || j.Launcher == LauncherPMIx
	if j.JobID == "" && ppid > 1 && oneNode && mpi {
		// Ranks on one node share their launcher's process (mpirun, the
		// MPI daemon): its id tells this job from another one.
		j.JobID = "ppid-" + strconv.Itoa(ppid)
	}
	if v, ok := r.get(EnvStoreAddr); ok {
		if err := addrProblem(v); err != nil {
			return r.fail("%s=%q is not host:port with a usable port: %v", EnvStoreAddr, v, err)
		}
		j.StoreAddr = v
		j.StorePrefix = ""
	}
	if f.addr == "" && f.size > 1 && j.StoreAddr == "" {
		switch {
		case oneNode:
			f.addr = "127.0.0.1"
		default:
			if list := r.firstString("SLURM_JOB_NODELIST", "SLURM_NODELIST"); list != "" {
				host, err := firstHost(list)
				if err != nil {
					return r.fail("%v", err)
				}
				f.addr = host
			} else {
				return r.fail("rank 0 hosts the store, but no variable says where rank 0 runs and the ranks "+
					"are on several nodes: set MASTER_ADDR (or %s) to rank 0's host, for example "+
					"`mpirun -x MASTER_ADDR=$(hostname) ...`, or set %s to a store's address", EnvMasterAddr, EnvStoreAddr)
			}
		}
	}
	if f.port == 0 && f.size > 1 {
		f.port = DefaultMasterPort
		if j.JobID != "" {
			f.port = portFor(j.JobID)
		}
	}
	if f.port > 65535 {
		return r.fail("master port %d is not a TCP port", f.port)
	}
	if f.addr != "" && f.size > 1 && j.StoreAddr == "" {
		if err := addrProblem(net.JoinHostPort(f.addr, strconv.Itoa(max(f.port, 1)))); err != nil {
			return r.fail("master address %q is not usable: %v", f.addr, err)
		}
	}
	j.MasterAddr, j.MasterPort = f.addr, f.port
	j.StoreSecret, _ = r.get(EnvStoreSecret)
	if v, ok := r.get(EnvStorePrefix); ok {
		j.StorePrefix = v
	}
	return nil
}

// portFor is the port a job without one uses: 10000 plus a hash of the job
// id modulo 20000 (below Linux's ephemeral range, which starts at 32768).
// A numeric id (Slurm's "1234.0" job and step) uses the number itself, so
// that consecutive jobs get different ports.
func portFor(jobID string) int {
	job, step, _ := strings.Cut(jobID, ".")
	if n, err := strconv.ParseUint(job, 10, 64); err == nil {
		s, _ := strconv.ParseUint(step, 10, 64)
		return 10000 + int((n*10+s)%20000)
	}
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return 10000 + int(h.Sum32()%20000)
}

func isLoopback(addr string) bool {
	if addr == "localhost" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

// tasksOnNode reads Slurm's tasks-per-node list ("2(x3),1": two tasks on
// each of the first three nodes, one on the fourth) for node.
func tasksOnNode(list string, node int) (int, error) {
	i := 0
	for _, part := range strings.Split(list, ",") {
		count, times := part, "1"
		if k := strings.Index(part, "(x"); k >= 0 && strings.HasSuffix(part, ")") {
			count, times = part[:k], part[k+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		t, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || c < 0 || t < 1 {
			return 0, fmt.Errorf("cannot read %q", part)
		}
		if node < i+t {
			return c, nil
		}
		i += t
	}
	return 0, fmt.Errorf("no entry for node %d", node)
}

// firstHost returns the first host of a Slurm node list such as
// "gpu[003-005,010],cpu1": "gpu003".
func firstHost(list string) (string, error) {
	hosts, err := expandNodeList(list, 1)
	if err != nil {
		return "", err
	}
	if len(hosts) == 0 {
		return "", fmt.Errorf("node list %q is empty", list)
	}
	return hosts[0], nil
}

// maxNodeListNames bounds expandNodeList without a max: a longer list is an
// error, not an exhausted memory.
const maxNodeListNames = 1 << 20

// expandNodeList expands a Slurm node list ("a[1-3,07],b,c[1-2]-ib[0-1]")
// into host names, in Slurm's order, stopping after max names (max <= 0:
// all, at most maxNodeListNames). It makes only the names it returns: the
// first host of a list of 10^7 names costs what one name costs, and a
// range ending at the largest integer neither overflows nor loops.
func expandNodeList(list string, max int) ([]string, error) {
	depth, start := 0, 0
	var items []string
	for i, c := range list {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("node list %q: unbalanced ]", list)
			}
		case ',':
			if depth == 0 {
				items = append(items, list[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("node list %q: unbalanced [", list)
	}
	items = append(items, list[start:])
	limit := max
	if limit <= 0 {
		limit = maxNodeListNames + 1
	}
	var out []string
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		err := expandHost(it, func(name string) bool {
			out = append(out, name)
			return len(out) < limit
		})
		if err != nil {
			return nil, fmt.Errorf("node list %q: %v", list, err)
		}
		if len(out) >= limit {
			if max <= 0 {
				return nil, fmt.Errorf("node list %q: more than %d names", list, maxNodeListNames)
			}
			return out, nil
		}
	}
	return out, nil
}

// nodeSpan is one range of a bracket ("07-09": 7 to 9, written 2 wide).
type nodeSpan struct{ a, b, width int }

// nodePart is a literal, or (spans set) a bracket of ranges.
type nodePart struct {
	lit   string
	spans []nodeSpan
}

// parseHost splits one item ("rack[1-2]-n[01-02]") into literals and
// brackets, checking every range before any name is made.
func parseHost(item string) ([]nodePart, error) {
	var parts []nodePart
	for item != "" {
		open := strings.IndexByte(item, '[')
		if open < 0 {
			if strings.IndexByte(item, ']') >= 0 {
				return nil, fmt.Errorf("%q: unbalanced ]", item)
			}
			parts = append(parts, nodePart{lit: item})
			break
		}
		end := strings.IndexByte(item[open:], ']')
		if end < 0 {
			return nil, fmt.Errorf("%q: unbalanced [", item)
		}
		end += open
		head, ranges := item[:open], item[open+1:end]
		if strings.IndexByte(head, ']') >= 0 || strings.IndexByte(ranges, '[') >= 0 {
			return nil, fmt.Errorf("%q: nested or unbalanced brackets", item)
		}
		if head != "" {
			parts = append(parts, nodePart{lit: head})
		}
		var spans []nodeSpan
		for _, rg := range strings.Split(ranges, ",") {
			lo, hi, isRange := strings.Cut(rg, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || a < 0 {
				return nil, fmt.Errorf("%q: bad range %q", item, rg)
			}
			spans = append(spans, nodeSpan{a, b, len(lo)})
		}
		parts = append(parts, nodePart{spans: spans})
		item = item[end+1:]
	}
	return parts, nil
}

// expandHost calls yield with each name of item (with bracketed ranges), in
// Slurm's order, until yield returns false.
func expandHost(item string, yield func(string) bool) error {
	parts, err := parseHost(item)
	if err != nil {
		return err
	}
	var walk func(i int, prefix string) bool
	walk = func(i int, prefix string) bool {
		if i == len(parts) {
			return yield(prefix)
		}
		p := parts[i]
		if p.spans == nil {
			return walk(i+1, prefix+p.lit)
		}
		for _, sp := range p.spans {
			for n := sp.a; ; n++ {
				if !walk(i+1, prefix+fmt.Sprintf("%0*d", sp.width, n)) {
					return false
				}
				if n == sp.b { // before n++, which would overflow at the largest int
					break
				}
			}
		}
		return true
	}
	walk(0, "")
	return nil
}

// sortedInts formats ranks like "3, 5" (helper for messages).
func sortedInts(v []int) string {
	sort.Ints(v)
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

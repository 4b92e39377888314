package rendezvous

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// env builds a map from "K=V" strings.
func env(kv ...string) map[string]string {
	m := make(map[string]string, len(kv))
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return m
}

// The environments below are what the launchers really set; each cites its
// source. Only the variables that matter are kept, plus some noise that
// must not change the result.
func TestFromEnvLaunchers(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Job // Vars are not compared
	}{
		{
			// Source: PyTorch 2.x torch/distributed/elastic/agent/server/
			// local_elastic_agent.py, LocalElasticAgent._start_workers
			// (worker env); `torchrun --nproc-per-node 2` on one machine.
			name: "torchrun one node",
			env: env("LOCAL_RANK=1", "RANK=1", "GROUP_RANK=0", "ROLE_RANK=1", "ROLE_NAME=default",
				"LOCAL_WORLD_SIZE=2", "WORLD_SIZE=2", "GROUP_WORLD_SIZE=1", "ROLE_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=0",
				"TORCHELASTIC_MAX_RESTARTS=0", "TORCHELASTIC_RUN_ID=none", "TORCHELASTIC_USE_AGENT_STORE=True",
				"TORCH_NCCL_ASYNC_ERROR_HANDLING=1", "OMP_NUM_THREADS=1",
				"TORCHELASTIC_ERROR_FILE=/tmp/torchelastic_x/none_y/attempt_0/1/error.json"),
			want: Job{Launcher: LauncherTorchrun, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 29500,
				StoreAddr: "127.0.0.1:29500", StorePrefix: "/worker/attempt_0", JobID: "none",
				ErrorFile: "/tmp/torchelastic_x/none_y/attempt_0/1/error.json"},
		},
		{
			// Same source; second node of `torchrun --nnodes 2
			// --nproc-per-node 4`, after two restarts.
			name: "torchrun two nodes restarted",
			env: env("LOCAL_RANK=1", "RANK=5", "GROUP_RANK=1", "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=8",
				"GROUP_WORLD_SIZE=2", "MASTER_ADDR=node0.cluster", "MASTER_PORT=29400",
				"TORCHELASTIC_RESTART_COUNT=2", "TORCHELASTIC_RUN_ID=job7", "TORCHELASTIC_USE_AGENT_STORE=True"),
			want: Job{Launcher: LauncherTorchrun, Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4,
				NodeRank: 1, NumNodes: 2, MasterAddr: "node0.cluster", MasterPort: 29400,
				StoreAddr: "node0.cluster:29400", StorePrefix: "/worker/attempt_2", JobID: "job7", RestartCount: 2},
		},
		{
			// Source: captured with Open MPI 4.1.4 (Debian 12 openmpi-bin):
			// `mpirun --allow-run-as-root -np 2 env`, rank 1.
			name: "open mpi 4.1 one node",
			env: env("OMPI_COMMAND=sh", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
				"OMPI_COMM_WORLD_NODE_RANK=1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
				"OMPI_MCA_ess=^singleton", "OMPI_MCA_ess_base_jobid=1484718081", "OMPI_MCA_ess_base_vpid=1",
				"OMPI_MCA_orte_ess_node_rank=1", "OMPI_MCA_orte_ess_num_procs=2", "OMPI_UNIVERSE_SIZE=2",
				"PMIX_NAMESPACE=1484718081", "PMIX_RANK=1"),
			want: Job{Launcher: LauncherOpenMPI, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: portFor("1484718081"),
				JobID: "1484718081"},
		},
		{
			// Open MPI 4.1 as above, inside an sbatch script on two nodes
			// (mpirun -np 8): the batch step's SLURM_PROCID=0 reaches every
			// rank (sbatch(1) "OUTPUT ENVIRONMENT VARIABLES"; no
			// SLURM_STEP_* in a batch script), and rank 0 runs on the first
			// node of the allocation.
			name: "open mpi inside sbatch",
			env: env("OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4", "OMPI_COMM_WORLD_RANK=6",
				"OMPI_COMM_WORLD_SIZE=8", "PMIX_NAMESPACE=3001", "PMIX_RANK=6",
				"SLURM_JOB_ID=200505", "SLURM_JOBID=200505", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
				"SLURM_NTASKS=8", "SLURM_NNODES=2", "SLURM_JOB_NODELIST=gnode[10,20]", "SLURM_TASKS_PER_NODE=4(x2)"),
			want: Job{Launcher: LauncherOpenMPI, Rank: 6, WorldSize: 8, LocalRank: 2, LocalWorldSize: 4,
				NodeRank: -1, MasterAddr: "gnode10", MasterPort: portFor("3001"), JobID: "3001"},
		},
		{
			// Open MPI with the master given on the command line
			// (mpirun -x MASTER_ADDR -x MASTER_PORT), two nodes.
			name: "open mpi with MASTER_ADDR",
			env: env("OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_RANK=2",
				"OMPI_COMM_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=12345"),
			want: Job{Launcher: LauncherOpenMPI, Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: -1, MasterAddr: "10.0.0.1", MasterPort: 12345},
		},
		{
			// Source: MPICH's Hydra (src/pm/hydra, pmip: PMI_RANK, PMI_SIZE,
			// PMI_FD; MPI_LOCALRANKID and MPI_LOCALNRANKS), as mpiexec.hydra
			// of MPICH 4 and Intel MPI set them; `mpiexec -n 4`, rank 3.
			name: "mpich hydra",
			env: env("PMI_RANK=3", "PMI_SIZE=4", "PMI_FD=6", "MPI_LOCALRANKID=3", "MPI_LOCALNRANKS=4",
				"HYDI_CONTROL_FD=7"),
			want: Job{Launcher: LauncherMPICH, Rank: 3, WorldSize: 4, LocalRank: 3, LocalWorldSize: 4,
				NodeRank: 0, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: portFor("ppid-4242"), JobID: "ppid-4242"},
		},
		{
			// Source: MVAPICH2 user guide, "mpirun_rsh" (MV2_COMM_WORLD_RANK,
			// _SIZE, _LOCAL_RANK, _LOCAL_SIZE; MPIRUN_ID).
			name: "mvapich",
			env: env("MV2_COMM_WORLD_RANK=1", "MV2_COMM_WORLD_SIZE=2", "MV2_COMM_WORLD_LOCAL_RANK=1",
				"MV2_COMM_WORLD_LOCAL_SIZE=2", "MPIRUN_ID=5511", "MPIRUN_RANK=1"),
			want: Job{Launcher: LauncherMVAPICH, Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 0, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: portFor("5511"), JobID: "5511"},
		},
		{
			// Source: srun(1), "OUTPUT ENVIRONMENT VARIABLES"; `srun -N2 -n4`
			// in job 4711, step 0, task 3 (second node).
			name: "slurm step",
			env: env("SLURM_JOB_ID=4711", "SLURM_JOBID=4711", "SLURM_STEP_ID=0", "SLURM_STEPID=0",
				"SLURM_PROCID=3", "SLURM_LOCALID=1", "SLURM_NODEID=1", "SLURM_NTASKS=4", "SLURM_NPROCS=4",
				"SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
				"SLURM_STEP_NODELIST=gpu[007-008]", "SLURM_JOB_NODELIST=gpu[007-008]", "SLURM_NNODES=2",
				"SLURM_TASKS_PER_NODE=2(x2)", "SLURMD_NODENAME=gpu008"),
			want: Job{Launcher: LauncherSlurm, Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, MasterAddr: "gpu007", MasterPort: 10000 + (4711*10)%20000, JobID: "4711.0"},
		},
		{
			// srun(1) with uneven tasks per node: `srun -n5 -N2` puts 3 on
			// the first node, 2 on the second.
			name: "slurm uneven",
			env: env("SLURM_JOB_ID=9", "SLURM_STEP_ID=3", "SLURM_PROCID=4", "SLURM_LOCALID=1", "SLURM_NODEID=1",
				"SLURM_STEP_NUM_TASKS=5", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=3,2",
				"SLURM_STEP_NODELIST=a1,b7", "MASTER_PORT=23456"),
			want: Job{Launcher: LauncherSlurm, Rank: 4, WorldSize: 5, LocalRank: 1, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, MasterAddr: "a1", MasterPort: 23456, JobID: "9.3"},
		},
		{
			// srun --mpi=pmix: Slurm's PMIx plugin adds PMIX_RANK and
			// PMIX_NAMESPACE to the step's variables (Slurm's mpi_pmix docs).
			name: "slurm pmix",
			env: env("PMIX_RANK=2", "PMIX_NAMESPACE=slurm.pmix.77.0", "SLURM_JOB_ID=77", "SLURM_STEP_ID=0",
				"SLURM_PROCID=2", "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_STEP_NUM_TASKS=4",
				"SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=2(x2)", "SLURM_STEP_NODELIST=n[1-2]"),
			want: Job{Launcher: LauncherPMIx, Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: 1, NumNodes: 2, MasterAddr: "n1", MasterPort: 10000 + 770, JobID: "77.0"},
		},
		{
			// Source: Kubeflow training-operator v1,
			// pkg/controller.v1/pytorch/envvar.go: a PyTorchJob without
			// nprocPerNode, one process per pod (worker 1 of master+2 workers).
			name: "kubeflow pytorchjob",
			env: env("MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "WORLD_SIZE=3", "RANK=2",
				"PYTHONUNBUFFERED=0"),
			want: Job{Launcher: LauncherTorchEnv, Rank: 2, WorldSize: 3, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: -1, MasterAddr: "job-master-0", MasterPort: 23456},
		},
		{
			// Our JobSet manifest (examples/deploy/jobset.yaml): RANK from
			// the Job completion index, one process per pod.
			name: "jobset manifest",
			env: env("RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "NODE_RANK=1",
				"MASTER_ADDR=allreduce-workers-0-0.allreduce", "MASTER_PORT=29500"),
			want: Job{Launcher: LauncherTorchEnv, Rank: 1, WorldSize: 2, LocalRank: 0, LocalWorldSize: 1,
				NodeRank: 1, MasterAddr: "allreduce-workers-0-0.allreduce", MasterPort: 29500},
		},
		{
			// nccl4go run -n 4 (cmd/nccl4go/run.go): torch's variables plus
			// nccl4go's, which win.
			name: "nccl4go run",
			env: env("RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=4", "GROUP_RANK=0",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=41000", "NCCL4GO_RANK=2", "NCCL4GO_WORLD_SIZE=4",
				"NCCL4GO_LOCAL_RANK=2", "NCCL4GO_LOCAL_WORLD_SIZE=4", "NCCL4GO_NODE_RANK=0", "NCCL4GO_NNODES=1",
				"NCCL4GO_STORE_ADDR=127.0.0.1:41001", "NCCL4GO_STORE_SECRET=s3cret", "NCCL4GO_JOB_ID=run-1"),
			want: Job{Launcher: LauncherNCCL4Go, Rank: 2, WorldSize: 4, LocalRank: 2, LocalWorldSize: 4,
				NodeRank: 0, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: 41000,
				StoreAddr: "127.0.0.1:41001", StoreSecret: "s3cret", JobID: "run-1"},
		},
		{
			// An override of one value: mpirun -x NCCL4GO_MASTER_ADDR.
			name: "override master under mpi",
			env: env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
				"OMPI_COMM_WORLD_LOCAL_SIZE=2", "NCCL4GO_MASTER_ADDR=head", "NCCL4GO_MASTER_PORT=3333"),
			want: Job{Launcher: LauncherOpenMPI, Rank: 0, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2,
				NodeRank: -1, MasterAddr: "head", MasterPort: 3333},
		},
		{
			name: "no launcher",
			env:  env("HOME=/root", "SLURM_JOB_ID=5", "SLURM_PROCID=0"), // sbatch script: no step
			want: Job{Launcher: LauncherNone, Rank: 0, WorldSize: 1, LocalRank: 0, LocalWorldSize: 1, NodeRank: 0, NumNodes: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			got, err := fromLookup(lookup, 4242)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Vars) == 0 && tt.want.Launcher != LauncherNone {
				t.Errorf("no variables recorded")
			}
			for _, v := range got.Vars {
				if tt.env[v.Name] != v.Value && v.Value != "(secret)" {
					t.Errorf("recorded %s=%q, env has %q", v.Name, v.Value, tt.env[v.Name])
				}
			}
			got.Vars = nil
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
			if s := got.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, string(tt.want.Launcher)) {
				t.Errorf("String() = %q", s)
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string // substrings of the message
	}{
		{"rank not below size", env("RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1"),
			[]string{"rank 4 (RANK) is not below the world size 4 (WORLD_SIZE)", `RANK="4"`, `WORLD_SIZE="4"`}},
		{"local rank without local size", env("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
			"OMPI_COMM_WORLD_LOCAL_RANK=1"),
			[]string{"local rank is set (OMPI_COMM_WORLD_LOCAL_RANK=1) but no local world size", `OMPI_COMM_WORLD_SIZE="2"`}},
		{"local size without local rank", env("RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2"),
			[]string{"local world size is set (LOCAL_WORLD_SIZE=2) but no local rank"}},
		{"local rank too big", env("PMI_RANK=1", "PMI_SIZE=4", "MPI_LOCALRANKID=2", "MPI_LOCALNRANKS=2"),
			[]string{"local rank 2 (MPI_LOCALRANKID) is not below the local world size 2 (MPI_LOCALNRANKS)"}},
		{"local size above size", env("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=4"),
			[]string{"local world size 4 (LOCAL_WORLD_SIZE) exceeds the world size 2 (WORLD_SIZE)"}},
		{"not a number", env("RANK=one", "WORLD_SIZE=2"), []string{`RANK="one" is not a non-negative integer`}},
		{"negative", env("NCCL4GO_RANK=-1", "NCCL4GO_WORLD_SIZE=2"), []string{`NCCL4GO_RANK="-1"`}},
		{"zero size", env("PMI_RANK=0", "PMI_SIZE=0"), []string{"world size PMI_SIZE=0 is not positive"}},
		{"rank without size", env("RANK=0"), []string{"RANK is set but WORLD_SIZE is not"}},
		{"size without rank", env("NCCL4GO_WORLD_SIZE=2"), []string{"NCCL4GO_RANK is not set"}},
		{"multi-node mpi without master", env("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4",
			"OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
			[]string{"set MASTER_ADDR", "several nodes"}},
		{"pmix without size", env("PMIX_RANK=0", "PMIX_NAMESPACE=x"), []string{"PMIx gives no world size", "NCCL4GO_WORLD_SIZE"}},
		{"slurm contradiction", env("PMIX_RANK=1", "SLURM_PROCID=2", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=4"),
			[]string{"PMIX_RANK=1 but SLURM_PROCID=2"}},
		{"slurm node id out of range", env("SLURM_PROCID=1", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=2",
			"SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_TASKS_PER_NODE=1,1"),
			[]string{"SLURM_STEP_TASKS_PER_NODE=\"1,1\": no entry for node 2"}},
		{"agent store without port", env("RANK=0", "WORLD_SIZE=1", "TORCHELASTIC_RUN_ID=x",
			"TORCHELASTIC_USE_AGENT_STORE=True", "MASTER_ADDR=h"), []string{"MASTER_PORT is not"}},
		{"bad store address", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_ADDR=nowhere"),
			[]string{`NCCL4GO_STORE_ADDR="nowhere" is not host:port`}},
		{"port out of range", env("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000"),
			[]string{"master port 70000"}},
		{
			// Kubeflow training-operator v1 (pkg/controller.v1/pytorch/envvar.go)
			// with nprocPerNode 4: RANK is the pod index, WORLD_SIZE counts
			// processes.
			"kubeflow nprocPerNode", env("MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "WORLD_SIZE=8", "RANK=1",
				"PET_NPROC_PER_NODE=4", "PET_NNODES=2", "PET_NODE_RANK=1", "PET_MASTER_ADDR=job-master-0",
				"PET_MASTER_PORT=23456"),
			[]string{"nprocPerNode=4 sets RANK to the pod's index", "torchrun", "nccl4go run", `PET_NNODES="2"`},
		},
		{
			// Kubeflow Trainer v2 (TrainJob, torch runtime): only PET_*.
			"kubeflow trainer v2", env("PET_NNODES=2", "PET_NPROC_PER_NODE=2", "PET_NODE_RANK=0",
				"PET_MASTER_ADDR=tj-node-0-0.tj", "PET_MASTER_PORT=29500"),
			[]string{"PET_*", "torchrun --no-python"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := FromMap(tt.env)
			if err == nil {
				t.Fatalf("no error; job %v", j)
			}
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("%T is not *EnvError: %v", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Kubeflow's nprocPerNode of "auto" is not a number: one process per pod
// is then what the program sees, and no error.
func TestFromEnvKubeflowAuto(t *testing.T) {
	j, err := FromMap(env("MASTER_ADDR=m", "MASTER_PORT=1", "WORLD_SIZE=2", "RANK=1", "PET_NPROC_PER_NODE=auto"))
	if err != nil {
		t.Fatal(err)
	}
	if j.Rank != 1 || j.LocalRank != 0 || j.LocalWorldSize != 1 {
		t.Errorf("%+v", j)
	}
}

func TestFromEnvSecretMasked(t *testing.T) {
	_, err := FromMap(env("NCCL4GO_RANK=5", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_SECRET=topsecret"))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("error %v", err)
	}
}

func TestExpandNodeList(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"gpu007", "gpu007"},
		{"gpu[007-009,011],cpu1", "gpu007 gpu008 gpu009 gpu011 cpu1"},
		{"rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02"},
		{"a[9-11]", "a9 a10 a11"},
		{"x,y[3]", "x y3"},
	}
	for _, tt := range tests {
		got, err := expandNodeList(tt.in, 0)
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("%q: got %q want %q", tt.in, s, tt.want)
		}
		first, err := firstHost(tt.in)
		if err != nil || first != got[0] {
			t.Errorf("firstHost(%q) = %q, %v", tt.in, first, err)
		}
	}
	for _, bad := range []string{"a[1-", "a]", "a[3-1]", "a[x]", ""} {
		if _, err := firstHost(bad); err == nil {
			t.Errorf("firstHost(%q): no error", bad)
		}
	}
	if got, _ := expandNodeList("n[1-100000]", 3); len(got) != 3 {
		t.Errorf("max: %v", got)
	}
}

func TestTasksOnNode(t *testing.T) {
	for _, tt := range []struct {
		list string
		node int
		want int
	}{{"4", 0, 4}, {"2(x3),1", 2, 2}, {"2(x3),1", 3, 1}, {"3,2", 1, 2}} {
		got, err := tasksOnNode(tt.list, tt.node)
		if err != nil || got != tt.want {
			t.Errorf("tasksOnNode(%q, %d) = %d, %v", tt.list, tt.node, got, err)
		}
	}
	if _, err := tasksOnNode("2(x", 0); err == nil {
		t.Error("no error for 2(x")
	}
}

func TestPortFor(t *testing.T) {
	if portFor("4711.0") != 10000+47110%20000 || portFor("4712.0") == portFor("4711.0") {
		t.Errorf("numeric ports %d %d", portFor("4711.0"), portFor("4712.0"))
	}
	for _, id := range []string{"prterun-host-1234@1", "x", ""} {
		if p := portFor(id); p < 10000 || p >= 30000 {
			t.Errorf("portFor(%q) = %d", id, p)
		}
	}
}

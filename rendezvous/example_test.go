package rendezvous_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/nccl4go/nccl/rendezvous"
)

// What a rank of `srun -N2 -n4` (task 3, on the second node) finds in its
// environment.
func ExampleFromMap() {
	job, err := rendezvous.FromMap(map[string]string{
		"SLURM_JOB_ID": "4711", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
		"SLURM_NODEID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "2",
		"SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_STEP_NODELIST": "gpu[007-008]",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job)
	// Output: slurm: rank 3 of 4, local rank 1 of 2, node 1 of 2, rank 0 hosts the store at gpu007:17110
}

// Contradictory variables name themselves.
func ExampleFromMap_error() {
	_, err := rendezvous.FromMap(map[string]string{"RANK": "4", "WORLD_SIZE": "4"})
	fmt.Println(err)
	// Output: rendezvous: torch-env environment: rank 4 (RANK) is not below the world size 4 (WORLD_SIZE) (read RANK="4", WORLD_SIZE="4")
}

// One call from the environment to a communicator (needs GPUs: no output
// is checked).
func ExampleInit() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	comm, job, err := rendezvous.Init(ctx, nil)
	if err != nil {
		log.Fatal(err) // e.g. "rendezvous: ranks 3, 5 of 8 never checked in: context deadline exceeded"
	}
	defer comm.Destroy()
	fmt.Println(job)
}

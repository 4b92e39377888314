package rendezvous

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// TestMPIRun runs the CI's rank program under a real Open MPI mpirun -np 4:
// each rank reads its rank from OMPI_COMM_WORLD_*, rank 0 hosts the store,
// the ranks meet through it and create their communicators with the fake
// NCCL. Skipped without mpirun unless NCCL4GO_REQUIRE_MPIRUN=1
// (.ci/mpirun-test sets it after installing Open MPI).
func TestMPIRun(t *testing.T) {
	if faketest.InChild() {
		return
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv("NCCL4GO_REQUIRE_MPIRUN") == "1" {
			t.Fatal("NCCL4GO_REQUIRE_MPIRUN=1 but no mpirun:", err)
		}
		t.Skip("no mpirun (install openmpi-bin, or run .ci/mpirun-test):", err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the rank program:", err)
	}
	bin := filepath.Join(t.TempDir(), "jobcheck")
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/nccl4go/nccl/rendezvous/testdata/jobcheck").CombinedOutput(); err != nil {
		t.Fatalf("building jobcheck: %v\n%s", err, out)
	}
	ncclLib, cudaLib := faketest.Libraries(t, faketest.Env{})
	version, _ := exec.Command(mpirun, "--version").CombinedOutput()
	if !strings.Contains(string(version), "Open MPI") {
		t.Skipf("mpirun is not Open MPI's: %s", version)
	}
	base := []string{"--allow-run-as-root", "--oversubscribe", "-x", "NCCL_LIBRARY=" + ncclLib,
		"-x", "NCCL4GO_CUDA_LIBRARY=" + cudaLib, "-x", "FAKE_CUDA_DEVICES=2"}
	env := append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

	t.Run("np 4", func(t *testing.T) {
		cmd := exec.Command(mpirun, append(append([]string{}, base...), "-np", "4", bin, "-timeout", "60s", "-allreduce")...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("mpirun: %v", err)
		}
		for r := 0; r < 4; r++ {
			re := regexp.MustCompile(fmt.Sprintf(`rank %d of 4 \(openmpi, local %d of 4\): store ok, 4 ranks, communicator ok`, r, r))
			if !re.Match(out) {
				t.Errorf("rank %d did not report", r)
			}
		}
	})
	// A rank that exits before checking in: mpirun fails, and no rank hangs.
	t.Run("rank exits early", func(t *testing.T) {
		cmd := exec.Command(mpirun, append(append([]string{}, base...), "-np", "4", bin, "-timeout", "5s", "-fail-rank", "1")...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err == nil {
			t.Fatal("mpirun succeeded")
		}
		if !strings.Contains(string(out), "rank 1 of 4: exiting with 3 before checking in") {
			t.Errorf("rank 1 did not exit as asked")
		}
	})
}

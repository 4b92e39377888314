#!/usr/bin/env bash
# GPU machine (no Go there): runs examples/allreduce-job, built on the build
# machine, under nccl4go run, torchrun --no-python and mpirun, and a mixed job
# of a Go rank and a Python (CuPy) rank. Two ranks share one GPU, so each gets
# its own NCCL_HOSTID (-hostid-per-rank) and NCCL_NVLS_ENABLE=0.
#
# Build first (on the build machine, from the repository root):
#   go build -o .gpu/allreduce-job ./examples/allreduce-job
#   go build -o .gpu/nccl4go ./cmd/nccl4go
# Then on the GPU machine, from the repository root:
#   bash rendezvous/testdata/gpu-jobs.sh
# Passing: four "PASS:" lines, each after two "all-reduce of 1048576 floats ok, sum 3" lines.
set -uo pipefail
B=${B:-.gpu}
N=1048576
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
status=0
step() { echo "=== $1"; }
check() { if [ "$1" = 0 ]; then echo "PASS: $2"; else echo "FAIL ($1): $2"; status=1; fi; }

step "nccl4go run -n 2"
timeout 300 "$B/nccl4go" run -n 2 -hostid-per-rank "$B/allreduce-job" -count $N
check $? "nccl4go run -n 2"

step "torchrun --no-python --nproc-per-node 2"
timeout 300 torchrun --no-python --nproc-per-node 2 "$B/allreduce-job" -count $N -hostid-per-rank
check $? "torchrun --no-python"

step "mpirun -np 2"
MPIRUN=mpirun
if [ -n "${MPI_HOME:-}" ] && [ -x "$MPI_HOME/bin/mpirun" ]; then MPIRUN=$MPI_HOME/bin/mpirun; fi
timeout 300 "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 -x NCCL_DEBUG "$B/allreduce-job" -count $N -hostid-per-rank
check $? "mpirun -np 2"

step "mixed: Go rank 0 hosts the store, Python (CuPy) rank 1 joins with torch's TCPStore client"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MIXED_PORT:-29555} WORLD_SIZE=2
# One libnccl for both ranks: the one CuPy loads (the venv's), named to the Go rank.
VENV_NCCL=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$VENV_NCCL" ] && export NCCL_LIBRARY=$VENV_NCCL && echo "both ranks use $VENV_NCCL"
RANK=0 timeout 300 "$B/allreduce-job" -count $N -hostid-per-rank &
go_pid=$!
RANK=1 timeout 300 python3 examples/allreduce-job/mixed.py --count $N
py=$?
wait $go_pid
gorc=$?
check $(( py | gorc )) "mixed Go + Python job (go $gorc, python $py)"
unset MASTER_ADDR MASTER_PORT WORLD_SIZE NCCL_LIBRARY
exit $status

#!/usr/bin/env bash
# Side-by-side comparison of nccl4go perf with nccl-tests on a GPU machine.
#
#   NCCL_TESTS=/path/to/nccl-tests/build NCCL4GO=/path/to/nccl4go perf/testdata/compare.sh [OUTDIR]
#
# NCCL_TESTS is the build directory of nccl-tests (built there with
#   make MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr
# from its public source); NCCL4GO the nccl4go binary (go build ./cmd/nccl4go).
# Both run with the same flags; each pair's JSON goes to OUTDIR (default
# ./perf-compare), and `nccl4go perf compare` prints the ratios (B = nccl4go,
# A = nccl-tests) and draws them. Runs alternate A, B, A, B... so that drift
# of the GPU's clocks hits both. Targets (issue 10): one rank, out-of-place
# all_reduce: time within 2% at every size from 1 MB; in-place small sizes
# within 0.2 us.
set -euo pipefail
: "${NCCL_TESTS:?set NCCL_TESTS to the nccl-tests build directory}"
: "${NCCL4GO:?set NCCL4GO to the nccl4go binary}"
out=${1:-perf-compare}
rounds=${ROUNDS:-3}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

# pair NAME TEST ENV... -- FLAGS...: run nccl-tests then nccl4go, ROUNDS times.
pair() {
	local name=$1 test=$2; shift 2
	local envs=()
	while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	for r in $(seq 1 "$rounds"); do
		rm -f "$out/$name.nccltests.$r.json" "$out/$name.nccl4go.$r.json"
		env "${envs[@]}" "$NCCL_TESTS/${test}_perf" "$@" -J "$out/$name.nccltests.$r.json" > "$out/$name.nccltests.$r.txt"
		env "${envs[@]}" "$NCCL4GO" perf "$test" "$@" -J "$out/$name.nccl4go.$r.json" --progress never > "$out/$name.nccl4go.$r.txt"
	done
	echo "=== $name: $test $* (rounds: $rounds; last round shown)"
	"$NCCL4GO" perf compare "$out/$name.nccltests.$rounds.json" "$out/$name.nccl4go.$rounds.json" \
		--plot "$out/$name.png" | tee "$out/$name.compare.txt"
}

# 1. One rank, all_reduce, 8 B to 1 GB, many iterations (the 2% / 0.2 us targets).
pair allreduce-1rank all_reduce -- -b 8 -e 1G -f 2 -g 1 -n 200 -w 20 -c 0
# 2. The same with checks on (correctness, both tools).
pair allreduce-1rank-check all_reduce -- -b 8 -e 128M -f 4 -g 1 -n 20 -c 1
# 3. Every test on one rank, with checks.
for t in all_gather broadcast reduce reduce_scatter alltoall gather scatter sendrecv hypercube; do
	pair "$t-1rank" "$t" -- -b 8 -e 64M -f 4 -g 1 -n 50 -c 1
done
# 4. CUDA graphs.
pair allreduce-graph all_reduce -- -b 8 -e 64M -f 4 -g 1 -n 20 -G 10 -c 1

# 5. Two processes on one GPU (distinct NCCL_HOSTID: NCCL's socket transport
#    between them). nccl-tests under mpirun; nccl4go under mpirun too (no MPI
#    in nccl4go: it reads Open MPI's variables) and under `nccl4go run`.
if command -v mpirun >/dev/null; then
	for t in all_reduce sendrecv; do
		for r in $(seq 1 "$rounds"); do
			rm -f "$out/2proc-$t.nccltests.$r.json" "$out/2proc-$t.nccl4go.$r.json"
			mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME=lo \
				bash -c 'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK NCCL_TESTS_DEVICE=0 exec "$0" "$@"' \
				"$NCCL_TESTS/${t}_perf" -b 8 -e 64M -f 4 -g 1 -n 20 -c 1 -J "$out/2proc-$t.nccltests.$r.json" > "$out/2proc-$t.nccltests.$r.txt"
			mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME=lo \
				-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29533 \
				bash -c 'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK NCCL_TESTS_DEVICE=0 exec "$0" "$@"' \
				"$NCCL4GO" perf "$t" -b 8 -e 64M -f 4 -g 1 -n 20 -c 1 -J "$out/2proc-$t.nccl4go.$r.json" --progress never > "$out/2proc-$t.nccl4go.$r.txt"
		done
		echo "=== 2 processes, one GPU: $t"
		"$NCCL4GO" perf compare "$out/2proc-$t.nccltests.$rounds.json" "$out/2proc-$t.nccl4go.$rounds.json" --plot "$out/2proc-$t.png"
	done
fi

# 6. Two ranks of one process on one GPU (NCCL 2.30.x; nccl-tests cannot).
NCCL_MULTI_RANK_GPU_ENABLE=1 "$NCCL4GO" perf all_reduce --devices 0,0 -b 8 -e 64M -f 4 -n 20 -c 1 \
	-J "$out/1proc-2ranks.nccl4go.json" --plot "$out/1proc-2ranks.png" | tee "$out/1proc-2ranks.txt"
NCCL_MULTI_RANK_GPU_ENABLE=1 "$NCCL4GO" perf sendrecv --devices 0,0 -b 8 -e 64M -f 4 -n 20 -c 1 | tee "$out/1proc-2ranks-sendrecv.txt"

# The byte-for-byte check of the table: every line after the device lines
# must have the same layout; columns that hold measured times differ.
for f in "$out"/allreduce-1rank-check.nccltests.1.txt; do
	diff <(sed -n '/# Using devices/,$p' "$f" | grep -v '^#  Rank' | awk '{print NF}') \
	     <(sed -n '/# Using devices/,$p' "${f/nccltests/nccl4go}" | grep -v '^#  Rank' | grep -v '^# skipping' | awk '{print NF}') \
		&& echo "table layout: same number of fields on every line"
done

#!/bin/sh
# GPU fault suite of the watchdog, on one GPU (ranks are processes with
# distinct NCCL_HOSTID). Build on a machine with Go, from the repository root:
#   go test -c -o .gpu/watchdog.test ./watchdog
#   go build -o .gpu/recover ./examples/recover && go build -o .gpu/nccl4go ./cmd/nccl4go
# then run on the GPU machine, from the repository root: sh watchdog/testdata/gpu-faults.sh
# Passing: every test PASS (none SKIP), the benchmark's added-ns/op <= 60,
# and the example's surviving ranks print "recovered" and "40 steps done, the last on 2 ranks".
set -e
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
time ./.gpu/watchdog.test -test.run '^TestGPU' -test.v -test.timeout 5m
./.gpu/watchdog.test -test.run '^$' -test.bench WatchedAllReduce -test.benchtime 200000x
rm -rf /tmp/nccl4go-recover && mkdir -p /tmp/nccl4go-recover
./.gpu/nccl4go run -n 3 -hostid-per-rank ./.gpu/recover -timeout 5s -dumps /tmp/nccl4go-recover
./.gpu/nccl4go trace analyze /tmp/nccl4go-recover || true

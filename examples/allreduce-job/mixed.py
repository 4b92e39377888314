"""A Python rank (CuPy's NCCL) in a job whose other rank is the Go program.

The Go rank 0 (examples/allreduce-job) hosts the store at MASTER_ADDR:MASTER_PORT
(rendezvous: rank 0 hosts a PyTorch TCPStore-compatible server when no
launcher does) and publishes NCCL's unique id there. This rank connects with
torch.distributed.TCPStore as a client, checks in under rendezvous's keys,
reads the id, joins the communicator with cupy.cuda.nccl.NcclCommunicator and
all-reduces: Go contributes 1.0, this rank 2.0, both must see 3.0.

    go build -o allreduce-job ./examples/allreduce-job
    export MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 WORLD_SIZE=2
    RANK=0 ./allreduce-job -count 1048576 -hostid-per-rank &
    RANK=1 python3 examples/allreduce-job/mixed.py --count 1048576
    wait

The keys (rendezvous/init_exchange.go): a session's first communicator lives
under "nccl4go/0/comm0/": rank r checks in with "rank/<r>" = "=" + text;
rank 0 publishes "outcome" = "=" + the 128-byte id (or "!" + an error).
When done, each rank adds 1 to "nccl4go/0/done" (rank 0 keeps the store
up until every rank has).
"""
import argparse
import datetime
import os
import socket
import sys

# Two ranks on one GPU: NCCL needs distinct host ids (the Go rank sets its own
# with -hostid-per-rank) and no NVLS. Set before CuPy loads NCCL.
os.environ.setdefault("NCCL_HOSTID", socket.gethostname() + "-python-rank" + os.environ.get("RANK", "1"))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import cupy  # noqa: E402
from cupy.cuda import nccl  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=1 << 20)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])

    store = dist.TCPStore(addr, port, is_master=False, timeout=datetime.timedelta(seconds=args.timeout))
    ns = "nccl4go/0/comm0/"
    store.set(ns + "rank/%d" % rank, b"=python:%d" % os.getpid())
    outcome = store.get(ns + "outcome")  # waits until rank 0 publishes
    if outcome[:1] != b"=":
        sys.exit("rank %d: the Go rank reported a failure: %s" % (rank, outcome[1:].decode(errors="replace")))
    uid = bytes(outcome[1:129])

    cupy.cuda.Device(args.device).use()
    try:
        comm = nccl.NcclCommunicator(world, uid, rank)  # CuPy 13 and later take the 128 bytes
    except TypeError:
        # Older CuPy takes the tuple of 128 signed chars get_unique_id returns.
        comm = nccl.NcclCommunicator(world, tuple(b - 256 if b > 127 else b for b in uid), rank)
    x = cupy.full(args.count, rank + 1, dtype=cupy.float32)
    stream = cupy.cuda.Stream.null
    comm.allReduce(x.data.ptr, x.data.ptr, args.count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
    stream.synchronize()
    want = world * (world + 1) / 2
    bad = int(cupy.count_nonzero(x != want))
    try:
        store.add("nccl4go/0/done", 1)  # best effort: the Go rank may have closed its store already
    except Exception:
        pass
    if bad:
        sys.exit("rank %d: %d of %d elements differ from %s (first: %s)" % (rank, bad, args.count, want, float(x[0])))
    print("rank %d of %d (python, cupy %s, NCCL %s): all-reduce of %d floats ok, sum %s"
          % (rank, world, cupy.__version__, nccl.get_version(), args.count, want))
    comm.destroy()


if __name__ == "__main__":
    main()

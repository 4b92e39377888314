#!/usr/bin/env python3
"""Interop between torch.distributed.TCPStore and nccl4go's rendezvous store.

Run by rendezvous's TestTorchInterop (NCCL4GO_TORCH_PYTHON names the python).
Modes:
  client HOST:PORT          connect a torch TCPStore client (is_master=False) to
                            a Go server and exercise every operation torch has;
                            reads "go/hello" (set by Go) and leaves "py/hello".
  refused HOST:PORT         expect a torch client to be refused by a Go server
                            that requires a secret.
  server libuv|classic      host a torch TCPStore master on a free port, print
                            "PORT <n>", wait for the Go client's "go/done", then
                            check what it stored.
Prints one PASS/FAIL line per check and exits 1 if any check failed.
"""
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

failures = 0


def check(name, cond, detail=""):
    global failures
    if cond:
        print(f"PASS {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name} {detail}", flush=True)


def attempt(name, fn):
    """Run fn; a raised exception is a failure of check name."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        check(name, False, f"raised {type(e).__name__}: {e}")
        return None


def split(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def exercise(store, label, queues=True):
    """Every client operation torch exposes, against any server."""
    s = store
    s.set("k", "v1")
    check(f"{label} set/get", s.get("k") == b"v1")
    s.set("bin", bytes(range(256)))
    check(f"{label} binary value", s.get("bin") == bytes(range(256)))
    check(f"{label} add new", s.add("cnt", 5) == 5)
    check(f"{label} add again", s.add("cnt", -7) == -2)
    check(f"{label} add stores decimal text", s.get("cnt") == b"-2")
    check(f"{label} compare_set missing/empty", s.compare_set("cs", "", "new") == b"new")
    check(f"{label} compare_set mismatch", s.compare_set("cs", "wrong", "x") == b"new")
    check(f"{label} compare_set match", s.compare_set("cs", "new", "newer") == b"newer")
    check(f"{label} compare_set missing/nonempty", s.compare_set("nokey", "exp", "x") == b"exp")
    check(f"{label} check present", s.check(["k", "cnt"]) is True)
    check(f"{label} check missing", s.check(["k", "missing"]) is False)
    s.wait(["k", "cnt"])
    check(f"{label} wait present", True)
    t0 = time.monotonic()
    try:
        s.wait(["never"], timedelta(milliseconds=200))
        check(f"{label} wait timeout", False, "wait on a missing key returned")
    except Exception:  # noqa: BLE001  (torch raises DistStoreError)
        check(f"{label} wait timeout", time.monotonic() - t0 < 10)
    # after a cancelled wait the connection must still be in step
    check(f"{label} usable after cancelled wait", s.get("k") == b"v1")
    check(f"{label} delete_key existing", s.delete_key("k") is True)
    check(f"{label} delete_key missing", s.delete_key("k") is False)
    check(f"{label} num_keys", s.num_keys() >= 3, f"num_keys={s.num_keys()}")
    if hasattr(s, "append"):
        s.append("ap", "a")
        s.append("ap", "bc")
        check(f"{label} append", s.get("ap") == b"abc")
    if hasattr(s, "multi_set") and hasattr(s, "multi_get"):
        s.multi_set(["m1", "m2"], ["x", "yy"])
        check(f"{label} multi_set/multi_get", s.multi_get(["m2", "m1"]) == [b"yy", b"x"])
    if queues and hasattr(s, "queue_push"):
        s.queue_push("q", "one")
        s.queue_push("q", "two")
        check(f"{label} queue_len", s.queue_len("q") == 2)
        check(f"{label} queue_pop", s.queue_pop("q") == b"one")
        check(f"{label} queue_pop nonblocking", s.queue_pop("q", block=False) == b"two")
    if hasattr(s, "list_keys"):
        keys = s.list_keys()
        check(f"{label} list_keys", "cnt" in keys and "cs" in keys, f"keys={keys}")


def client(addr):
    host, port = split(addr)
    store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=30))
    check("client connected", True)
    attempt("client ops", lambda: exercise(store, "go-server"))
    check("client sees Go's key", store.get("go/hello") == b"from go")
    p = dist.PrefixStore("nccl4go", store)
    check("prefix store sees Go's WithPrefix key", p.get("job") == b"prefixed")
    store.set("py/hello", "from python")
    store.add("py/count", 3)


def refused(addr):
    host, port = split(addr)
    t0 = time.monotonic()
    try:
        dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=3))
        check("torch client refused by a secret server", False, "it connected")
    except Exception as e:  # noqa: BLE001
        check("torch client refused by a secret server", True)
        print(f"INFO refusal after {time.monotonic() - t0:.1f}s: {type(e).__name__}: {str(e)[:200]}")


def server(kind):
    store = dist.TCPStore("127.0.0.1", 0, world_size=None, is_master=True,
                          timeout=timedelta(seconds=120), wait_for_workers=False,
                          use_libuv=(kind == "libuv"))
    store.set("py/hello", "from python")
    store.add("py/count", 41)
    print(f"PORT {store.port}", flush=True)
    store.wait(["go/done"], timedelta(seconds=120))
    check(f"{kind} server: Go set a value", store.get("go/value") == b"from go")
    check(f"{kind} server: Go's add", store.get("py/count") == b"42")
    check(f"{kind} server: Go's prefixed key", dist.PrefixStore("nccl4go", store).get("job") == b"prefixed")
    check(f"{kind} server: Go's binary value", store.get("go/bin") == bytes(range(256)))
    # torch's own ops still work after the Go client's visit
    attempt(f"{kind} server ops", lambda: exercise(store, f"{kind}-server", queues=(kind == "libuv")))


def main():
    print(f"INFO torch {torch.__version__}", flush=True)
    mode = sys.argv[1]
    if mode == "client":
        client(sys.argv[2])
    elif mode == "refused":
        refused(sys.argv[2])
    elif mode == "server":
        server(sys.argv[2])
    else:
        sys.exit(f"unknown mode {mode}")
    print("DONE failures=%d" % failures, flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

# torch before 2.1 against nccl4go's store (run by TestTorchPre21*).
#   python3 torch_pre21.py server        : host a torch TCPStore, print its port, wait for stdin to close
#   python3 torch_pre21.py client PORT   : a torch client against a Go server, print what it saw
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

print("TORCH", torch.__version__, flush=True)
if sys.argv[1] == "server":
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=30))
    print("PORT", store.port, flush=True)
    sys.stdin.read()
else:
    port = int(sys.argv[2])
    try:
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
        store.set("k", "v")
        print("VALUE", store.get("k"), flush=True)
    except Exception as e:  # the Go server closes the connection
        print("ERROR", type(e).__name__, str(e).replace("\n", " "), flush=True)

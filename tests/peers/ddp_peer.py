#!/usr/bin/env python3
"""PyTorch peer of `baton bench data-parallel`: DistributedDataParallel with
the gloo backend, W processes x 1 thread on this host (the script starts them
itself, on 127.0.0.1 and a port the OS chose), each training baton's built-in
model (tests/peers/peer_models.py) on its shard of the data, B samples per
worker per step, SGD; timed over the steps after the warm-up only. Prints one
JSON line with the global samples/s: {"samples_per_second": ..., "workers": W,
"threads": 1, "batch": B, ...}.

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1073741824:glibc.malloc.hugetlb=1 \
      python3 tests/peers/ddp_peer.py --model mlp --workers 2 --batch 128 --steps 20 --warmup 3
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import peer_data  # noqa: E402
import peer_models  # noqa: E402
from peer_report import fail, report  # noqa: E402


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp", choices=["convnet", "mlp", "resnet18"])
    p.add_argument("--workers", type=int, default=2, help="processes, one thread each")
    p.add_argument("--batch", type=int, default=64, help="samples per worker per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="steps before the timing")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--train-limit", type=int, default=4096, help="training samples (0: all)")
    p.add_argument("--data", default=peer_data.FASHION_MNIST_DIR, help="Fashion-MNIST's directory")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the workers are stopped")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.workers < 1 or a.batch < 1 or a.steps < 1 or a.warmup < 0:
        fail("--workers, --batch and --steps must be >= 1, --warmup >= 0")
    return a


def free_port():
    """A port the OS chose on 127.0.0.1 (bound, then released for rank 0's store)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """SIGTERM when the launching process dies (PR_SET_PDEATHSIG), so that a
    stopped bench leaves no worker behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def worker(a):
    die_with_parent()
    torch.set_num_threads(1)
    torch.manual_seed(42)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=a.rank,
                            world_size=a.workers)
    images, labels = peer_data.training_set(a.model, a.train_limit, a.data)
    data = peer_data.batches(images, labels, a.batch, shard=a.rank, shards=a.workers)
    model = torch.nn.parallel.DistributedDataParallel(peer_models.whole_model(a.model))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    def step():
        x, y = data.next()
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    for _ in range(a.warmup):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if a.rank == 0:
        report(peer="ddp", backend="gloo", model=a.model,
               samples_per_second=a.workers * a.steps * a.batch / seconds, workers=a.workers,
               threads=1, batch=a.batch, global_batch=a.workers * a.batch, steps=a.steps,
               warmup=a.warmup, seconds=seconds)
    dist.destroy_process_group()


def launch(a):
    """Starts the W workers, waits for them, prints rank 0's line; stops them
    all when one fails, on SIGTERM or SIGINT, or after --timeout."""
    port = free_port()
    args = [a for a in sys.argv[1:]]
    workers = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args +
                                ["--rank", str(r), "--port", str(port)],
                                stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                                text=True) for r in range(a.workers)]

    def stop(*_):
        for w in workers:
            if w.poll() is None:
                w.terminate()
        raise SystemExit(130)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + a.timeout
    while any(w.poll() is None for w in workers):
        failed = [r for r, w in enumerate(workers) if w.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            for w in workers:
                if w.poll() is None:
                    w.kill()
            fail("worker %s failed (exit code %s)" % (failed[0], workers[failed[0]].returncode)
                 if failed else "the workers did not finish in %g s" % a.timeout)
        time.sleep(0.1)
    codes = [w.returncode for w in workers]
    if any(codes):
        fail("worker exit codes %s" % codes)
    lines = [line for line in workers[0].stdout.read().splitlines() if line.startswith("{")]
    if not lines:
        fail("rank 0 printed no result")
    print(json.dumps(json.loads(lines[-1])), flush=True)


def main():
    a = arguments()
    if a.rank >= 0:
        worker(a)
    else:
        launch(a)


if __name__ == "__main__":
    main()

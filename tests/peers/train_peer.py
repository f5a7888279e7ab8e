#!/usr/bin/env python3
"""PyTorch peer of `baton bench`: trains baton's built-in model (convnet,
mlp, resnet18: tests/peers/peer_models.py) in one plain process with
torch.set_num_threads(T), on the data the bench's baton sides read, with SGD;
timed over the steps after the warm-up only. Prints one JSON line:
{"samples_per_second": ..., "threads": T, "batch": B, ...}.

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1073741824:glibc.malloc.hugetlb=1 \
      python3 tests/peers/train_peer.py --model convnet --threads 2 --batch 128 --steps 40 --warmup 5
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import peer_data  # noqa: E402
import peer_models  # noqa: E402
from peer_report import fail, report  # noqa: E402


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="convnet", choices=["convnet", "mlp", "resnet18"])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (intra-op)")
    p.add_argument("--batch", type=int, default=64, help="samples per step")
    p.add_argument("--microbatches", type=int, default=1,
                   help="gradient accumulated over M microbatches of batch/M per step")
    p.add_argument("--steps", type=int, default=40, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="steps before the timing")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--train-limit", type=int, default=4096, help="training samples (0: all)")
    p.add_argument("--data", default=peer_data.FASHION_MNIST_DIR, help="Fashion-MNIST's directory")
    a = p.parse_args()
    if a.threads < 1 or a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.microbatches < 1:
        fail("--threads, --batch, --steps and --microbatches must be >= 1, --warmup >= 0")
    if a.batch % a.microbatches:
        fail("--batch %d is not a multiple of --microbatches %d" % (a.batch, a.microbatches))
    return a


def step(model, optimizer, images, labels, microbatches):
    """One SGD step over the minibatch: the gradient of its mean loss."""
    optimizer.zero_grad(set_to_none=True)
    for x, y in zip(images.chunk(microbatches), labels.chunk(microbatches)):
        loss = torch.nn.functional.cross_entropy(model(x), y) / microbatches
        loss.backward()
    optimizer.step()


def main():
    a = arguments()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    images, labels = peer_data.training_set(a.model, a.train_limit, a.data)
    data = peer_data.batches(images, labels, a.batch)
    model = peer_models.whole_model(a.model)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    for _ in range(a.warmup):
        step(model, optimizer, *data.next(), a.microbatches)
    start = time.perf_counter()
    for _ in range(a.steps):
        step(model, optimizer, *data.next(), a.microbatches)
    seconds = time.perf_counter() - start
    report(peer="train", model=a.model, samples_per_second=a.steps * a.batch / seconds,
           threads=a.threads, batch=a.batch, microbatches=a.microbatches, steps=a.steps,
           warmup=a.warmup, seconds=seconds)


if __name__ == "__main__":
    main()

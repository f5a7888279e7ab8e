#!/usr/bin/env python3
"""PyTorch peer of `baton bench`: trains baton's built-in model (convnet,
mlp, resnet18: tests/peers/peer_models.py) in one plain process with
torch.set_num_threads(T), on the data the bench's baton sides read, with SGD;
timed over the steps after the warm-up only. Prints one JSON line:
{"samples_per_second": ..., "threads": T, "batch": B, ...}.

With --copies W it trains W such processes side by side, each on its own
copy of the model and its own thread budget, started together after their
warm-ups and timed over the same wall-clock window (--seconds); its
samples_per_second is their sum. Nothing is shared between them, so the sum
is what the host gives W independent computations: the hardware's own
ceiling under the limit (W x one thread alone), below it by what the cores
share (caches, memory bandwidth, clock).

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
    p.add_argument("--copies", type=int, default=1,
                   help="independent processes trained side by side (their samples/s summed)")
    p.add_argument("--seconds", type=float, default=5.0,
                   help="with --copies: the common timed window after the warm-ups")
    a = p.parse_args()
    if a.threads < 1 or a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.microbatches < 1:
        fail("--threads, --batch, --steps and --microbatches must be >= 1, --warmup >= 0")
    if a.copies < 1 or a.seconds <= 0:
        fail("--copies must be >= 1 and --seconds > 0")
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


def warmed_up(a):
    """The model, its optimizer and the batches, after the warm-up steps."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    images, labels = peer_data.training_set(a.model, a.train_limit, a.data)
    data = peer_data.batches(images, labels, a.batch)
    model = peer_models.whole_model(a.model)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    for _ in range(a.warmup):
        step(model, optimizer, *data.next(), a.microbatches)
    return model, optimizer, data


def copy_main(a, barrier, results):
    """One of --copies: warms up, waits for the others, then steps until the
    common window ends; puts (steps, seconds) in `results`."""
    model, optimizer, data = warmed_up(a)
    barrier.wait()
    start = time.perf_counter()
    steps = 0
    while steps == 0 or time.perf_counter() - start < a.seconds:
        step(model, optimizer, *data.next(), a.microbatches)
        steps += 1
    results.put((steps, time.perf_counter() - start))


def copies_main(a):
    """--copies W: W independent processes side by side, samples/s summed."""
    import multiprocessing
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(a.copies)
    results = context.Queue()
    workers = [context.Process(target=copy_main, args=(a, barrier, results))
               for _ in range(a.copies)]
    for w in workers:
        w.start()
    each = [results.get() for _ in workers]
    for w in workers:
        w.join()
    if any(w.exitcode != 0 for w in workers):
        fail("a copy failed (exit codes %s)" % [w.exitcode for w in workers])
    rates = [steps * a.batch / seconds for steps, seconds in each]
    report(peer="train", model=a.model, samples_per_second=sum(rates), copies=a.copies,
           copy_samples_per_second=rates, threads=a.threads, batch=a.batch,
           microbatches=a.microbatches, warmup=a.warmup, seconds=max(s for _, s in each))


def main():
    a = arguments()
    if a.copies > 1:
        copies_main(a)
        return
    model, optimizer, data = warmed_up(a)
    start = time.perf_counter()
    for _ in range(a.steps):
        step(model, optimizer, *data.next(), a.microbatches)
    seconds = time.perf_counter() - start
    report(peer="train", model=a.model, samples_per_second=a.steps * a.batch / seconds,
           threads=a.threads, batch=a.batch, microbatches=a.microbatches, steps=a.steps,
           warmup=a.warmup, seconds=seconds)


if __name__ == "__main__":
    main()

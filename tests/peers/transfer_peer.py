#!/usr/bin/env python3
"""PyTorch peer of `baton bench transfer`: the transfer job's work done by
hand in one plain process with torch.set_num_threads(T): K heads trained on
one frozen, shared convnet backbone (configs/transfer.yaml,
model/transfer/reference.cpp): every microbatch is forwarded through the
backbone once (no gradient) and its features given to every head; each head
(fc1 256 -> 128, relu, fc2 -> its task's classes) steps with SGD after each
minibatch of `batch` samples; then every head is evaluated on the test
samples. Prints one JSON line: {"seconds": training and evaluation, ...}.

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=1073741824:glibc.malloc.hugetlb=1 \
      python3 tests/peers/transfer_peer.py --heads 3 --threads 2 --train-limit 4096 --test-limit 1000
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

# configs/transfer.yaml's tasks: each maps the 10 Fashion-MNIST labels to its classes.
TASKS = {
    "all10": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "footwear": [0, 0, 0, 0, 0, 1, 0, 1, 0, 1],
    "groups4": [0, 1, 0, 0, 0, 2, 0, 2, 3, 2],
}
HEAD_TASKS = ["all10", "footwear", "groups4"]  # bench.cpp's heads_override: K heads cycle over these


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=3, help="K heads on the shared backbone")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (intra-op)")
    p.add_argument("--batch", type=int, default=64, help="samples per optimiser step")
    p.add_argument("--microbatches", type=int, default=2, help="microbatches per minibatch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wide-features", type=int, default=0,
                   help="convnet_wide's fc1 width (0: the convnet backbone)")
    p.add_argument("--train-limit", type=int, default=0, help="training samples (0: all 60000)")
    p.add_argument("--test-limit", type=int, default=0, help="test samples (0: all 10000)")
    p.add_argument("--data", default=peer_data.FASHION_MNIST_DIR, help="Fashion-MNIST's directory")
    a = p.parse_args()
    if min(a.heads, a.threads, a.batch, a.microbatches, a.epochs) < 1 or a.batch % a.microbatches:
        fail("--heads, --threads, --batch, --microbatches and --epochs must be >= 1, and --batch "
             "a multiple of --microbatches")
    return a


def backbone_of(a):
    """The frozen backbone: convnet, or convnet_wide (fc1 1152 -> W, relu, fc1b W -> 256, relu)."""
    if a.wide_features <= 0:
        b = peer_models.convnet_backbone()
    else:
        b = torch.nn.Sequential(*peer_models.convnet_trunk(1),
                                torch.nn.Linear(1152, a.wide_features), torch.nn.ReLU(),
                                torch.nn.Linear(a.wide_features, peer_models.CONVNET_FEATURES),
                                torch.nn.ReLU())
    b.eval()
    for p in b.parameters():
        p.requires_grad_(False)
    return b


def train_epoch(backbone, heads, images, labels, a, generator):
    order = torch.randperm(labels.numel(), generator=generator)
    micro = a.batch // a.microbatches
    for start in range(0, labels.numel(), a.batch):
        ids = order[start:start + a.batch]
        for _, optimizer, _ in heads:
            optimizer.zero_grad(set_to_none=True)
        for part in ids.split(micro):
            with torch.no_grad():
                features = backbone(images.index_select(0, part))
            y = labels.index_select(0, part)
            for head, _, task in heads:
                loss = torch.nn.functional.cross_entropy(head(features), task[y])
                (loss * part.numel() / ids.numel()).backward()
        for _, optimizer, _ in heads:
            optimizer.step()


def evaluate(backbone, heads, images, labels, batch):
    correct = [0] * len(heads)
    with torch.no_grad():
        for start in range(0, labels.numel(), batch):
            features = backbone(images[start:start + batch])
            y = labels[start:start + batch]
            for i, (head, _, task) in enumerate(heads):
                correct[i] += int((head(features).argmax(1) == task[y]).sum())
    return [c / max(1, labels.numel()) for c in correct]


def main():
    a = arguments()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    train_images, train_labels = peer_data.fashion_mnist("train", a.train_limit, a.data)
    test_images, test_labels = peer_data.fashion_mnist("test", a.test_limit, a.data)
    backbone = backbone_of(a)
    heads = []
    for k in range(a.heads):
        task = torch.tensor(TASKS[HEAD_TASKS[k % len(HEAD_TASKS)]])
        head = peer_models.head(peer_models.CONVNET_FEATURES, int(task.max()) + 1)
        heads.append((head, torch.optim.SGD(head.parameters(), lr=a.lr, momentum=a.momentum), task))
    generator = torch.Generator().manual_seed(42)
    start = time.perf_counter()
    for _ in range(a.epochs):
        train_epoch(backbone, heads, train_images, train_labels, a, generator)
    trained = time.perf_counter()
    accuracy = evaluate(backbone, heads, test_images, test_labels, a.batch)
    seconds = time.perf_counter() - start
    report(peer="transfer", heads=a.heads, threads=a.threads, batch=a.batch,
           microbatches=a.microbatches, train_samples=train_labels.numel() * a.epochs,
           test_samples=test_labels.numel(), seconds=seconds, train_seconds=trained - start,
           samples_per_second=train_labels.numel() * a.epochs / seconds, test_accuracy=accuracy)


if __name__ == "__main__":
    main()

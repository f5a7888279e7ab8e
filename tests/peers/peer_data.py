"""The data the baton sides of `baton bench` read, for its PyTorch peers:
Fashion-MNIST from its IDX files (gzip or not), normalised as
model/core/datasets/load.cpp does, or synthetic [3, 32, 32] samples for
resnet18. Everything is held in memory, as baton holds it.
"""

import gzip
import os
import struct

import torch

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


def read_idx(path):
    """The tensor of an IDX file at `path` or `path`.gz (uint8 samples or labels)."""
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(candidate, "rb") as f:
                data = f.read()
            break
    else:
        raise SystemExit("%s: no such file (nor %s.gz)" % (path, path))
    magic, = struct.unpack(">I", data[:4])
    if magic >> 8 != 0x08:
        raise SystemExit("%s: not an IDX file of unsigned bytes (magic %#x)" % (path, magic))
    dims = magic & 0xff
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    values = torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8)
    return values.reshape(shape)


def fashion_mnist(split="train", limit=0, directory=FASHION_MNIST_DIR):
    """(images [N, 1, 28, 28] float32 normalised, labels [N] int64); `limit`: the first N (0: all)."""
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(directory, prefix + "-images-idx3-ubyte"))
    labels = read_idx(os.path.join(directory, prefix + "-labels-idx1-ubyte"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    images = (images.to(torch.float32).div_(255.0) - FASHION_MNIST_MEAN) / FASHION_MNIST_STD
    return images.unsqueeze(1).contiguous(), labels.to(torch.int64)


def synthetic(count, shape=(3, 32, 32), classes=10, seed=42):
    """`count` random samples of `shape` with random labels (the time of a step
    does not depend on the values)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn((count,) + tuple(shape), generator=g), torch.randint(0, classes, (count,), generator=g)


def training_set(model, limit, directory=FASHION_MNIST_DIR):
    """The training samples the bench's baton side of `model` reads."""
    if model == "resnet18":
        return synthetic(max(limit, 256))
    return fashion_mnist("train", limit, directory)


class batches:
    """Minibatches of `batch` samples in a seeded random order, epoch after
    epoch; `shard`/`shards` keep every shards-th sample (a DDP worker's part)."""

    def __init__(self, images, labels, batch, seed=42, shard=0, shards=1):
        self.images, self.labels, self.batch = images, labels, batch
        self.generator = torch.Generator().manual_seed(seed)
        self.shard, self.shards = shard, shards
        self.order, self.at = None, 0

    def next(self):
        if self.order is None or self.at + self.batch > self.order.numel():
            order = torch.randperm(self.labels.numel(), generator=self.generator)
            self.order, self.at = order[self.shard::self.shards], 0
            if self.order.numel() < self.batch:  # fewer samples than a batch: repeat them
                self.order = self.order.repeat(self.batch // max(1, self.order.numel()) + 1)
        ids = self.order[self.at:self.at + self.batch]
        self.at += self.batch
        return self.images.index_select(0, ids), self.labels.index_select(0, ids)

#!/usr/bin/env python3
"""The peer of `gradsync train`: PyTorch DistributedDataParallel (gloo
backend, default buckets) training the same LeNet-like CNN on Fashion-MNIST
with the same batch per rank, one thread per rank. Launched by
bench/train/train_vs_ddp.sh under `gradsync run`, which sets
OMPI_COMM_WORLD_RANK/SIZE; ranks meet through a file store on the shared
file system and talk over the emulated network's interface (gs0).

Prints one JSON line on rank 0: epochs, seconds per epoch, test accuracy."""
import argparse
import gzip
import json
import math
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(train):
    p = "train" if train else "t10k"
    x = read_idx(f"{DATA}/{p}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(f"{DATA}/{p}-labels-idx1-ubyte.gz").astype(np.int64)
    # The same normalisation as gradsync's loader: mean 0.2860, std 0.3530.
    x = (x - 0.2860) / 0.3530
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 512)
        self.fc2 = nn.Linear(512, 10)

        # gradsync's initialisation (src/nn/net.c): Kaiming normal over
        # fan-in (He et al. 2015), zero biases, so both start alike.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--warmup-epochs", type=float, default=0.0)
    ap.add_argument("--cosine", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="at most N steps per epoch (quick checks; 0 = all)")
    ap.add_argument("--seed", type=int, default=1,
                    help="initialisation and shuffling seed (as gradsync train's --seed)")
    ap.add_argument("--store", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{a.store}", rank=rank,
                            world_size=size)
    torch.manual_seed(a.seed)
    model = nn.parallel.DistributedDataParallel(CNN())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    xtr, ytr = load(True)
    xte, yte = load(False)
    sampler = torch.utils.data.distributed.DistributedSampler(
        torch.utils.data.TensorDataset(xtr, ytr), num_replicas=size, rank=rank, seed=a.seed)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr),
                                         batch_size=a.batch, sampler=sampler)
    # gradsync train's schedule (gs_nn_lr_at): linear warm-up over
    # warmup-epochs, then cosine decay to 0 over the rest, per step.
    steps = len(loader)
    warm, total = int(a.warmup_epochs * steps), a.epochs * steps

    def lr_at(s):
        if s < warm:
            return a.lr * (s + 1) / warm
        if not a.cosine:
            return a.lr
        t = min(1.0, (s - warm) / max(1, total - warm))
        return a.lr * (1 + math.cos(math.pi * t)) / 2

    epoch_s = []
    step = 0
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        model.train()
        dist.barrier()
        t0 = time.time()
        for i, (x, y) in enumerate(loader):
            if a.max_steps and i >= a.max_steps:
                break
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            step += 1
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        dist.barrier()
        epoch_s.append(time.time() - t0)
    model.eval()
    with torch.no_grad():
        correct = sum((model.module(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                      for i in range(0, len(xte), 1000))
    if rank == 0:
        print(json.dumps({"peer": "pytorch-ddp-gloo", "torch": torch.__version__,
                          "ranks": size, "batch_per_rank": a.batch, "epochs": a.epochs,
                          "epoch_s": epoch_s, "test_accuracy": correct / len(xte)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

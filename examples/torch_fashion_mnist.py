#!/usr/bin/env python3
"""Data-parallel training of the C trainer's CNN (gradsync train --model cnn:
conv 5x5x32, pool, conv 5x5x64, pool, fc 512, fc 10; 1,663,370 parameters)
on Fashion-MNIST with gradsync.torch, read from Debian's
dataset-fashion-mnist files.

    gradsync run -np 4 --net 1gbit -- /usr/bin/python3 examples/torch_fashion_mnist.py
    (with PYTHONPATH=build/python, or after cmake --install)

Each rank trains on its 1/N share of every epoch (a DistributedSampler),
batch --batch per rank; the learning rate follows gradsync train's schedule
(linear warm-up, cosine decay). Rank 0 prints per epoch the time and
images/s, and the test accuracy after the last; --json prints one JSON line per epoch instead."""
import argparse
import gzip
import json
import math
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import gradsync.torch as gs

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = struct.unpack(">I", data[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(train, data=DATA):
    """Images normalised as gradsync's loader does (mean 0.2860, std 0.3530)."""
    p = "train" if train else "t10k"
    x = read_idx(f"{data}/{p}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(f"{data}/{p}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy((x - 0.2860) / 0.3530).unsqueeze(1), torch.from_numpy(y)


class CNN(nn.Module):
    """src/nn/models.c's cnn, initialised like it (Kaiming normal over
    fan-in, zero biases)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 512)
        self.fc2 = nn.Linear(512, 10)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def lr_schedule(a, steps_per_epoch):
    warm, total = int(a.warmup_epochs * steps_per_epoch), a.epochs * steps_per_epoch

    def lr_at(s):
        if s < warm:
            return a.lr * (s + 1) / warm
        t = min(1.0, (s - warm) / max(1, total - warm))
        return a.lr * (1 + math.cos(math.pi * t)) / 2

    return lr_at


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--warmup-epochs", type=float, default=0.3)
    ap.add_argument("--policy", default="auto",
                    help="wfbp, single, bucket[:MB], mgwfbp, optimal, dear, auto")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="at most N steps per epoch (0: the whole epoch)")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--no-eval", action="store_true", help="no test accuracy (benchmarks)")
    ap.add_argument("--eval-every-epoch", action="store_true",
                    help="test accuracy after every epoch (default: after the last)")
    ap.add_argument("--warmup-iters", type=int, default=None,
                    help="iterations under wfbp before a profiled policy plans (default 5)")
    ap.add_argument("--json", action="store_true")
    return ap.parse_args(argv)


def evaluate(model, xte, yte, rank, size):
    """Test accuracy: each rank scores its 1/size of the test set, then the
    counts are summed."""
    model.eval()
    xs, ys = xte[rank::size], yte[rank::size]
    with torch.no_grad():
        correct = sum(int((model(xs[i:i + 500]).argmax(1) == ys[i:i + 500]).sum())
                      for i in range(0, len(xs), 500))
    model.train()
    return int(gs.allreduce(torch.tensor([correct], dtype=torch.int64), op=gs.Sum)) / len(xte)


def main():
    a = parse()
    torch.set_num_threads(1)
    gs.init()
    rank, size = gs.rank(), gs.size()
    xtr, ytr = load(True, a.data)
    xte, yte = load(False, a.data)
    torch.manual_seed(1)
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # model=: under "auto" (and "dear") the plan may overlap DeAR's
    # all-gathers with the next forward; updates then happen in that forward.
    opt = gs.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                  policy=a.policy, warmup_iters=a.warmup_iters, model=model)
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    gs.broadcast_optimizer_state(opt, root_rank=0)
    dataset = torch.utils.data.TensorDataset(xtr, ytr)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=size, rank=rank, seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch, sampler=sampler)
    lr_at = lr_schedule(a, len(loader))
    step = 0
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        gs.barrier()
        t0, images, steps = time.time(), 0, 0
        for i, (x, y) in enumerate(loader):
            if a.max_steps and i >= a.max_steps:
                break
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            step += 1
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            images += len(x) * size
            steps += 1
        gs.barrier()
        secs = time.time() - t0
        last = epoch == a.epochs - 1
        want = (last or a.eval_every_epoch) and not a.no_eval
        acc = evaluate(model, xte, yte, rank, size) if want else None
        if rank == 0:
            st = opt.engine_stats()
            row = {"example": "fashion_mnist_cnn", "mode": "gradsync", "policy": a.policy,
                   "chosen": st["chosen"], "messages": st["groups"], "ranks": size,
                   "batch_per_rank": a.batch, "epoch": epoch + 1, "steps": steps, "epoch_s": secs,
                   "images_per_s": images / secs, "test_accuracy": acc}
            print(json.dumps(row) if a.json else
                  f"epoch {epoch + 1}: {secs:.1f} s, {images / secs:.0f} images/s"
                  + (f", test accuracy {100 * acc:.2f}%" if acc is not None else "") +
                  f" (policy {a.policy}: {st['chosen']}, "
                  f"{st['groups']} messages per step)", flush=True)
    gs.shutdown()


if __name__ == "__main__":
    main()

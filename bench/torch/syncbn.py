#!/usr/bin/env python3
"""The cost of gradsync.torch's SyncBatchNorm on a model with many
BatchNorm layers (torchvision's ResNet-18, 20 of them, on synthetic 32x32
images), against the same model with plain BatchNorm, in the same
processes: two copies of the model, each under its own
DistributedOptimizer (policy auto, model=, as the examples), trained in
turns of a few steps (the host's drift falls on both). Per turn: each
copy's images/s over every rank; the ratio SyncBatchNorm / plain per turn.
(torch.nn.SyncBatchNorm, the natural peer, refuses CPU tensors in
Debian's torch: "SyncBatchNorm expected input tensor to be on GPU".)

Prints one JSON line per turn on rank 0, then a summary line."""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

import gradsync.torch as gs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16, help="images per rank and step")
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--steps", type=int, default=2, help="steps per turn")
    ap.add_argument("--warmup-turns", type=int, default=2)
    a = ap.parse_args()
    gs.init()
    r, n = gs.rank(), gs.size()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    plain = torchvision.models.resnet18(num_classes=10)
    synced = gs.SyncBatchNorm.convert_sync_batchnorm(torchvision.models.resnet18(num_classes=10))
    synced.load_state_dict(plain.state_dict())
    peers = {}
    for name, model in (("plain", plain), ("syncbn", synced)):
        gs.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                      named_parameters=model.named_parameters(), policy="auto",
                                      model=model)
        peers[name] = (model, opt)
    g = torch.Generator().manual_seed(100 + r)
    x = torch.randn(a.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    rates = {k: [] for k in peers}
    for turn in range(a.warmup_turns + a.turns):
        order = list(peers) if turn % 2 == 0 else list(reversed(list(peers)))
        row = {"turn": turn}
        for name in order:
            model, opt = peers[name]
            gs.barrier()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            opt.finish()  # the updates waiting for a forward, before the other copy's turn
            gs.barrier()
            rate = a.steps * a.batch * n / (time.perf_counter() - t0)
            row[name] = rate
            if turn >= a.warmup_turns:
                rates[name].append(rate)
        if turn >= a.warmup_turns:
            row["ratio"] = row["syncbn"] / row["plain"]
        if r == 0:
            print(json.dumps(row), flush=True)
    ratios = [s / p for s, p in zip(rates["syncbn"], rates["plain"])]
    if r == 0:
        print(json.dumps({"summary": True, "ranks": n, "batch": a.batch,
                          "plain_images_per_s": statistics.median(rates["plain"]),
                          "syncbn_images_per_s": statistics.median(rates["syncbn"]),
                          "ratio_median": statistics.median(ratios),
                          "ratio_min": min(ratios), "ratio_max": max(ratios),
                          "bn_layers": sum(isinstance(m, gs.SyncBatchNorm)
                                           for m in synced.modules())}), flush=True)
    for _, opt in peers.values():
        opt.close()


if __name__ == "__main__":
    main()

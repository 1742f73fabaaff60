#!/usr/bin/env python3
"""Data-parallel training of torchvision's ResNet-18 (11.2 M parameters in
62 tensors, 10 classes) on synthetic 32x32 images with gradsync.torch: a
throughput example, for networks whose gradients are large.

    gradsync run -np 4 --net 1gbit -- /usr/bin/python3 examples/torch_resnet18.py

The images are random (seeded per rank) and so are the labels: the loss is
not meant to fall. Rank 0 prints per epoch of --steps steps the time and
images/s (--json: one JSON line per epoch)."""
import argparse
import json
import time

import torch
import torch.nn.functional as F
import torchvision

import gradsync.torch as gs


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="steps per epoch")
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--policy", default="auto")
    ap.add_argument("--warmup-iters", type=int, default=None,
                    help="iterations under wfbp before a profiled policy plans (default 5)")
    ap.add_argument("--json", action="store_true")
    return ap.parse_args(argv)


def model_and_data(a, rank):
    torch.manual_seed(1)
    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(a.steps, a.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (a.steps, a.batch), generator=g)
    return model, x, y


def main():
    a = parse()
    torch.set_num_threads(1)
    gs.init()
    rank, size = gs.rank(), gs.size()
    model, xs, ys = model_and_data(a, rank)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    # model=: under "auto" (and "dear") the plan may overlap DeAR's
    # all-gathers with the next forward; updates then happen in that forward.
    opt = gs.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                  policy=a.policy, warmup_iters=a.warmup_iters, model=model)
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    for epoch in range(a.epochs):
        gs.barrier()
        t0 = time.time()
        for x, y in zip(xs, ys):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        gs.barrier()
        secs = time.time() - t0
        if rank == 0:
            st = opt.engine_stats()
            ips = a.steps * a.batch * size / secs
            row = {"example": "resnet18_synthetic", "mode": "gradsync", "policy": a.policy,
                   "chosen": st["chosen"], "messages": st["groups"], "ranks": size,
                   "batch_per_rank": a.batch, "epoch": epoch + 1, "steps": a.steps,
                   "epoch_s": secs, "images_per_s": ips}
            print(json.dumps(row) if a.json else
                  f"epoch {epoch + 1}: {secs:.1f} s, {ips:.1f} images/s (policy {a.policy}: "
                  f"{st['chosen']}, {st['groups']} messages per step)", flush=True)
    gs.shutdown()


if __name__ == "__main__":
    main()

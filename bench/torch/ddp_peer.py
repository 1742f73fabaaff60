#!/usr/bin/env python3
"""The peer of the gradsync.torch examples: the same model, data, batch,
schedule and timing as examples/torch_fashion_mnist.py or
examples/torch_resnet18.py, synchronised by PyTorch's
DistributedDataParallel (gloo backend, default 25 MB buckets) instead.
Launched under `gradsync run` (bench/torch/torch_vs_ddp.sh), which sets
OMPI_COMM_WORLD_RANK/SIZE; ranks meet through a file store and talk over
the emulated network's interface (gs0). Prints the example's JSON lines
with "mode": "ddp".

Usage: ddp_peer.py fashion_mnist|resnet18 --store FILE [example options]"""
import importlib.util
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def load_example(name):
    path = os.path.join(EXAMPLES, {"fashion_mnist": "torch_fashion_mnist.py",
                                   "resnet18": "torch_resnet18.py"}[name])
    spec = importlib.util.spec_from_file_location("example_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    which = sys.argv[1]
    rest = sys.argv[2:]
    i = rest.index("--store")
    store = rest[i + 1]
    del rest[i:i + 2]
    ex = load_example(which)
    a = ex.parse(rest)
    torch.set_num_threads(1)
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    if which == "fashion_mnist":
        xtr, ytr = ex.load(True, a.data)
        xte, yte = ex.load(False, a.data)
        torch.manual_seed(1)
        model = ex.CNN()
        dataset = torch.utils.data.TensorDataset(xtr, ytr)
        sampler = torch.utils.data.distributed.DistributedSampler(
            dataset, num_replicas=size, rank=rank, seed=1)
        loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch, sampler=sampler)
        lr_at = ex.lr_schedule(a, len(loader))
        momentum, wd = 0.9, 0.0
    else:
        model, xs, ys = ex.model_and_data(a, rank)
        lr_at = lambda s: a.lr  # noqa: E731
        momentum, wd = 0.9, 5e-4
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=momentum, weight_decay=wd)
    step = 0
    for epoch in range(a.epochs):
        if which == "fashion_mnist":
            sampler.set_epoch(epoch)
            batches = ((x, y) for i, (x, y) in enumerate(loader)
                       if not a.max_steps or i < a.max_steps)
        else:
            batches = zip(xs, ys)
        dist.barrier()
        t0, images, steps = time.time(), 0, 0
        for x, y in batches:
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            step += 1
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
            images += len(x) * size
            steps += 1
        dist.barrier()
        secs = time.time() - t0
        row = {"example": ("fashion_mnist_cnn" if which == "fashion_mnist"
                           else "resnet18_synthetic"),
               "mode": "ddp", "backend": "gloo", "torch": torch.__version__, "ranks": size,
               "batch_per_rank": a.batch, "epoch": epoch + 1, "steps": steps,
               "epoch_s": secs, "images_per_s": images / secs}
        if which == "fashion_mnist" and epoch == a.epochs - 1 and not a.no_eval:
            model.eval()
            xs_, ys_ = xte[rank::size], yte[rank::size]
            with torch.no_grad():
                correct = sum(int((model(xs_[i:i + 500]).argmax(1) == ys_[i:i + 500]).sum())
                              for i in range(0, len(xs_), 500))
            c = torch.tensor([correct], dtype=torch.int64)
            dist.all_reduce(c)
            row["test_accuracy"] = int(c) / len(xte)
        if rank == 0:
            print(json.dumps(row), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Issue #12's compression target: gradsync.torch with compression="topk:0.01"
against PyTorch DDP (gloo, default 25 MB buckets) on the same emulated
cluster, training the Fashion-MNIST example's CNN (examples/torch_fashion_mnist.py:
the C trainer's cnn, its data, schedule and batch) from the same
initialisation on the same data order, one peer after the other in the same
processes (as bench/torch/compare.py does). Each peer trains the same number
of epochs over the first --train-images images of the training set, then
scores the whole test set. Prints one JSON line per peer on rank 0: images/s,
epoch time, test accuracy, and for gradsync the bytes it sent per step.

Usage (under gradsync run, driven by bench/torch/torch_compress.sh):
  compress.py [--epochs E] [--train-images N] [--modes ddp,topk:0.01]
              [--compress-warmup W]
--compress-warmup W: gradsync's density warm-up (compress_warmup_steps=) over
the first W epochs (a fraction is fine), for every compressed mode."""
import argparse
import importlib.util
import json
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import gradsync.torch as gs

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def load_example(fname):
    spec = importlib.util.spec_from_file_location(fname[:-3], os.path.join(EXAMPLES, fname))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-images", type=int, default=30000)
    ap.add_argument("--modes", default="topk:0.01,ddp",
                    help="ddp, or a gradsync compression spec (none: dense gradsync)")
    ap.add_argument("--policy", default="auto")
    ap.add_argument("--compress-warmup", type=float, default=0.0,
                    help="density warm-up over this many epochs (topk, mstopk, dgc)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    gs.init()
    rank, size = gs.rank(), gs.size()
    store = gs.broadcast_object(tempfile.mktemp(prefix="gradsync-torch-ddp-") if rank == 0
                                else None)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)

    fm = load_example("torch_fashion_mnist.py")
    fa = fm.parse(["--epochs", str(a.epochs)])
    xtr, ytr = fm.load(True, fa.data)
    xtr, ytr = xtr[:a.train_images], ytr[:a.train_images]
    xte, yte = fm.load(False, fa.data)
    dataset = torch.utils.data.TensorDataset(xtr, ytr)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=size,
                                                              rank=rank, seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=fa.batch, sampler=sampler)
    lr_at = fm.lr_schedule(fa, len(loader))
    warmup_steps = int(a.compress_warmup * len(loader))

    for mode in a.modes.split(","):
        torch.manual_seed(1)
        model = fm.CNN()
        # DGC corrects momentum inside the compressor: the optimizer gets none.
        dgc = mode.split(":")[0] == "dgc"
        sgd = torch.optim.SGD(model.parameters(), lr=fa.lr, momentum=0 if dgc else 0.9)
        if mode == "ddp":
            net, opt, barrier = torch.nn.parallel.DistributedDataParallel(model), sgd, dist.barrier
        else:
            net, barrier = model, gs.barrier
            extra = {"compress_warmup_steps": warmup_steps} if mode != "none" else {}
            if dgc:
                extra["compress_momentum"] = 0.9
            opt = gs.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                          policy=a.policy, compression=mode, **extra)
        step, t_train, images = 0, 0.0, 0
        for epoch in range(a.epochs):
            sampler.set_epoch(epoch)
            barrier()
            t0 = time.time()
            for x, y in loader:
                for g in opt.param_groups:
                    g["lr"] = lr_at(step)
                step += 1
                opt.zero_grad()
                F.cross_entropy(net(x), y).backward()
                opt.step()
                images += len(x) * size
            barrier()
            t_train += time.time() - t0
        acc = fm.evaluate(model, xte, yte, rank, size)
        row = {"mode": mode, "ranks": size, "batch_per_rank": fa.batch, "epochs": a.epochs,
               "train_images": len(xtr), "steps": step, "train_s": t_train,
               "images_per_s": images / t_train, "test_accuracy": acc,
               "torch": torch.__version__}
        if mode != "ddp":
            st = opt.engine_stats()
            row.update(policy=a.policy, chosen=st["chosen"], messages=st["groups"],
                       compress_warmup_steps=warmup_steps,
                       compressed_messages=st["compressed_messages"],
                       plans=st["plans"],
                       bytes_per_step=st["bytes_sent"] / max(1, st["iterations"]),
                       dense_bytes_per_step=st["bytes_dense"] / max(1, st["iterations"]),
                       compress_s_per_step=st["compress_s"] / max(1, st["iterations"]))
            opt.close()
        if rank == 0:
            print(json.dumps(row), flush=True)
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(store):
        os.unlink(store)
    gs.shutdown()


if __name__ == "__main__":
    main()

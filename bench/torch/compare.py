#!/usr/bin/env python3
"""One launch, every peer: the two gradsync.torch examples' models and data
(examples/torch_fashion_mnist.py, examples/torch_resnet18.py), each trained
four ways one after the other by the same processes on the same emulated
cluster, from the same initialisation, with the same batch, schedule and
timing:
  auto          gradsync.torch, policy auto
  auto-overlap  gradsync.torch, policy auto with model= (the plan may be
                DeAR's, whose all-gathers overlap the next forward)
  single        gradsync.torch, policy single (Horovod-style: one message)
  ddp           PyTorch DistributedDataParallel, gloo, default 25 MB buckets
--rounds R trains every peer R times, in reverse order on odd rounds, so that
the shared machine's drifting speed does not favour the peers trained first;
every row carries its round. One launch for all (rather than one per peer)
because starting torch on the shared machine took minutes per launch.
Launched under `gradsync run` by bench/torch/torch_vs_ddp.sh; DDP's ranks
meet through a file store (the path is broadcast by gradsync) and talk over
the emulated network's interface (gs0). Prints one JSON line per epoch on rank 0.

--interleave S --chunks C instead keeps every peer alive at once, each
with its own copy of the model (same initialisation): after --warm steps of
each (the profiled policies plan there), C chunks of S steps in which every
peer trains S steps in turn, the order rotating from chunk to chunk. Peers
that run seconds apart see the same machine, so the ratio of two peers in
one chunk is not swayed by the host's drift over minutes; one JSON line per
peer and chunk ("chunk": c).

Usage: compare.py --cnn-steps S --resnet-steps S [--epochs E] [--resnet-batch B]
                  [--modes M,M...] [--rounds R]
                  [--interleave S --resnet-interleave R --chunks C [--warm W]]"""
import argparse
import importlib.util
import json
import os
import resource
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


class Peer:
    """One peer of the interleaved comparison: its model, its optimizer
    (and DDP wrapper), its own step count for the learning rate."""

    def __init__(self, mode, model, lr_at, momentum, wd):
        self.mode, self.lr_at, self.step = mode, lr_at, 0
        if mode == "ddp":
            self.net = torch.nn.parallel.DistributedDataParallel(model)
            self.opt = torch.optim.SGD(self.net.parameters(), lr=lr_at(0), momentum=momentum,
                                       weight_decay=wd)
        else:
            self.net = model
            self.opt = gs.DistributedOptimizer(
                torch.optim.SGD(model.parameters(), lr=lr_at(0), momentum=momentum,
                                weight_decay=wd),
                named_parameters=model.named_parameters(), policy=mode.split("-")[0],
                model=model if mode.endswith("-overlap") else None, warmup_iters=2)

    def train(self, batches, finish=True):
        """Trains on `batches`; returns the steps and the images of all
        ranks. With `finish`, an overlapping peer's last updates are applied
        before it returns, so that no peer's communication runs into the
        next peer's turn."""
        steps = images = 0
        for x, y in batches:
            for g in self.opt.param_groups:
                g["lr"] = self.lr_at(self.step)
            self.step += 1
            self.opt.zero_grad()
            F.cross_entropy(self.net(x), y).backward()
            self.opt.step()
            steps += 1
            images += len(x) * gs.size()
        if finish and self.mode != "ddp":
            self.opt.finish()
        return steps, images

    def plan(self):
        """gradsync's plan and messages per step (none for DDP)."""
        if self.mode == "ddp":
            return {}
        st = self.opt.engine_stats()
        return {"chosen": st["chosen"], "messages": st["groups"]}

    def close(self):
        if self.mode != "ddp":
            self.opt.close()


def run(mode, model, batches_of_epoch, lr_at, epochs, momentum, wd, emit):
    """Trains `model` for `epochs` epochs of batches_of_epoch(epoch) under
    `mode` (a peer of the module's docstring, or any gradsync policy, with
    "-overlap" for model=); emit(row) per epoch."""
    peer = Peer(mode, model, lr_at, momentum, wd)
    barrier = dist.barrier if mode == "ddp" else gs.barrier
    for epoch in range(epochs):
        barrier()
        t0 = time.time()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        steps, images = peer.train(batches_of_epoch(epoch), finish=False)
        barrier()
        secs = time.time() - t0
        ru = resource.getrusage(resource.RUSAGE_SELF)
        # This process's context switches (all its threads) per step: how
        # often a peer's threads hand the cores over (the printing rank's).
        csw = (ru.ru_nvcsw - ru0.ru_nvcsw) + (ru.ru_nivcsw - ru0.ru_nivcsw)
        row = {"mode": mode, "epoch": epoch + 1, "steps": steps, "epoch_s": secs,
               "images_per_s": images / secs,
               "ctx_switches_per_step": round(csw / max(steps, 1), 1),
               "cpu_s_per_step": round((ru.ru_utime + ru.ru_stime - ru0.ru_utime
                                        - ru0.ru_stime) / max(steps, 1), 4)}
        row.update(peer.plan())
        emit(row)
    peer.close()


def interleave(modes, make_model, batches, lr_at, momentum, wd, warm, steps, chunks, emit):
    """Every peer of `modes` alive at once on its own copy of make_model();
    `warm` steps each, then `chunks` chunks of `steps` steps each, every
    peer in turn (the order rotating); batches(i, n): n batches from the
    i-th on. emit(row) per peer and chunk."""
    peers = [Peer(m, make_model(), lr_at, momentum, wd) for m in modes]
    for p in peers:
        p.train(batches(0, warm))
    pos = warm
    for c in range(chunks):
        k = c % len(peers)
        for p in peers[k:] + peers[:k]:
            data = list(batches(pos, steps))
            gs.barrier()
            t0 = time.perf_counter()
            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            _, images = p.train(data)
            gs.barrier()
            secs = time.perf_counter() - t0
            ru = resource.getrusage(resource.RUSAGE_SELF)
            row = {"mode": p.mode, "chunk": c, "steps": steps, "epoch": 1, "epoch_s": secs,
                   "images_per_s": images / secs,
                   "cpu_s_per_step": round((ru.ru_utime + ru.ru_stime - ru0.ru_utime
                                            - ru0.ru_stime) / steps, 4)}
            row.update(p.plan())
            emit(row)
        pos += steps
    for p in peers:
        p.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--cnn-steps", type=int, default=8, help="0 skips the CNN")
    ap.add_argument("--resnet-steps", type=int, default=2, help="0 skips ResNet-18")
    ap.add_argument("--resnet-batch", type=int, default=16)
    ap.add_argument("--modes", default="auto,auto-overlap,single,ddp")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--interleave", type=int, default=0, metavar="S",
                    help="steps per peer and chunk (0: peers one after another)")
    ap.add_argument("--resnet-interleave", type=int, default=1, metavar="R",
                    help="interleaved: ResNet-18's steps per peer and chunk")
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--warm", type=int, default=6, help="interleaved: warm-up steps per peer")
    a = ap.parse_args()
    torch.set_num_threads(1)
    gs.init()
    rank, size = gs.rank(), gs.size()
    store = gs.broadcast_object(tempfile.mktemp(prefix="gradsync-torch-ddp-") if rank == 0
                                else None)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
    modes = a.modes.split(",")
    if rank == 0:
        # The allreduce algorithm of each size, drawn by the start-up fit for
        # this whole launch: a slow draw explains a slow run.
        print(json.dumps({"allreduce_algorithm": {
            f"{b >> 10}K" if b < 1 << 20 else f"{b >> 20}M": gs._C.allreduce_algorithm(b)
            for b in (1 << k for k in range(16, 27, 2))}}), flush=True)

    def emitter(example, batch, rnd):
        def emit(row):
            if rank == 0:
                print(json.dumps({"example": example, "label": row["mode"], "ranks": size,
                                  "batch_per_rank": batch, "round": rnd,
                                  "torch": torch.__version__, **row}), flush=True)
        return emit

    def order(rnd):
        return modes if rnd % 2 == 0 else modes[::-1]

    # The C trainer's CNN on Fashion-MNIST (the example's data, schedule, batch 64).
    fm = load_example("torch_fashion_mnist.py")
    fa = fm.parse(["--epochs", str(a.epochs)])
    xtr, ytr = fm.load(True, fa.data)
    dataset = torch.utils.data.TensorDataset(xtr, ytr)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=size,
                                                              rank=rank, seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=fa.batch, sampler=sampler)

    def cnn_batches(epoch):
        sampler.set_epoch(epoch)
        return (b for i, b in zip(range(a.cnn_steps), loader))

    # torchvision's ResNet-18 on synthetic 32x32 images (the example's).
    rn = load_example("torch_resnet18.py")
    ra = rn.parse(["--steps", str(a.resnet_steps), "--batch", str(a.resnet_batch)])
    if a.interleave > 0:
        if a.cnn_steps > 0:
            cnn_data = [b for _, b in zip(range(a.cnn_steps), loader)]

            def cnn_model():
                torch.manual_seed(1)
                return fm.CNN()
            interleave(modes, cnn_model,
                       lambda i, n: (cnn_data[(i + j) % len(cnn_data)] for j in range(n)),
                       fm.lr_schedule(fa, len(loader)), 0.9, 0.0, a.warm, a.interleave,
                       a.chunks, emitter("fashion_mnist_cnn", fa.batch, 0))
        if a.resnet_steps > 0:
            _, xs, ys = rn.model_and_data(ra, rank)
            interleave(modes, lambda: rn.model_and_data(ra, rank)[0],
                       lambda i, n: ((xs[(i + j) % len(xs)], ys[(i + j) % len(ys)])
                                     for j in range(n)),
                       lambda s: ra.lr, 0.9, 5e-4, a.warm, a.resnet_interleave,
                       a.chunks, emitter("resnet18_synthetic", ra.batch, 0))
    else:
        for rnd in range(a.rounds if a.cnn_steps > 0 else 0):
            for mode in order(rnd):
                torch.manual_seed(1)
                run(mode, fm.CNN(), cnn_batches, fm.lr_schedule(fa, len(loader)), a.epochs,
                    0.9, 0.0, emitter("fashion_mnist_cnn", fa.batch, rnd))
        for rnd in range(a.rounds if a.resnet_steps > 0 else 0):
            for mode in order(rnd):
                model, xs, ys = rn.model_and_data(ra, rank)
                run(mode, model, lambda epoch: zip(xs, ys), lambda s: ra.lr, a.epochs, 0.9,
                    5e-4, emitter("resnet18_synthetic", ra.batch, rnd))
    dist.destroy_process_group()
    if rank == 0:  # gloo's file store may have removed it already
        try:
            os.unlink(store)
        except FileNotFoundError:
            pass
    gs.shutdown()


if __name__ == "__main__":
    main()

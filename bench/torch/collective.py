#!/usr/bin/env python3
"""The all-reduce alone, gradsync.torch against torch.distributed's gloo, in
the same processes on the same emulated cluster: for each size, R rounds of
N timed calls of each peer (after warm-up calls), alternating which peer goes
first, each call on a fresh copy of the same random float32 tensor, each
result checked against the sum of every rank's contribution. The time of a
call is the slowest rank's (a barrier before each call, the max over ranks
of the call's time), and a peer's figure is the median over its calls.
Launched under `gradsync run` by bench/torch/collective.sh; gloo's ranks
meet through a file store whose path rank 0 broadcasts. Prints one JSON line
per size on rank 0.

Usage: collective.py [--sizes B,B...] [--iters N] [--rounds R]"""
import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import gradsync.torch as gs


def timed(fn, t):
    """Seconds of fn(t) on the slowest rank."""
    gs.barrier()
    t0 = time.perf_counter()
    fn(t)
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    return gs.allreduce(dt, op=gs.Max).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1048576,6653480,26214400",
                    help="bytes per all-reduce (6,653,480: the CNN's gradient)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gs.init()
    rank, size = gs.rank(), gs.size()
    path = gs.broadcast_object(tempfile.mkdtemp(prefix="gs-gloo-") if rank == 0 else None, 0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "gs0")
    dist.init_process_group("gloo", init_method=f"file://{path}/store", rank=rank,
                            world_size=size)
    peers = {
        "gradsync": lambda t: gs.allreduce_(t, op=gs.Sum),
        "gloo": lambda t: dist.all_reduce(t),
    }
    for nbytes in (int(s) for s in args.sizes.split(",")):
        n = nbytes // 4
        # Every rank's contribution is known to all (seeded), so the reference
        # sum is computed locally, in float64, independently of both peers.
        parts = [torch.randn(n, generator=torch.Generator().manual_seed(1234 + r))
                 for r in range(size)]
        mine = parts[rank]
        want = torch.stack(parts).double().sum(0).float()
        del parts
        times = {p: [] for p in peers}
        for r in range(args.rounds):
            order = list(peers) if r % 2 == 0 else list(reversed(peers))
            for p in order:
                for i in range(1 + args.iters):  # the first call is warm-up
                    t = mine.clone()
                    dt = timed(peers[p], t)
                    if not torch.allclose(t, want, rtol=1e-4, atol=1e-3):
                        raise SystemExit(f"collective.py: {p} all-reduce of {nbytes} "
                                         f"bytes differs from the reference sum on rank {rank}")
                    if i > 0:
                        times[p].append(dt)
        if rank == 0:
            med = {p: statistics.median(v) for p, v in times.items()}
            print(json.dumps({"bytes": nbytes, "ranks": size, "calls": len(times["gloo"]),
                              "gradsync_s": med["gradsync"], "gloo_s": med["gloo"],
                              "gloo_over_gradsync": med["gloo"] / med["gradsync"],
                              "gradsync_range_s": [min(times["gradsync"]), max(times["gradsync"])],
                              "gloo_range_s": [min(times["gloo"]), max(times["gloo"])]}),
                  flush=True)
    dist.destroy_process_group()
    gs.barrier()
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)
    gs.shutdown()


if __name__ == "__main__":
    main()

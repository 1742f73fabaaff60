#!/usr/bin/python3
"""The PyTorch peer of `gradsync bench --op topk`: times torch.topk (and numpy's
argpartition) on the same values, one thread, and prints one JSON line.

Usage: torch_topk.py DATA.f32 K ITERS
DATA.f32 is the raw little-endian float32 array that `gradsync bench --op topk
--dump` wrote. Wall and thread CPU times are medians over ITERS runs; each
selection is checked: its smallest |x| must be the k-th largest.
"""
import json
import statistics
import sys
import time

import numpy as np
import torch


def timed(fn, iters):
    wall, cpu = [], []
    out = None
    for _ in range(iters):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(wall), statistics.median(cpu), out


def main():
    path, k, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    a = np.fromfile(path, dtype="<f4")
    x = torch.from_numpy(a)
    kth = float(-np.partition(-np.abs(a), k - 1)[k - 1])
    tw, tc, (vals, _) = timed(lambda: torch.topk(x.abs(), k, sorted=False), iters)
    if float(vals.min()) != kth:
        sys.exit(f"torch.topk: smallest selected {float(vals.min())}, expected {kth}")
    nw, nc, idx = timed(lambda: np.argpartition(np.abs(a), a.size - k)[a.size - k:], iters)
    if float(np.abs(a[idx]).min()) != kth:
        sys.exit("numpy argpartition: wrong selection")
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "numpy": np.__version__,
                      "n": int(a.size), "k": k, "iters": iters, "threads": 1,
                      "torch_topk_ms": round(tw * 1e3, 3), "torch_topk_cpu_ms": round(tc * 1e3, 3),
                      "np_argpartition_ms": round(nw * 1e3, 3),
                      "np_argpartition_cpu_ms": round(nc * 1e3, 3)}))


if __name__ == "__main__":
    main()

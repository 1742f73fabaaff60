#!/usr/bin/env python3
"""The per-tensor cost of gradsync.torch's hook path: backward through a
chain of L tiny linear layers (2L gradient tensors), timed without hooks
and with a DistributedOptimizer's hooks (each calls the engine's
grad_ready), passes interleaved, medians, on one rank. Prints one JSON line per
chain length."""
import json
import statistics
import sys
import time

import torch

import gradsync.torch as gs


def chain(layers):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(layers)])


def one_backward(model, opt, x):
    """Times one backward pass (the step and zeroing are outside)."""
    if opt is not None:
        opt.zero_grad()
    else:
        model.zero_grad()
    loss = model(x).sum()
    t0 = time.perf_counter()
    loss.backward()
    t = time.perf_counter() - t0
    if opt is not None:
        opt.step()
    return t


torch.set_num_threads(1)
gs.init()
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
x = torch.randn(1, 2)
for layers in (100, 400):
    plain_model, model = chain(layers), chain(layers)
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                  named_parameters=model.named_parameters(), policy="wfbp")
    plain, hooked = [], []
    # Interleaved, so that both see the same load from other processes.
    for i in range(reps + 20):
        a, b = one_backward(plain_model, None, x), one_backward(model, opt, x)
        if i >= 20:
            plain.append(a)
            hooked.append(b)
    opt.close()
    n = 2 * layers
    p, h = statistics.median(plain), statistics.median(hooked)
    print(json.dumps({"tensors": n, "reps": reps, "plain_s": p, "hooked_s": h,
                      "per_tensor_s": (h - p) / n, "torch": torch.__version__}), flush=True)
gs.shutdown()

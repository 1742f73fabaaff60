"""A short training loop in which one rank fails alone (tests/python/
test_fault.sh): `raise` makes rank 1 raise ValueError at step 3 while the
others train on; `exitN` makes rank 1 call sys.exit(N) there; `none` trains normally (with GRADSYNC_FAULT set by the
caller, rank 1's library call fails instead)."""
import sys

import torch

import gradsync.torch as gs

mode = sys.argv[1]
gs.init()
r = gs.rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                              named_parameters=model.named_parameters(), policy="wfbp")
for step in range(40):
    if mode == "raise" and r == 1 and step == 3:
        raise ValueError("rank 1 failed on purpose at step 3")
    if mode.startswith("exit") and r == 1 and step == 3:
        print(f"rank 1: sys.exit({mode[4:]}) at step 3", flush=True)
        sys.exit(int(mode[4:]))
    opt.zero_grad()
    model(torch.randn(8, 16)).pow(2).mean().backward()
    opt.step()
print(f"rank {r}: finished 40 steps", flush=True)
gs.shutdown()

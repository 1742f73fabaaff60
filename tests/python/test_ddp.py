"""gradsync.torch against PyTorch's DistributedDataParallel (gloo): from
the same initialisation, on the same per-rank data, both give the same
weights after a few SGD steps, up to summation order. Both run in this
process, over the same ranks."""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok

STEPS, BATCH, TOL = 6, 8, 1e-4

gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)
store = gs.broadcast_object(tempfile.mktemp(prefix="gradsync-ddp-test-") if r == 0 else None)
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
dist.init_process_group("gloo", init_method=f"file://{store}", rank=r, world_size=n)


def net():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(6 * 6 * 6, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 10))


torch.manual_seed(11)
ours, theirs = net(), net()
theirs.load_state_dict(ours.state_dict())
ddp = torch.nn.parallel.DistributedDataParallel(theirs)
opt = gs.DistributedOptimizer(torch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9),
                              named_parameters=ours.named_parameters(), warmup_iters=2)
ddp_opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
for step in range(STEPS):
    g = torch.Generator().manual_seed(100 * step + r)
    x, y = torch.randn(BATCH, 1, 8, 8, generator=g), torch.randint(0, 10, (BATCH,), generator=g)
    opt.zero_grad()
    F.cross_entropy(ours(x), y).backward()
    opt.step()
    ddp_opt.zero_grad()
    F.cross_entropy(ddp(x), y).backward()
    ddp_opt.step()
worst = max_rel_diff(list(ours.parameters()), list(theirs.parameters()))
print(f"rank {r}: gradsync.torch vs DDP (gloo), {n} ranks, {STEPS} steps: max relative "
      f"difference {worst:.2e}", flush=True)
check(worst < TOL, f"gradsync.torch and DDP differ by {worst:.2e} (relative), more than {TOL}")
ok(r, "same weights as DDP")
dist.destroy_process_group()
if r == 0:
    os.unlink(store) if os.path.exists(store) else None
gs.shutdown()

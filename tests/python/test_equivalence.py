"""N ranks with batch b each train the same weights as one process with
batch N*b, under every policy: after a few SGD steps (momentum, weight
decay), the largest relative difference of any parameter is at summation
order's level. Every rank computes the one-process reference itself.

Usage: test_equivalence.py [POLICY...]  (default: every policy)"""
import sys

import torch
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok

# dear-overlap: policy "dear" with model=, DeAR's all-gathers and updates in
# the next forward's pre-hooks; auto-overlap: policy "auto" with model=, the
# engine choosing among every plan, dear included, updates in the pre-hooks.
POLICIES = sys.argv[1:] or ["wfbp", "single", "bucket", "mgwfbp", "optimal", "dear",
                            "dear-overlap", "auto", "auto-overlap"]
STEPS, BATCH, TOL = 7, 4, 1e-4


class Net(torch.nn.Module):
    """A small CNN: conv, pool, conv, linear, linear (8 tensors)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * 4 * 4, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def data(step, n):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(n * BATCH, 1, 8, 8, generator=g), torch.randint(0, 10, (n * BATCH,),
                                                                       generator=g)


def sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)


gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)
worst_all = 0.0
for policy in POLICIES:
    torch.manual_seed(3)
    model, ref = Net(), Net()
    ref.load_state_dict(model.state_dict())
    overlap = policy.endswith("-overlap")
    opt = gs.DistributedOptimizer(sgd(model.parameters()), named_parameters=model.named_parameters(),
                                  policy=policy.split("-")[0], warmup_iters=2,
                                  model=model if overlap else None)
    ref_opt = sgd(ref.parameters())
    for step in range(STEPS):
        x, y = data(step, n)
        opt.zero_grad()
        F.cross_entropy(model(x[r * BATCH:(r + 1) * BATCH]), y[r * BATCH:(r + 1) * BATCH]).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    opt.finish()  # *-overlap: the last step's updates wait for a forward
    worst = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    moved = max_rel_diff(list(ref.parameters()), list(Net().parameters()))
    stats = opt.engine_stats()
    opt.close()
    print(f"rank {r}: policy {policy} (chose {stats['chosen']}, {stats['groups']} messages): "
          f"max relative difference {worst:.2e} after {STEPS} steps", flush=True)
    check(moved > 1e-2, "the reference did not train")
    check(stats["iterations"] == STEPS, f"engine iterations {stats['iterations']}")
    check(worst < TOL, f"policy {policy}: {n} ranks x batch {BATCH} differ from 1 rank x batch "
                       f"{n * BATCH} by {worst:.2e} (relative), more than {TOL}")
    worst_all = max(worst_all, worst)
    ok(r, f"equivalence under {policy}")
print(f"rank {r}: max relative difference over every policy: {worst_all:.2e}", flush=True)
gs.shutdown()

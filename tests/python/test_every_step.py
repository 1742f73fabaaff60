"""The parameters are the averaged update after EVERY step, not only after
the last (issue 36, item 0): N ranks with batch b each against one process
stepping on the same N*b samples, plain SGD (no momentum), compared after
each of the first 20 steps under every policy, with and without model=,
compression off, with the engine's default warm-up, so that the steps at
which the engine installs a plan (after the warm-up, at iteration 5) and
checks it (iteration 15) are among those compared. With model= and a plan
whose updates wait for the next forward (dear, auto), finish() applies
them before the comparison, as docs/PYTORCH.md tells a user to before
reading the weights.

Usage: test_every_step.py [POLICY...]  (default: every policy)"""
import sys

import torch
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok

POLICIES = sys.argv[1:] or ["wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"]
STEPS, BATCH, TOL = 20, 16, 2e-5


class Net(torch.nn.Module):
    """A LeNet-like CNN on 28x28 images (10 tensors)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(6, 12, 5)
        self.fc1 = torch.nn.Linear(12 * 5 * 5, 64)
        self.fc2 = torch.nn.Linear(64, 32)
        self.fc3 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))))


def batch(step, n):
    g = torch.Generator().manual_seed(500 + step)
    return torch.randn(n * BATCH, 1, 28, 28, generator=g), torch.randint(0, 10, (n * BATCH,),
                                                                         generator=g)


gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)
for policy in POLICIES:
    for with_model in (False, True):
        torch.manual_seed(11 + r)  # different on every rank: the broadcast must set them
        model, ref = Net(), Net()
        gs.broadcast_parameters(model.state_dict(), root_rank=0)
        ref.load_state_dict(model.state_dict())
        opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                      named_parameters=model.named_parameters(), policy=policy,
                                      model=model if with_model else None)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
        name = f"{policy}{' with model=' if with_model else ''}"
        worst = []
        for step in range(STEPS):
            x, y = batch(step, n)
            opt.zero_grad()
            F.cross_entropy(model(x[r * BATCH:(r + 1) * BATCH]),
                            y[r * BATCH:(r + 1) * BATCH]).backward()
            opt.step()
            opt.finish()  # a no-op unless model= lets the updates wait for a forward
            ref_opt.zero_grad()
            F.cross_entropy(ref(x), y).backward()
            ref_opt.step()
            d = max_rel_diff(list(model.parameters()), list(ref.parameters()))
            worst.append(d)
            check(d < TOL, f"{name}: after step {step + 1} of {STEPS} the parameters differ "
                           f"from one process's on the same {n * BATCH} samples by {d:.2e} "
                           f"(relative), more than {TOL}; steps so far: "
                           + " ".join(f"{v:.1e}" for v in worst))
        stats = opt.engine_stats()
        opt.close()
        check(stats["iterations"] == STEPS, f"{name}: engine iterations {stats['iterations']}")
        check(stats["plans"] >= 2, f"{name}: {stats['plans']} plan(s): the warm-up's end "
                                   f"was not among the steps compared")
        print(f"rank {r}: {name} (chose {stats['chosen']}): largest difference "
              f"{max(worst):.2e} over {STEPS} steps", flush=True)
        ok(r, f"every step under {name}")
gs.shutdown()

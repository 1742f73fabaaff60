"""SyncBatchNorm: batch normalisation over every rank's samples. A CNN with
BatchNorm2d and BatchNorm1d, converted with
SyncBatchNorm.convert_sync_batchnorm, trained 4 steps of SGD with rank r
holding 3 + 2r samples of each global batch, against one process with
plain BatchNorm on the whole global batch: the loss each rank minimises is
its samples' share of the global batch's mean (sum / N x ranks, as
DistributedOptimizer averages), so the two are the same computation. The
parameters and the running statistics after every step, and the outputs
in evaluation, match; plain (unconverted) BatchNorm does not, so the test
can tell. Under wfbp, and DeAR's overlap (dear and auto with model=).
Also: the conversion keeps the same parameter tensors.

Usage: test_syncbn.py"""
import torch
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok

TOL, STEPS = 2e-5, 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(4)
        self.fc1 = torch.nn.Linear(4 * 8 * 8, 16)
        self.bn1 = torch.nn.BatchNorm1d(16, momentum=None)  # a cumulative average
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        x = F.relu(self.bn2(self.conv(x)))
        return self.fc2(F.relu(self.bn1(self.fc1(torch.flatten(x, 1)))))


def batch(step, counts):
    g = torch.Generator().manual_seed(70 + step)
    n = sum(counts)
    return torch.randn(n, 1, 8, 8, generator=g) * 2 + 1, torch.randint(0, 3, (n,), generator=g)


def states(m):
    return [t for _, t in sorted(m.state_dict().items()) if t.dtype.is_floating_point]


def run(convert, policy="wfbp", with_model=False):
    r, n = gs.rank(), gs.size()
    counts = [3 + 2 * q for q in range(n)]
    first = sum(counts[:r])
    torch.manual_seed(9)
    model, ref = Net(), Net()
    ref.load_state_dict(model.state_dict())
    params_before = [id(p) for p in model.parameters()]
    if convert:
        model = gs.SyncBatchNorm.convert_sync_batchnorm(model)
        check(isinstance(model.bn2, gs.SyncBatchNorm) and isinstance(model.bn1, gs.SyncBatchNorm),
              "convert_sync_batchnorm left a BatchNorm")
        check([id(p) for p in model.parameters()] == params_before,
              "convert_sync_batchnorm replaced the parameter tensors")
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                  named_parameters=model.named_parameters(), policy=policy,
                                  model=model if with_model else None)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    N = sum(counts)
    worst = 0.0
    for step in range(STEPS):
        x, y = batch(step, counts)
        mine = slice(first, first + counts[r])
        opt.zero_grad()
        loss = F.cross_entropy(model(x[mine]), y[mine], reduction="sum") * n / N
        loss.backward()
        opt.step()
        opt.finish()  # DeAR's overlap: the update before the comparison
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        worst = max(worst, max_rel_diff(list(model.parameters()), list(ref.parameters())),
                    max_rel_diff(states(model), states(ref)))
    model.eval()
    ref.eval()
    x, _ = batch(99, counts)
    worst = max(worst, max_rel_diff([model(x)], [ref(x)]))
    opt.close()
    return worst


gs.init()
r = gs.rank()
torch.set_num_threads(1)
# wfbp; and DeAR's overlap, whose all-gathers and updates run in the
# modules' pre-hooks while SyncBatchNorm's all-reduces run beside them.
for policy, with_model in (("wfbp", False), ("dear", True), ("auto", True)):
    d = run(True, policy, with_model)
    what = f"{policy}{' with model=' if with_model else ''}"
    check(d < TOL, f"SyncBatchNorm on {gs.size()} ranks ({what}): parameters, running "
                   f"statistics or evaluation outputs differ from one process's on the global "
                   f"batch by {d:.2e} (relative), more than {TOL}")
    ok(r, f"SyncBatchNorm ({what}) equals one process's BatchNorm on the global batch "
          f"({d:.1e})")
if gs.size() > 1:
    d = run(convert=False)
    check(d > 100 * TOL, f"plain BatchNorm came within {d:.2e} of the global batch's: the "
                         f"test cannot tell SyncBatchNorm from it")
    ok(r, f"plain BatchNorm differs from the global batch's ({d:.1e}): the test can tell")

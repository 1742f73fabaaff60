"""Ranks whose models differ: every rank raises GradsyncError (status
MISMATCH) at the first step, none hangs. Case 1: rank 1 has one more layer
(the parameter count differs); case 2: rank n-1's first layer is wider (a
shape differs, caught by the engine's registration check); case 3: rank 0
names a parameter differently. After the mismatch, every later call of
the optimizer repeats it (a tester saw "zero_grad() between backward() and
step()" instead)."""
import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
check(n >= 2, "needs 2 ranks or more")


def first_step(model, prefix=""):
    """The first step of a DistributedOptimizer must raise on this rank."""
    named = [(prefix + k, p) for k, p in model.named_parameters()]
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                  named_parameters=named, policy="wfbp")
    model(torch.randn(2, 4)).sum().backward()
    e = raises(gradsync.GradsyncError, opt.step)
    # The next iteration repeats the failure, with its status, on every rank.
    text = str(e).rsplit(" (", 1)[0].split(": ", 1)[1]
    for call in (opt.zero_grad, opt.step, opt.synchronize):
        again = raises(gradsync.GradsyncError, call, contains="failed at an earlier step")
        check(again.status == e.status and text in str(again), f"{call.__name__}: {again}")
    raises(gradsync.GradsyncError, lambda: model(torch.randn(2, 4)).sum().backward(),
           contains=text)
    opt.close()
    return e


layers = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)]
if r == 1:
    layers.insert(1, torch.nn.Linear(4, 4))
e = first_step(torch.nn.Sequential(*layers))
check(e.status == "MISMATCH" and "different numbers of parameters" in str(e), str(e))
print(f"rank {r}: caught: {e}", flush=True)
ok(r, "parameter count differs")

wide = 5 if r == n - 1 else 4
e = first_step(torch.nn.Sequential(torch.nn.Linear(4, wide), torch.nn.Linear(wide, 2)))
check(e.status == "MISMATCH", str(e))
print(f"rank {r}: caught: {e}", flush=True)
ok(r, "parameter shape differs")

e = first_step(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)),
               prefix="model." if r == 0 else "")
check(e.status == "MISMATCH", str(e))
print(f"rank {r}: caught: {e}", flush=True)
ok(r, "parameter name differs")
print(f"rank {r}: every mismatch raised", flush=True)

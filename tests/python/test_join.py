"""join(): uneven inputs (DDP's join(), Horovod's hvd.join()). Rank r has
its own number of batches (rank 0 none at all in one case); inside
`with opt.join():` the ranks whose data ended exchange zeros until the last
one ends. Checked against one process that steps, at each step, on the
samples of the ranks that still have data (SGD with momentum, so the
optimizer state counts): the parameters after every step on every rank that
stepped, and after join() on every rank, bitwise the same on every rank
(the early ones take the last one's parameters and momentum); then a normal
epoch after it. Also: even inputs under join(), a BatchNorm model's buffers
made equal, and DeAR's overlap (model= with dear or auto), whose steps
inside join() update at once.

Usage: test_join.py"""
import torch
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok, raises

BATCH, TOL = 8, 2e-5


class Net(torch.nn.Module):
    def __init__(self, bn=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 32)
        self.bn = torch.nn.BatchNorm1d(32) if bn else torch.nn.Identity()
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


def data(r, k):
    """Rank r's batch k (the same wherever it is made)."""
    g = torch.Generator().manual_seed(1000 * r + k)
    return torch.randn(BATCH, 20, generator=g), torch.randint(0, 5, (BATCH,), generator=g)


def same_everywhere(tensors):
    """Every rank holds bitwise the same tensors."""
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    every = gs.allgather(flat.unsqueeze(0))
    return all(torch.equal(every[0], every[q]) for q in range(every.shape[0]))


def uneven(name, counts, policy, model_arg=False, then_even=True, throw=False, world=False):
    """counts[q] batches on rank q inside join(); throw and world: join()'s
    throw_on_early_termination and divide_by_initial_world_size."""
    r, n = gs.rank(), gs.size()
    torch.manual_seed(7 + r)
    model, ref = Net(), Net()
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    ref.load_state_dict(model.state_dict())
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                  named_parameters=model.named_parameters(), policy=policy,
                                  model=model if model_arg else None)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    # With throw, the steps every rank takes; the next one raises.
    steps = min(counts) if throw else max(counts)
    # One process: at step k, the samples of the ranks with a batch k (the
    # sum over them divided by the world size with world=True).
    ref_after = []
    for k in range(steps):
        xs, ys = zip(*[data(q, k) for q in range(n) if k < counts[q]])
        ref_opt.zero_grad()
        scale = len(xs) / n if world else 1.0
        (scale * F.cross_entropy(ref(torch.cat(xs)), torch.cat(ys))).backward()
        ref_opt.step()
        ref_after.append([p.detach().clone() for p in ref.parameters()])
    raised, k = None, None
    expect = throw and min(counts) < max(counts)
    try:
        with opt.join(throw_on_early_termination=throw, divide_by_initial_world_size=world):
            for k in range(counts[r]):
                x, y = data(r, k)
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
                d = max_rel_diff(list(model.parameters()), ref_after[k])
                check(d < TOL, f"{name}: rank {r} after its step {k + 1} of {counts[r]}: the "
                               f"parameters differ from one process's by {d:.2e}")
    except gs.GradsyncError as e:
        if not expect:
            raise
        raised = (k if counts[r] > steps else None, e)
    if expect:
        # Every rank raises: those with more data at their step steps + 1,
        # those whose data ended at join()'s exit.
        check(raised is not None, f"{name}: rank {r} did not raise")
        at, e = raised
        check(at == (steps if counts[r] > steps else None),
              f"{name}: rank {r} raised at its step {at} (expected "
              f"{steps if counts[r] > steps else 'the exit'})")
        ended = [q for q in range(n) if counts[q] == steps]
        check(e.status == "JOINED" and f"{ended[0]}" in str(e),
              f"{name}: rank {r}: the error does not say who ended: {e}")
    d = max_rel_diff(list(model.parameters()), ref_after[-1])
    check(d < TOL, f"{name}: rank {r} after join() ({counts[r]} of {steps} steps its own): "
                   f"the parameters differ from one process's after {steps} steps by {d:.2e}")
    check(same_everywhere(list(model.parameters())),
          f"{name}: after join() the ranks' parameters are not bitwise the same")
    mom = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    ref_mom = [ref_opt.state[p]["momentum_buffer"] for p in ref.parameters()]
    d = max_rel_diff(mom, ref_mom)
    check(d < TOL, f"{name}: rank {r}: after join() the momentum differs from one "
                   f"process's by {d:.2e}")
    if then_even:
        # A normal epoch after it: every rank steps, the average over all.
        for k in range(2):
            xs, ys = zip(*[data(q, 100 + k) for q in range(n)])
            ref_opt.zero_grad()
            F.cross_entropy(ref(torch.cat(xs)), torch.cat(ys)).backward()
            ref_opt.step()
            x, y = data(r, 100 + k)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        opt.finish()  # under DeAR's overlap the last update waits for a forward
        d = max_rel_diff(list(model.parameters()), list(ref.parameters()))
        check(d < TOL, f"{name}: rank {r}: two even steps after join(): {d:.2e} off")
    opt.close()
    ok(r, name)


gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)
counts = [3 + 2 * q for q in range(n)]  # 3, 5, 7: the last rank steps alone at the end
for policy in ("wfbp", "mgwfbp", "auto"):
    uneven(f"join, {policy}, batches {counts}", counts, policy)
uneven(f"join, rank 0 without data, batches {[0] + counts[1:]}", [0] + counts[1:], "wfbp")
uneven("join, even batches", [4] * n, "wfbp", then_even=False)
# DDP's keywords: the sum over the stepping ranks divided by the world size;
# every rank raising where the first data ends, none applying that step, and
# training on after it.
uneven(f"join(divide_by_initial_world_size=True), batches {counts}", counts, "wfbp", world=True)
for policy, model_arg in (("wfbp", False), ("mgwfbp", False), ("dear", True)):
    uneven(f"join(throw_on_early_termination=True), {policy}"
           f"{', model=' if model_arg else ''}, batches {counts}", counts, policy,
           model_arg=model_arg, throw=True)
uneven(f"join(throw_on_early_termination=True), even batches", [3] * n, "wfbp", throw=True)
# enable=False: join() does nothing (even inputs), and its keywords are checked.
torch.manual_seed(9)
model = Net()
gs.broadcast_parameters(model.state_dict(), root_rank=0)
opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                              named_parameters=model.named_parameters(), policy="wfbp")
with opt.join(enable=False):
    check(not opt._gs_joining, "join(enable=False) joined")
    x, y = data(r, 0)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
raises(TypeError, lambda: opt.join(throw_on_early_termination=1).__enter__(),
       contains="throw_on_early_termination=1")
check(same_everywhere(list(model.parameters())), "join(enable=False): the ranks differ")
opt.close()
ok(r, "join(enable=False) and its keywords' checks")
uneven(f"join with model= (policy single), batches {counts[::-1]}", counts[::-1], "single",
       model_arg=True)

# A BatchNorm model: its buffers come from the rank that stepped last.
torch.manual_seed(3)
model = Net(bn=True)
gs.broadcast_parameters(model.state_dict(), root_rank=0)
opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                              named_parameters=model.named_parameters(), policy="wfbp",
                              model=model)
with opt.join():
    for k in range(2 + r):
        x, y = data(r, k)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
check(same_everywhere(list(model.buffers()) + list(model.parameters())),
      "join with BatchNorm: the running statistics differ between ranks after join()")
opt.close()
ok(r, "join: BatchNorm's buffers the same on every rank")

# DeAR's overlap (model= with dear or auto): inside join() each step waits
# for its all-gathers and updates at once; the same results.
for policy in ("dear", "auto"):
    uneven(f"join with model= (policy {policy}: DeAR's overlap), batches {counts}", counts,
           policy, model_arg=True)

# Two join()s in a row on one optimizer, the second with no step on any
# rank (an epoch without data): nothing is left over from the first.
for policy, model_arg in (("wfbp", False), ("dear", True)):
    torch.manual_seed(5)
    model = Net()
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                  named_parameters=model.named_parameters(), policy=policy,
                                  model=model if model_arg else None)
    for epoch, steps in enumerate((1 + r, 0)):
        with opt.join():
            for k in range(steps):
                x, y = data(r, 10 * epoch + k)
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
    opt.finish()
    check(same_everywhere(list(model.parameters())),
          f"two join()s ({policy}): the ranks' parameters differ")
    opt.close()
    ok(r, f"join: twice, the second without steps ({policy}{', model=' if model_arg else ''})")

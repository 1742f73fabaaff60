"""What a Horovod or DDP script does when ported, and gradsync.torch got
wrong until 2026-12-06 (each case failed then: ranks trained apart, or the
job stalled until the watchdog):
  1. a scheduler made on the optimizer before wrapping, then
     broadcast_optimizer_state: every rank follows the schedule (the
     non-root ranks' load_state_dict used to give the wrapper new group
     dicts the scheduler did not reach);
  2. wrapping an optimizer that has state (a checkpoint loaded into it)
     with a scheduler on it: the schedule and the state carry over;
  3. a second DistributedOptimizer over the same parameters, the first
     dropped without close(): the first is closed with a warning, and
     training goes on as one process;
  4. a parameter frozen when wrapped and unfrozen later: STATE on every
     rank, nothing applied; wrapping again trains it;
  5. nn.Embedding(sparse=True): its gradient is averaged dense (Horovod's
     sparse_as_dense);
  6. broadcast_parameters of bool and int8 buffers; a state dict with a
     key one rank lacks raises MISMATCH on every rank;
  7. gradsync.elastic.run on a fresh start gives every rank rank 0's
     model and optimizer state (Horovod's state.sync());
  8. wrapping a DistributedOptimizer again is a TypeError;
  9. clipping between backward() and step() without synchronize() (a DDP
     script's habit) raced with the averaging: STATE on every rank, nothing
     applied; with synchronize() and skip_synchronize(), one process's.
Numerics are against one process stepping on the ranks' batches put
together (the mean of the ranks' losses).

Usage: test_porting.py DIR (a directory every rank can write)"""
import copy
import os
import sys
import warnings

import torch
import torch.nn as nn

import gradsync
import gradsync.torch as gs
from common import check, max_rel_diff, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
TOL = 2e-5
DIR = sys.argv[1]


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def build(seed=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))


def ref_step(m, opt, s):
    opt.zero_grad()
    (sum(loss_fn(m, *batch(s, q)) for q in range(n)) / n).backward()
    opt.step()


def same_on_every_rank(tensors):
    flat = torch.cat([t.detach().reshape(-1).double() for t in tensors])
    every = gs.allgather(flat.unsqueeze(0))
    return all(torch.equal(every[0], every[q]) for q in range(n))


# 1. Horovod's order: optimizer, scheduler on it, wrap, broadcasts, train.
ref = build()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
net = build(seed=3 + r)  # each rank its own initialisation, as usual
base = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(base, step_size=2, gamma=0.5)
opt = gs.DistributedOptimizer(base, named_parameters=net.named_parameters(), policy="wfbp")
gs.broadcast_parameters(net.state_dict(), root_rank=0)
gs.broadcast_optimizer_state(opt, root_rank=0)
for s in range(7):
    ref_step(ref, ref_opt, s)
    ref_sched.step()
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
    sched.step()
lrs = gs.allgather(torch.tensor([opt.param_groups[0]["lr"]], dtype=torch.float64)).tolist()
check(len(set(lrs)) == 1 and abs(lrs[0] - ref_opt.param_groups[0]["lr"]) < 1e-12,
      f"the learning rate by rank {lrs}, one process's {ref_opt.param_groups[0]['lr']}")
d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
check(d < TOL, f"a scheduler made before wrapping: off one process's by {d:.3g}")
check(same_on_every_rank(list(net.parameters())), "a scheduler made before wrapping: "
                                                  "the ranks differ")
opt.close()
ok(r, "a scheduler made before wrapping, broadcast_optimizer_state: every rank follows it")

# 2. A checkpoint loaded into the plain optimizer, a scheduler on it, then
# wrapped: the momentum and the schedule carry over.
ref = build()
ref_opt = torch.optim.Adam(ref.parameters(), lr=0.02)
ref_sched = torch.optim.lr_scheduler.ExponentialLR(ref_opt, gamma=0.7)
for s in range(3):
    ref_step(ref, ref_opt, s)
    ref_sched.step()
ckpt = copy.deepcopy({"model": ref.state_dict(), "opt": ref_opt.state_dict(),
                      "sched": ref_sched.state_dict()})
for s in range(3, 7):
    ref_step(ref, ref_opt, s)
    ref_sched.step()
net = build(seed=50)
net.load_state_dict(ckpt["model"])
base = torch.optim.Adam(net.parameters(), lr=0.02)
base.load_state_dict(ckpt["opt"])
sched = torch.optim.lr_scheduler.ExponentialLR(base, gamma=0.7)
sched.load_state_dict(ckpt["sched"])
opt = gs.DistributedOptimizer(base, named_parameters=net.named_parameters(), policy="single")
check(opt.state is base.state, "the wrapper does not share the wrapped optimizer's state")
for s in range(3, 7):
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
    sched.step()
d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
check(d < TOL, f"resumed into the plain optimizer, then wrapped: off one process's by {d:.3g}")
check(abs(opt.param_groups[0]["lr"] - ref_opt.param_groups[0]["lr"]) < 1e-12,
      f"the schedule: lr {opt.param_groups[0]['lr']} against {ref_opt.param_groups[0]['lr']}")
opt.close()
ok(r, "an optimizer with state and a scheduler, wrapped: both carry over")

# 3. Switching optimizers between phases without close(): the first is
# closed (with a warning) when the second is made; as one process.
ref = build()
ref_a = torch.optim.Adam(ref.parameters(), lr=0.01)
ref_b = torch.optim.SGD(ref.parameters(), lr=0.05)
net = build()
opt = gs.DistributedOptimizer(torch.optim.Adam(net.parameters(), lr=0.01),
                              named_parameters=net.named_parameters(), policy="wfbp")
for s in range(2):
    ref_step(ref, ref_a, s)
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
first = opt
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.05),
                                  named_parameters=net.named_parameters(), policy="wfbp")
check(any("not closed" in str(w.message) for w in caught),
      f"no warning when the earlier optimizer was closed: {[str(w.message) for w in caught]}")
check(first._gs_closed, "the earlier DistributedOptimizer is still open")
del first
for s in range(2, 5):
    ref_step(ref, ref_b, s)
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
check(d < TOL, f"a second optimizer without close(): off one process's by {d:.3g}")
opt.close()
ok(r, "a second DistributedOptimizer over the same parameters closes the first")

# 4. Frozen when wrapped, unfrozen later: STATE, nothing applied; wrapped
# again, trained as one process.
ref, net = build(), build()
for m in (ref, net):
    m[0].requires_grad_(False)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
base = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
opt = gs.DistributedOptimizer(base, named_parameters=net.named_parameters(), policy="wfbp")
for s in range(2):
    ref_step(ref, ref_opt, s)
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
for m in (ref, net):
    m[0].requires_grad_(True)
before = [p.detach().clone() for p in net.parameters()]
opt.zero_grad()
loss_fn(net, *batch(2, r)).backward()
e = raises(gradsync.GradsyncError, opt.step, contains="'0.weight' has a gradient")
check(e.status == "STATE", f"status {e.status}")
check(all(torch.equal(a, b) for a, b in zip(before, net.parameters())),
      "a refused step moved the parameters")
opt = gs.DistributedOptimizer(base, named_parameters=net.named_parameters(), policy="wfbp")
for s in range(2, 5):
    ref_step(ref, ref_opt, s)
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
check(d < TOL, f"unfrozen, then wrapped again: off one process's by {d:.3g}")
opt.close()
ok(r, "a parameter unfrozen after wrapping: STATE on every rank; wrapped again, averaged")

# 5. nn.Embedding(sparse=True): averaged dense.
class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(9)
        self.emb = nn.Embedding(20, 4, sparse=True)
        self.out = nn.Linear(4, 3)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))


def ids_of(s, rank):
    g = torch.Generator().manual_seed(77 * s + rank)
    return torch.randint(0, 20, (8, 3), generator=g), torch.randn(8, 3, generator=g)


ref, net = Bag(), Bag()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                              named_parameters=net.named_parameters(), policy="wfbp")
for s in range(4):
    ref_opt.zero_grad()
    (sum(loss_fn(ref, *ids_of(s, q)) for q in range(n)) / n).backward()
    ref_opt.step()
    opt.zero_grad()
    loss_fn(net, *ids_of(s, r)).backward()
    opt.step()
d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
check(d < TOL, f"a sparse embedding's gradient: off one process's by {d:.3g}")
opt.close()
ok(r, "nn.Embedding(sparse=True): averaged as a dense gradient")

# 6. bool and int8 buffers broadcast; a key one rank lacks is a MISMATCH.
m = nn.Linear(3, 3)
m.register_buffer("mask", torch.tensor([r % 2 == 0, True, r == 1]))
m.register_buffer("q", torch.tensor([[r, -r], [3, 4]], dtype=torch.int8))
gs.broadcast_parameters(m.state_dict(), root_rank=0)
check(m.mask.tolist() == [True, True, False] and m.q.tolist() == [[0, 0], [3, 4]],
      f"bool/int8 buffers after the broadcast: {m.mask.tolist()}, {m.q.tolist()}")
sd = dict(m.state_dict())
if r == n - 1:
    sd["extra"] = torch.zeros(2)
e = raises(gradsync.GradsyncError, gs.broadcast_parameters, sd, contains="'extra'")
check(e.status == "MISMATCH", f"status {e.status}")
ok(r, "broadcast_parameters: bool and int8 buffers; a key one rank lacks is a MISMATCH")

# 7. elastic.run's fresh start: rank 0's model and optimizer state.
net = build(seed=100 + r)
opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                              named_parameters=net.named_parameters(), policy="wfbp")
state = gs.elastic.TorchState(net, opt, dir=os.path.join(DIR, "elastic"), epoch=r)


@gs.elastic.run
def train(state):
    return [p.detach().clone() for p in state.model.parameters()], state.epoch


params, epoch = train(state)
check(same_on_every_rank(params), "elastic.run's fresh start: the ranks' models differ")
check(epoch == 0, f"elastic.run's fresh start: rank {r} has epoch {epoch}, rank 0's is 0")
opt.close()
ok(r, "elastic.run on a fresh start: every rank has rank 0's state")

# 8. Wrapping twice.
opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1))
raises(TypeError, gs.DistributedOptimizer, opt, contains="already")
opt.close()
ok(r, "wrapping a DistributedOptimizer again is a TypeError")

# 9. A DDP script's clipping between backward() and step(), without
# synchronize(): it races with the averaging. STATE on every rank, nothing
# applied (wfbp, and DeAR's overlap with model=); with synchronize() and
# skip_synchronize(), as one process.
for pol, with_model in (("wfbp", False), ("dear", True)):
    ref, net = build(), build()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                  named_parameters=net.named_parameters(), policy=pol,
                                  model=net if with_model else None, warmup_iters=1)
    for s in range(3):  # the engine made and planned
        ref_step(ref, ref_opt, s)
        opt.zero_grad()
        loss_fn(net, *batch(s, r)).backward()
        opt.step()
    opt.finish()
    before = [p.detach().clone() for p in net.parameters()]
    opt.zero_grad()
    loss_fn(net, *batch(3, r)).backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 0.01)
    e = raises(gradsync.GradsyncError, opt.step, contains="changed in place")
    check(e.status == "STATE", f"status {e.status}")
    opt.finish()
    check(all(torch.equal(a, b) for a, b in zip(before, net.parameters())),
          f"{pol}: the refused step moved the parameters")
    for s in range(3, 5):
        ref_opt.zero_grad()
        (sum(loss_fn(ref, *batch(s, q)) for q in range(n)) / n).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        ref_opt.step()
        opt.zero_grad()
        loss_fn(net, *batch(s, r)).backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        with opt.skip_synchronize():
            opt.step()
    opt.finish()
    d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
    check(d < TOL, f"{pol}: clipping after synchronize(): off one process's by {d:.3g}")
    opt.close()
    ok(r, f"clipping between backward() and step() without synchronize(): STATE ({pol}); "
          f"with it, as one process")

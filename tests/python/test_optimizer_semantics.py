"""DistributedOptimizer keeps torch.optim's semantics where users rely on
them (each case failed before 2026-12-06, ranks diverging or weights moving
silently):
  1. modules whose forward pre-hooks compute the weight from the parameters
     (weight_norm, pruning's mask) under DeAR's overlap (policy dear or auto
     with model=): the weights equal one process's on the global batch;
  2. step(closure), SGD's and LBFGS's (which calls the closure again): every
     backward of the closure is averaged, the ranks stay equal and equal one
     process's;
  3. add_param_group() before the first step: the group is averaged; after
     it: a STATE error, nothing changed;
  4. the wrapped optimizer's defaults survive the wrapping (a group added
     later takes them);
  5. parameters no rank computed a gradient for (an unused head, heads used
     in turns, a layer frozen after the optimizer was built) move as in one
     process: with zeros after zero_grad(), not at all after
     zero_grad(set_to_none=True) or before their first gradient;
  6. named_parameters as a dict; a malformed one is a TypeError naming it.
Each case compares with one process stepping on the ranks' batches put
together (the mean of the ranks' losses)."""

import copy

import torch
import torch.nn as nn
import torch.nn.utils.prune

import gradsync
import gradsync.torch as gs
from common import check, max_rel_diff, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
TOL = 1e-5


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def reference(build, make_opt, steps, closure_style=False):
    """One process on a model build() makes: the mean over the ranks'
    losses is the loss of the global batch (every rank's batch is the same
    size)."""
    ref = build()
    opt = make_opt(ref)
    for s in range(steps):
        def closure():
            opt.zero_grad()
            loss = sum(loss_fn(ref, *batch(s, q)) for q in range(n)) / n
            loss.backward()
            return loss
        if closure_style:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return ref


def same_on_every_rank(model, what):
    for k, v in model.state_dict().items():
        check(torch.equal(v, gs.broadcast(v, 0)), f"{what}: ranks differ in {k}")


# 1. weight_norm and pruning under DeAR's overlap.
for pol in ("dear", "auto"):
    for kind in ("weight_norm", "prune"):
        def build():
            torch.manual_seed(3)
            m = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
            if kind == "weight_norm":
                nn.utils.weight_norm(m[0])
            else:
                torch.nn.utils.prune.l1_unstructured(m[2], "weight", amount=0.4)
            return m
        make = lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)  # noqa: E731
        want = reference(build, make, 6)
        net = build()
        opt = gs.DistributedOptimizer(make(net), named_parameters=net.named_parameters(),
                                      policy=pol, model=net, warmup_iters=1)
        for s in range(6):
            opt.zero_grad()
            loss_fn(net, *batch(s, r)).backward()
            opt.step()
        opt.finish()
        d = max_rel_diff(list(net.parameters()), list(want.parameters()))
        check(d < TOL, f"{pol} with {kind}: weights off one process's by {d:.3g}")
        same_on_every_rank(net, f"{pol} with {kind}")
        opt.close()
        ok(r, f"{pol} with model= and {kind}'s pre-hook: one process's weights")

# 2. step(closure): SGD (closure once) and LBFGS (again and again).
for name, make, steps in (
        ("SGD", lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.5), 4),
        ("LBFGS", lambda m: torch.optim.LBFGS(m.parameters(), lr=0.5, max_iter=4), 2)):
    for pol in ("wfbp", "single", "auto"):
        def build():
            torch.manual_seed(4)
            return nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3))
        want = reference(build, make, steps, closure_style=True)
        net = build()
        opt = gs.DistributedOptimizer(make(net), named_parameters=net.named_parameters(),
                                      policy=pol, warmup_iters=1)
        for s in range(steps):
            def closure():
                opt.zero_grad()
                loss = loss_fn(net, *batch(s, r))
                loss.backward()
                return loss
            opt.step(closure)
        d = max_rel_diff(list(net.parameters()), list(want.parameters()))
        check(d < 1e-4, f"{name} step(closure) under {pol}: off one process's by {d:.3g}")
        same_on_every_rank(net, f"{name} step(closure) under {pol}")
        opt.close()
    ok(r, f"{name}.step(closure): every closure's gradients averaged")

# 3 and 4. add_param_group before the first step; the defaults kept.
def build5():
    torch.manual_seed(5)
    return nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 3))


net = build5()
inner = torch.optim.Adam(net[0].parameters(), lr=0.02, betas=(0.5, 0.9), weight_decay=0.01)
opt = gs.DistributedOptimizer(inner, policy="wfbp")
check(opt.defaults == inner.defaults, f"defaults {opt.defaults} != {inner.defaults}")
opt.add_param_group({"params": net[2].parameters()})
check(opt.param_groups[1]["betas"] == (0.5, 0.9) and opt.param_groups[1]["lr"] == 0.02,
      f"the added group did not take the defaults: {opt.param_groups[1]}")


def make_adam(m):
    o = torch.optim.Adam(m[0].parameters(), lr=0.02, betas=(0.5, 0.9), weight_decay=0.01)
    o.add_param_group({"params": m[2].parameters()})
    return o


want = reference(build5, make_adam, 4)
for s in range(4):
    opt.zero_grad()
    loss_fn(net, *batch(s, r)).backward()
    opt.step()
d = max_rel_diff(list(net.parameters()), list(want.parameters()))
check(d < TOL, f"add_param_group: off one process's by {d:.3g}")
same_on_every_rank(net, "add_param_group")
extra = nn.Linear(2, 2)
raises(gradsync.GradsyncError, opt.add_param_group, {"params": extra.parameters()},
       contains="after the first step")
check(len(opt.param_groups) == 2, "a refused group stayed in param_groups")
opt.close()
ok(r, "add_param_group before the first step is averaged; after it refused; defaults kept")

# 5. No rank's gradient: an unused head, a weight frozen after three steps,
# and two heads used in turns (a multi-task model), under AdamW's weight
# decay and moments and SGD's momentum: exactly as one process, with
# zero_grad() (torch 1.x: zeros in place, which decay and moments act on)
# and with zero_grad(set_to_none=True) (None: the optimizer skips them).
# Until 2026-12-06 a parameter some earlier step had a gradient for was
# skipped too, 1e-2 off one process after 6 steps.
class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.body, self.a, self.b = nn.Linear(6, 3), nn.Linear(3, 3), nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)

    def forward(self, x, s):
        return (self.a if s % 2 == 0 else self.b)(torch.tanh(self.body(x)))


def heads_loss(m, s, rank):
    x, y = batch(s, rank)
    return ((m(x, s) - y) ** 2).mean()


for make_name, make in (
        ("AdamW", lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
        ("SGD", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01))):
    for to_none in (False, True):
        ref, net = Heads(), Heads()
        ref_opt = make(ref.parameters())
        opt = gs.DistributedOptimizer(make(net.parameters()),
                                      named_parameters=net.named_parameters(), policy="wfbp")
        for s in range(6):
            for m in (ref, net):
                if s == 3:
                    m.body.weight.requires_grad_(False)
            ref_opt.zero_grad(set_to_none=to_none)
            (sum(heads_loss(ref, s, q) for q in range(n)) / n).backward()
            ref_opt.step()
            opt.zero_grad(set_to_none=to_none)
            heads_loss(net, s, r).backward()
            opt.step()
        d = max_rel_diff(list(net.parameters()), list(ref.parameters()))
        check(d < TOL, f"{make_name}, zero_grad(set_to_none={to_none}): parameters without a "
                       f"gradient on any rank: off one process's by {d:.3g}")
        for k, v in net.unused.state_dict().items():
            check(torch.equal(v, ref.unused.state_dict()[k]), f"the unused head's {k} moved")
        same_on_every_rank(net, "unused parameters")
        opt.close()
        ok(r, f"parameters without a gradient on any rank ({make_name}, "
              f"set_to_none={to_none}): as one process")

# 6. A malformed named_parameters.
head = nn.Linear(3, 3)
raises(TypeError, gs.DistributedOptimizer, torch.optim.SGD(head.parameters(), lr=0.1),
       named_parameters=[head.weight, head.bias], contains="(name, parameter) pairs")
ok(r, "named_parameters: a dict works, a list of tensors is a TypeError")
print(f"rank {r}: every semantics case passed", flush=True)

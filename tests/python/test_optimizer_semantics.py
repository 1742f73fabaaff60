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
  5. parameters no rank computed a gradient for (an unused head, a layer
     frozen after the optimizer was built) are not moved by weight decay or
     Adam's moments, as in torch and DDP;
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

# 5. No rank's gradient: an unused head, and a weight frozen after three
# steps, are not moved by AdamW's weight decay and moments.
torch.manual_seed(6)
body, head = nn.Linear(6, 3), nn.Linear(3, 3)
opt = gs.DistributedOptimizer(
    torch.optim.AdamW(list(body.parameters()) + list(head.parameters()), lr=0.01,
                      weight_decay=0.1),
    named_parameters={**{"body." + k: v for k, v in body.named_parameters()},
                      **{"head." + k: v for k, v in head.named_parameters()}},
    policy="wfbp")
head0 = copy.deepcopy(head.state_dict())
for s in range(6):
    if s == 3:
        body.weight.requires_grad_(False)
        frozen = body.weight.detach().clone()
    opt.zero_grad()
    loss_fn(body, *batch(s, r)).backward()
    opt.step()
check(torch.equal(body.weight, frozen), "a weight frozen after the optimizer moved")
for k, v in head.state_dict().items():
    check(torch.equal(v, head0[k]), f"the unused head's {k} moved")
check(not torch.equal(body.bias, gs.broadcast(torch.zeros(3), 0)), "the body did not train")
same_on_every_rank(body, "unused parameters")
opt.close()
ok(r, "parameters without a gradient on any rank are left alone")

# 6. A malformed named_parameters.
raises(TypeError, gs.DistributedOptimizer, torch.optim.SGD(head.parameters(), lr=0.1),
       named_parameters=[head.weight, head.bias], contains="(name, parameter) pairs")
ok(r, "named_parameters: a dict works, a list of tensors is a TypeError")
print(f"rank {r}: every semantics case passed", flush=True)

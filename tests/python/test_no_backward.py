"""DistributedOptimizer when ranks' backward passes differ (found by a
tester: a rank that ran no backward pass in an iteration returned from
step() at once while the others waited for it until the watchdog ended the
job). A rank without data contributes zeros for every parameter, the first
iteration included, and every rank gets the others' gradients / n; the
iterations after it are plain ones again. Also: a gradient replaced by a new
tensor after backward() raises, naming the parameter, instead of being
dropped silently; one assigned to a parameter backward did not reach is
averaged. Runs with a small GRADSYNC_TIMEOUT: a hang fails by the watchdog."""
import copy

import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
check(n >= 2, "needs 2 ranks or more")


def local_grads(m, x):
    """This rank's own gradients, from a copy without hooks (the engine
    averages p.grad in place as soon as a hook hands it over)."""
    shadow = copy.deepcopy(m)
    shadow.zero_grad()
    if x is not None:
        shadow(x).sum().backward()
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
            for p in shadow.parameters()]


for policy, overlap in (("wfbp", False), ("single", False), ("dear", True)):
    torch.manual_seed(5)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    o = gs.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                named_parameters=m.named_parameters(), policy=policy,
                                model=m if overlap else None, warmup_iters=1)
    for it in range(6):
        # Iterations 0 and 3: only rank 0 has data (0: before the engine
        # exists); the others are plain.
        torch.manual_seed(100 * it + r)
        x = torch.randn(3, 4)
        has_data = r == 0 or it not in (0, 3)
        want = [gs.allreduce(g, op=gs.Sum) / n for g in local_grads(m, x if has_data else None)]
        o.zero_grad()
        if has_data:
            m(x).sum().backward()
        if overlap:
            o.synchronize()  # waits for the all-gathers: p.grad is the average
            grads = [p.grad.clone() for p in m.parameters()]
            with o.skip_synchronize():
                o.step()
        else:
            o.step()
            grads = [p.grad.clone() for p in m.parameters()]
        for p_, (g, w) in enumerate(zip(grads, want)):
            check(torch.allclose(g, w, rtol=1e-5, atol=1e-6),
                  f"{policy} iteration {it} parameter {p_}: {g} != {w}")
    o.finish()
    for k, v in m.state_dict().items():
        check(torch.equal(v, gs.broadcast(v, 0)), f"{policy}: ranks' weights differ in {k}")
    o.close()
    ok(r, f"{policy}{' with model=' if overlap else ''}: a rank without backward sends zeros")

# step() twice without backward in between: the second exchanges zeros on
# every rank alike (a rank cannot know whether the others computed), and
# synchronize() then step() exchanges once.
torch.manual_seed(6)
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
o = gs.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                            named_parameters=m.named_parameters(), policy="wfbp")
for it in range(2):
    o.zero_grad()
    m(torch.randn(3, 4)).sum().backward()
    o.step()
o.zero_grad()
m(torch.randn(3, 4)).sum().backward()
o.synchronize()
avg = [p.grad.clone() for p in m.parameters()]
o.step()  # no second exchange
check(all(torch.equal(p.grad, a) for p, a in zip(m.parameters(), avg)),
      "step() after synchronize() exchanged again")
iters = o.engine_stats()["iterations"]
o.step()
check(o.engine_stats()["iterations"] == iters + 1, "step() without backward did not exchange")
check(all(bool((p.grad == 0).all()) for p in m.parameters()), "zeros averaged to non-zero")
ok(r, "repeated step() and synchronize() then step()")

# A gradient replaced after backward() handed it over: GradsyncError naming
# it (the new tensor cannot be averaged any more), and the next iteration
# is a plain one.
o.zero_grad()
m(torch.randn(3, 4)).sum().backward()
m[0].weight.grad = torch.ones_like(m[0].weight) * (r + 1) * 100
e = raises(gradsync.GradsyncError, o.step, contains="'0.weight'")
check(e.status == "STATE" and "replaced" in str(e), str(e))
check(m[0].weight.grad.abs().max() < 100, "p.grad is not the registered buffer again")
o.zero_grad()
torch.manual_seed(40 + r)
x = torch.randn(3, 4)
want = [gs.allreduce(g, op=gs.Sum) / n for g in local_grads(m, x)]
m(x).sum().backward()
o.step()
for g, w in zip([p.grad for p in m.parameters()], want):
    check(torch.allclose(g, w, rtol=1e-5, atol=1e-6), "the iteration after a replaced gradient")
ok(r, "a gradient replaced after backward() raises, naming it")

# A gradient assigned where backward did not reach (rank 0 computes nothing
# for the second layer, the others nothing at all): averaged.
o.zero_grad()
if r == 0:
    m[0](torch.randn(3, 4)).sum().backward()
m[1].bias.grad = torch.full_like(m[1].bias, float(r + 1))
o.step()
check(torch.allclose(m[1].bias.grad, torch.full_like(m[1].bias, (n + 1) / 2)),
      f"assigned gradient of an unreached parameter: {m[1].bias.grad}")
o.close()
ok(r, "a gradient assigned to a parameter backward did not reach is averaged")
print(f"rank {r}: every uneven iteration passed", flush=True)

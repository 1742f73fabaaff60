"""Autograd through the blocking collectives (Horovod's and
torch.distributed.nn's): allgather (a contrastive loss over every rank's
embeddings), allreduce with Average, Sum and Max, broadcast and alltoall
(uneven splits). Each rank computes its loss from the collective's output
and backward; the parameters' gradients averaged over the ranks must be
one process's gradient of the mean of the ranks' losses (what
DistributedOptimizer's average trains on). Until 2026-12-06 the outputs
had no grad_fn and the gradient through them was dropped silently. Also:
without requires_grad the result has none, and Product raises in
backward."""
import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
TOL = 1e-5


def data(rank):
    g = torch.Generator().manual_seed(31 + rank)
    return torch.randn(3 * n, 4, generator=g), torch.randn(3 * n, 2, generator=g)


def model():
    torch.manual_seed(5)
    return torch.nn.Linear(4, 2)


# Each case: loss(z, out, rank, y) of this rank, given its embedding z, the
# collective's output `out`; reference(zs) -> every rank's output from every
# rank's embeddings, as one process computes it.
root = 1 % n
splits = [(q + r) % 3 for q in range(n)]
splits[-1] += 3 * n - sum(splits)


def a2a_reference(zs):
    outs = []
    for me in range(n):
        blocks = []
        for q in range(n):
            sq = [(p + q) % 3 for p in range(n)]
            sq[-1] += 3 * n - sum(sq)
            start = sum(sq[:me])
            blocks.append(zs[q][start:start + sq[me]])
        outs.append(torch.cat(blocks))
    return outs


cases = [
    ("allgather", lambda z: gs.allgather(z),
     lambda zs: [torch.cat(zs)] * n,
     lambda z, out, q, y: ((out @ z.t()) ** 2).mean() + ((z - y) ** 2).mean()),
    ("allreduce Average", lambda z: gs.allreduce(z),
     lambda zs: [sum(zs) / n] * n,
     lambda z, out, q, y: ((out * (q + 1) - y) ** 2).mean() + (z ** 2).mean()),
    ("allreduce Sum", lambda z: gs.allreduce(z, op=gs.Sum),
     lambda zs: [sum(zs)] * n,
     lambda z, out, q, y: ((out - y) ** 2).mean() * (q + 1)),
    ("allreduce Max", lambda z: gs.allreduce(z, op=gs.Max),
     lambda zs: [torch.stack(zs).max(0).values] * n,
     lambda z, out, q, y: ((out - y) ** 2).mean() * (q + 1)),
    (f"broadcast from {root}", lambda z: gs.broadcast(z, root),
     lambda zs: [zs[root]] * n,
     lambda z, out, q, y: ((out - y) ** 2).mean() + (z ** 2).mean()),
    ("alltoall (uneven splits)", lambda z: gs.alltoall(z, splits=splits),
     a2a_reference,
     lambda z, out, q, y: ((out - 0.3) ** 2).sum() * (q + 1)),
]

for name, coll, reference, loss in cases:
    # gradsync: each rank its own loss; the gradients averaged.
    m = model()
    x, y = data(r)
    z = m(x)
    out = coll(z)
    check(out.grad_fn is not None, f"{name}: the output has no grad_fn")
    loss(z, out, r, y).backward()
    grads = [gs.allreduce(p.grad) for p in m.parameters()]
    # One process: the mean of every rank's loss.
    ref = model()
    zs = [ref(data(q)[0]) for q in range(n)]
    outs = reference(zs)
    (sum(loss(zs[q], outs[q], q, data(q)[1]) for q in range(n)) / n).backward()
    for g, p in zip(grads, ref.parameters()):
        d = float((g - p.grad).abs().max()) / (float(p.grad.abs().max()) or 1.0)
        check(d < TOL, f"{name}: the averaged gradient is off one process's by {d:.3g}")
    check(torch.allclose(out, outs[r].detach(), atol=1e-6), f"{name}: the forward differs")
    ok(r, f"autograd through {name}: one process's gradient")

# No gradient asked: a plain tensor, as before.
t = torch.randn(3, requires_grad=True)
with torch.no_grad():
    check(gs.allreduce(t).grad_fn is None, "under no_grad the result has a grad_fn")
check(gs.allgather(torch.randn(2)).requires_grad is False, "a plain input gave a graph")
# Product: refused in backward, on every rank alike.
out = gs.allreduce(torch.rand(3, requires_grad=True) + 0.5, op=gs.Product)
e = raises(gradsync.GradsyncError, out.sum().backward, contains="Product")
check(e.status == "UNSUPPORTED", f"status {e.status}")
ok(r, "autograd: no graph without requires_grad; Product refused in backward")

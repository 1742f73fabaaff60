"""DistributedOptimizer(compression=...) on N ranks:
- "none" (and Compression.none) gives bitwise the dense averages;
- "topk:0.1" with error feedback gives bitwise the average of a Python
  reference (each rank's own gradient, gathered; p = g + e; the k = max(1,
  floor(0.1 n)) entries of largest |p| kept, e = p with them zeroed; their
  sum in rank order times 1/N), over several steps; and without error
  feedback the reference with e = 0;
- "fp16" within half precision of the dense average;
- a float64 parameter stays dense (only float32 messages are compressed);
- a bad spec raises GradsyncError before any collective (one rank alone),
  and so do DGC's momentum conflicts (ValueError);
- dgc takes the optimizer's momentum (the param groups' becomes 0) with a
  warning, and trains;
- ranks whose compression differs (ONE rank differing) raise MISMATCH on
  every rank, naming both specs, and the communicator still works;
- a small model trained with topk:0.1 converges.
Each rank's own gradient comes from a hook-free copy of the network
(copy.deepcopy): the engine averages p.grad in place from its own thread
as soon as a hook hands it over."""
import copy
import warnings

import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)


class Net(torch.nn.Module):
    def __init__(self, wide=7):
        super().__init__()
        self.a = torch.nn.Linear(5, wide)
        self.b = torch.nn.Linear(wide, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def loss_of(model, step):
    """A loss whose gradient has no ties (random weights on the outputs)."""
    g = torch.Generator().manual_seed(1000 * step + r)
    x = torch.randn(6, 5, generator=g)
    w = torch.randn(6, 3, generator=g)
    return (model(x) * w).sum()


def train(compression, steps, **kw):
    """`steps` steps of SGD on a fresh Net under `compression`; returns per
    step the averaged gradients and every rank's own gradients."""
    torch.manual_seed(7)
    net = Net()
    opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                  named_parameters=net.named_parameters(), policy="wfbp",
                                  compression=compression, **kw)
    history = []
    for step in range(steps):
        opt.zero_grad()
        shadow = copy.deepcopy(net)
        loss_of(shadow, step).backward()
        own = {k: p.grad.clone() for k, p in shadow.named_parameters()}
        loss_of(net, step).backward()
        opt.synchronize()
        avg = {k: p.grad.clone() for k, p in net.named_parameters()}
        history.append((avg, gs.allgather_object(own)))
        with opt.skip_synchronize():
            opt.step()
    stats = opt.engine_stats()
    opt.close()
    return history, stats


def topk_reference(history, density, error_feedback, decay=1.0):
    """The expected averages of every step, from every rank's own gradient
    (the residual damped by `decay` each step)."""
    resid = [{} for _ in range(n)]
    out = []
    for _, owns in history:
        step = {}
        for k in owns[0]:
            total = torch.zeros(owns[0][k].numel())
            for q in range(n):
                g = owns[q][k].reshape(-1)
                p = decay * resid[q].get(k, torch.zeros_like(g)) + g
                kk = max(1, int(density * p.numel()))
                idx = torch.topk(p.abs(), kk).indices
                total.index_add_(0, idx, p[idx])
                e = p.clone()
                e[idx] = 0
                resid[q][k] = e if error_feedback else torch.zeros_like(g)
            step[k] = (total * (torch.tensor(1.0) / n)).reshape(owns[0][k].shape)
        out.append(step)
    return out


# 1. "none" and Compression.none: bitwise the dense averages.
dense, st_dense = train(None, 3)
for spec in ("none", gs.Compression.none):
    got, st = train(spec, 3)
    for s, (a, b) in enumerate(zip(got, dense)):
        for k in a[0]:
            check(torch.equal(a[0][k], b[0][k]), f"{spec!r} step {s} {k}: not the dense average")
    check(st["compressed_messages"] == 0 and st["compression"] == "none", f"stats {st}")
    check(st["bytes_sent"] == st["bytes_dense"] > 0, f"dense bytes {st}")
ok(r, "compression none is bitwise dense")

# 2. topk:0.1 with and without error feedback, against the reference.
for ef in (True, False):
    got, st = train("topk:0.1", 4, error_feedback=ef)
    want = topk_reference(got, 0.1, ef)
    for s, (a, w) in enumerate(zip(got, want)):
        for k in w:
            check(torch.equal(a[0][k], w[k]),
                  f"topk ef={ef} step {s} {k}: {a[0][k]} != reference {w[k]}")
    # error feedback changes the later steps
    other = topk_reference(got, 0.1, not ef)
    check(any(not torch.equal(a[0][k], o[k]) for a, o in zip(got[1:], other[1:]) for k in o),
          f"topk ef={ef}: the reference without/with error feedback is the same")
    check(st["compressed_messages"] == 4 * 4, f"compressed messages {st}")
    check(st["compression"] == "topk:0.1" and st["error_feedback"] == ef, f"stats {st}")
    check(0 < st["bytes_sent"] < st["bytes_dense"] / 3, f"bytes {st}")
    check(st["compress_s"] > 0, f"compress_s {st}")
ok(r, "topk:0.1 equals the Python reference, with and without error feedback")

# 2b. ef_decay=0.5 damps the residual: the reference with decay 0.5, and not
# the undamped one.
got, st = train("topk:0.1", 4, ef_decay=0.5)
want = topk_reference(got, 0.1, True, 0.5)
undamped = topk_reference(got, 0.1, True)
for s, (a, w) in enumerate(zip(got, want)):
    for k in w:
        check(torch.allclose(a[0][k], w[k], rtol=1e-6, atol=1e-7),
              f"topk ef_decay=0.5 step {s} {k}: {a[0][k]} != reference {w[k]}")
check(any(not torch.allclose(a[0][k], u[k]) for a, u in zip(got[1:], undamped[1:]) for k in u),
      "ef_decay=0.5 sent what the undamped residual would")
ok(r, "ef_decay damps the residual as the reference does")

# 3. fp16 within half precision of the dense average.
got, st = train(gs.Compression.fp16, 2, error_feedback=False)
for k, v in dense[0][0].items():
    scale = float(v.abs().max())
    check(float((got[0][0][k] - v).abs().max()) <= 2e-3 * scale + 1e-6,
          f"fp16 {k}: {got[0][0][k]} vs dense {v}")
check(st["bytes_sent"] * 2 == st["bytes_dense"], f"fp16 halves the bytes: {st}")
ok(r, "fp16 within tolerance")

# 4. A float64 parameter stays dense; the float32 one is compressed.
class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w64 = torch.nn.Parameter(torch.randn(40, dtype=torch.float64))
        self.w32 = torch.nn.Parameter(torch.randn(40))

    def forward(self, x):
        return (x * self.w64).sum() + (x.float() * self.w32).sum().double()


torch.manual_seed(3)
mixed = Mixed()
opt = gs.DistributedOptimizer(torch.optim.SGD(mixed.parameters(), lr=0.1),
                              named_parameters=mixed.named_parameters(), policy="single",
                              compression="topk:0.1")
xw = torch.randn(40, dtype=torch.float64, generator=torch.Generator().manual_seed(50 + r))
shadow = copy.deepcopy(mixed)
(shadow(xw) ** 2).backward()
own_w = shadow.w64.grad.clone()
(mixed(xw) ** 2).backward()
opt.synchronize()
want_w = gs.allreduce(own_w)
check(torch.allclose(mixed.w64.grad, want_w, rtol=1e-12, atol=0),
      "float64 parameter: not the dense average")
check(int((mixed.w64.grad != 0).sum()) == 40, "float64 parameter was sparsified")
check(int((mixed.w32.grad != 0).sum()) <= 4 * n, "float32 parameter was not sparsified")
st = opt.engine_stats()
check(st["compressed_messages"] == 1 and st["messages"] == 2, f"mixed dtypes: {st}")
opt.close()
ok(r, "float64 parameters stay dense")

# 5. A bad spec raises at construction, before any collective: rank 0 alone
# tries (a collective there would leave it waiting for the others).
if r == 0:
    for bad in ("topk:2", "bogus:0.1", "auto:", "fp16:3"):
        e = raises(gradsync.GradsyncError, gs.DistributedOptimizer,
                   torch.optim.SGD(Net().parameters(), lr=1), compression=bad,
                   contains=f"'{bad}'")
        check(e.status == "INVALID_ARG", f"{bad}: {e.status}")
    raises(TypeError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
           compression=object(), contains="spec string")
    raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
           error_feedback=False, contains="need compression=")
    for bad in (0, 1.5, -1):
        raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
               compression="randomk:0.01", ef_decay=bad, contains="ef_decay")
    raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
           ef_decay=0.9, contains="need compression=")
    raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
           compression="topk:0.01", error_feedback=False, ef_decay=0.9,
           contains="give one of them")
    # DGC's momentum rule: an explicit compress_momentum that differs from
    # the optimizer's, a Nesterov momentum, or param groups of different
    # momenta cannot move into the compressor.
    e = raises(ValueError, gs.DistributedOptimizer,
               torch.optim.SGD(Net().parameters(), lr=1, momentum=0.9),
               compression="dgc:0.01", compress_momentum=0.5, contains="0.9")
    check("0.5" in str(e) and "compress_momentum=" in str(e), f"dgc conflict: {e}")
    raises(ValueError, gs.DistributedOptimizer,
           torch.optim.SGD(Net().parameters(), lr=1, momentum=0.9, nesterov=True),
           compression="dgc:0.01", contains="Nesterov momentum 0.9")
    net = Net()
    raises(ValueError, gs.DistributedOptimizer,
           torch.optim.SGD([{"params": net.a.parameters(), "momentum": 0.9},
                            {"params": net.b.parameters(), "momentum": 0.5}], lr=1),
           compression="dgc:0.01", contains="param groups have momenta")
    raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(Net().parameters(), lr=1),
           compression="topk:0.01", compress_momentum=1.5, contains="1.5")
    raises(gradsync.GradsyncError, gs.DistributedOptimizer,
           torch.optim.SGD(Net().parameters(), lr=1), policy="dear", compression="topk:0.01",
           contains="auto:topk:0.01")
gs.barrier()
ok(r, "bad specs raise before any collective")

# 5b. DGC applies momentum inside the compressor: the optimizer's momentum
# moves into it (the param groups' momentum becomes 0, the compressor's is
# the optimizer's), announced by a warning; without momentum, or with
# another kind, nothing moves and nothing is said.
for spec, momentum, given, moves in (("dgc:0.1", 0.8, None, True), ("dgc:0.1", 0.8, 0.8, True),
                                     ("dgc:0.1", 0.0, None, False),
                                     ("topk:0.1", 0.8, None, False)):
    torch.manual_seed(5)
    net = Net()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1,
                                                      momentum=momentum),
                                      named_parameters=net.named_parameters(),
                                      policy="wfbp", compression=spec,
                                      compress_momentum=given)
    said = [str(w.message) for w in caught if "moved into it" in str(w.message)]
    what = f"{spec}, momentum {momentum}, compress_momentum {given}"
    if moves:
        check(len(said) == 1 and "0.8" in said[0] and spec in said[0], f"{what}: {said}")
        check(all(g["momentum"] == 0 for g in opt.param_groups), f"{what}: groups kept it")
        check(abs(opt._gs_zmomentum - 0.8) < 1e-6, f"{what}: compressor {opt._gs_zmomentum}")
    else:
        check(not said, f"{what}: announced a move: {said}")
        check(all(g["momentum"] == momentum for g in opt.param_groups), f"{what}: moved")
    loss_of(net, 0).backward()
    opt.step()
    check(opt.engine_stats()["compressed_messages"] > 0, f"{what}: nothing was compressed")
    opt.close()
ok(r, "dgc takes the optimizer's momentum, with a warning")

# 6. ONE rank's compression differs: every rank raises MISMATCH at the first
# step, naming the specs; then the communicator still works.
if n > 1:
    cases = [
        ("topk:0.2" if r == n - 1 else "topk:0.1", True, "topk:0.2"),
        ("topk:0.1", r != 0, "without error feedback"),
        ("auto:topk:0.1" if r == 1 else "topk:0.1", True, "auto:topk:0.1"),
        (None if r == n - 1 else "fp16", True, "none"),
        # The engine's other settings (until 2026-12-06 ranks with other
        # warm-ups waited for each other until the watchdog).
        (None, True, "warm-up 3", {"warmup_iters": 3 if r == n - 1 else 5}),
        ("dgc:0.1", True, "density warm-up 8", {"compress_warmup_steps": 8 if r == 1 else 0}),
        (None, True, "policy single", {"policy": "single" if r == 1 else "wfbp"}),
    ]
    for spec, ef, named, *extra in cases:
        torch.manual_seed(7)
        net = Net()
        kw = {"error_feedback": ef} if spec is not None else {}
        kw.update({"policy": "wfbp", **(extra[0] if extra else {})})
        opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                      named_parameters=net.named_parameters(),
                                      compression=spec, **kw)
        loss_of(net, 0).backward()
        e = raises(gradsync.GradsyncError, opt.step)
        check(e.status == "MISMATCH" and named in str(e), f"mismatch {spec}: {e}")
        print(f"rank {r}: caught: {e}", flush=True)
    check(gs.allreduce(torch.ones(2), op=gs.Sum).tolist() == [n, n], "after the mismatch")
ok(r, "compression mismatch raises on every rank")

# 7. Training a small model with topk:0.1 converges.
torch.manual_seed(11)
teacher = torch.nn.Linear(20, 4)
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
gs.broadcast_parameters(model.state_dict())
opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                              named_parameters=model.named_parameters(),
                              compression="topk:0.1")
losses = []
for step in range(40):
    g = torch.Generator().manual_seed(100 * step + r)
    x = torch.randn(32, 20, generator=g)
    with torch.no_grad():
        y = teacher(x)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(float(gs.allreduce(loss.detach().reshape(1))))
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
print(f"rank {r}: topk:0.1 loss {first:.4f} -> {last:.4f}", flush=True)
check(last < 0.5 * first, f"topk training did not converge: {first} -> {last}")
check(opt.engine_stats()["compressed_messages"] > 0, "nothing was compressed")
opt.close()
ok(r, "topk training converges")
gs.shutdown()
print(f"rank {r}: all compression checks passed", flush=True)

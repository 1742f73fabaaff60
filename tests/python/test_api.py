"""The binding's API on N ranks: topology, every collective in every
dtype (blocking and async), the argument checks, object and parameter
broadcasts, and DistributedOptimizer's contract (averages, unused
parameters, backward_passes_per_step, skip_synchronize, compression)."""
import copy
import json

import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
check(0 <= r < n and 0 <= gs.local_rank() < gs.local_size() <= n, "topology")
check(gs.is_initialized(), "is_initialized")
ok(r, "topology")
# The allreduce algorithm of a size: the same name on every rank (the choice
# is agreed), one of the table's.
algo = gs._C.allreduce_algorithm(1 << 20)
check(algo in ("ring", "rd", "rabenseifner", "hier", "mpi"), f"allreduce_algorithm {algo}")
check(gs.allgather_object(algo) == [algo] * n, "allreduce_algorithm agreed")

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
for dt in FLOATS:
    x = torch.arange(7, dtype=torch.float64).to(dt) + r
    exp_avg = (torch.arange(7, dtype=torch.float64) + (n - 1) / 2).to(dt)
    check(torch.equal(gs.allreduce(x), exp_avg), f"allreduce avg {dt}: {gs.allreduce(x)}")
    check(torch.equal(x, (torch.arange(7, dtype=torch.float64) + r).to(dt)),
          "allreduce left its input alone")
    s = gs.allreduce(x, op=gs.Sum)
    check(torch.equal(s, (n * torch.arange(7, dtype=torch.float64) + n * (n - 1) / 2).to(dt)),
          f"allreduce sum {dt}")
    check(torch.equal(gs.allreduce(x, op=gs.Max), x - r + n - 1), f"allreduce max {dt}")
    y = x.clone()
    gs.allreduce_(y, op=gs.Min)
    check(torch.equal(y, x - r), f"allreduce_ min {dt}")
    h = gs.allreduce_async(x, average=True)
    check(torch.equal(gs.synchronize(h), exp_avg), f"allreduce_async {dt}")
    # allgather with a first dimension that differs between ranks
    g = gs.allgather(torch.full((r + 1, 3), float(r)).to(dt))
    check(g.shape == (n * (n + 1) // 2, 3), f"allgather shape {g.shape}")
    check(g.dtype == dt, "allgather dtype")
    at = 0
    for q in range(n):
        check(bool((g[at:at + q + 1] == q).all()), f"allgather block of rank {q}")
        at += q + 1
    b = gs.broadcast(x, root_rank=n - 1)
    check(torch.equal(b, x - r + n - 1), f"broadcast {dt}")
    z = x.clone()
    gs.synchronize(gs.broadcast_async_(z, 0))
    check(torch.equal(z, x - r), f"broadcast_async_ {dt}")
    a = gs.alltoall((torch.arange(2 * n) + 100 * r).to(dt))
    exp = torch.tensor([100 * q + 2 * r + j for q in range(n) for j in range(2)]).to(dt)
    check(torch.equal(a, exp), f"alltoall {dt}: {a} != {exp}")
ok(r, "collectives in f32, f64, f16, bf16")

# Integers travel (broadcast, allgather, sum) but do not average.
i64 = torch.tensor([r, 2 * r], dtype=torch.int64)
check(gs.allreduce(i64, op=gs.Sum).tolist() == [n * (n - 1) // 2, n * (n - 1)], "i64 sum")
check(gs.allgather(i64).tolist() == [v for q in range(n) for v in (q, 2 * q)], "i64 gather")
raises(TypeError, gs.allreduce, i64, contains="cannot reduce")
ok(r, "integers")

# alltoall with uneven splits: rank r sends q + 1 rows to rank q.
splits = [q + 1 for q in range(n)]
src = torch.cat([torch.full((q + 1, 2), float(10 * r + q)) for q in range(n)])
out = gs.alltoall(src, splits=splits)
check(out.shape == (n * (r + 1), 2), f"alltoall splits shape {out.shape}")
check(torch.equal(out, torch.cat([torch.full((r + 1, 2), float(10 * q + r))
                                  for q in range(n)])), "alltoall splits data")
ok(r, "alltoall with splits")

# Bad tensors: a clear exception, never a crash, before any communication.
raises(TypeError, gs.allreduce, [1.0, 2.0], contains="torch.Tensor")
raises(TypeError, gs.allreduce, torch.zeros(3, dtype=torch.int8), contains="int8")
raises(TypeError, gs.broadcast, torch.zeros(3, dtype=torch.complex64), 0, contains="complex64")
raises(TypeError, gs.allgather, torch.zeros(3, dtype=torch.bool), contains="bool")
nc = torch.zeros(4, 4).t()
raises(ValueError, gs.allreduce_, nc, contains="not contiguous")
raises(ValueError, gs.broadcast_, nc, 0, contains="not contiguous")
raises(ValueError, gs.allreduce, torch.zeros(3, device="meta"), contains="CPU")
raises(ValueError, gs.allreduce, torch.eye(3).to_sparse(), contains="dense")
if n > 1:
    raises(ValueError, gs.alltoall, torch.zeros(2 * n + 1), contains="divisible")
raises(ValueError, gs.alltoall, torch.zeros(n), splits=[n] + [0] * (n - 1) + [1],
       contains="splits")
raises(ValueError, gs.allreduce, torch.zeros(2), op=42, contains="unknown reduction")
raises(TypeError, gs.synchronize, 3, contains="handle")
ok(r, "bad tensors raise")

# Out of place works on a non-contiguous input; a library error is a GradsyncError.
check(torch.equal(gs.allreduce(nc, op=gs.Max), torch.zeros(4, 4)), "non-contiguous input")
e = raises(gradsync.GradsyncError, gs.broadcast, torch.zeros(2), n + 3)
check(e.status == "INVALID_ARG", f"status {e.status}")
ok(r, "library errors")

# A shape difference in allgather raises on every rank.
if n > 1:
    e = raises(gradsync.GradsyncError, gs.allgather, torch.zeros(2, 3 if r == 0 else 4),
               contains="disagree")
    check(e.status == "MISMATCH", f"allgather mismatch status {e.status}")
ok(r, "allgather mismatch")

obj = gs.broadcast_object({"rank": r, "t": torch.ones(2) * r}, root_rank=n - 1)
check(obj["rank"] == n - 1 and obj["t"].tolist() == [n - 1] * 2, "broadcast_object")
check([o["r"] for o in gs.allgather_object({"r": r})] == list(range(n)), "allgather_object")
gs.barrier()
ok(r, "objects")

# broadcast_parameters and broadcast_optimizer_state.
torch.manual_seed(100 + r)
m = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 2))
gs.broadcast_parameters(m.state_dict(), root_rank=0)
ref = gs.broadcast_object(m.state_dict(), root_rank=0)
for k, v in m.state_dict().items():
    check(torch.equal(v, ref[k]), f"broadcast_parameters {k}")
opt = torch.optim.Adam(m.parameters(), lr=1e-3 * (r + 1))
m(torch.randn(4, 5)).sum().backward()
opt.step()
gs.broadcast_optimizer_state(opt, root_rank=0)
check(opt.param_groups[0]["lr"] == 1e-3, "optimizer lr broadcast")
st = gs.broadcast_object(opt.state_dict(), 0)
for pid, s in opt.state_dict()["state"].items():
    check(torch.equal(s["exp_avg"], st["state"][pid]["exp_avg"]), "optimizer state broadcast")
ok(r, "broadcast_parameters / broadcast_optimizer_state")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.b = torch.nn.Linear(4, 2)
        self.unused = torch.nn.Linear(2, 2)  # gets a gradient on rank 0 only

    def forward(self, x, use):
        y = self.b(torch.relu(self.a(x)))
        return self.unused(y) if use else y


torch.manual_seed(7)
net = Net()
opt = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                              named_parameters=net.named_parameters(), policy="wfbp")
for step in range(3):
    opt.zero_grad()
    torch.manual_seed(1000 * step + r)
    x = torch.randn(4, 3)
    # The engine averages p.grad in place from its own thread as soon as a
    # hook hands it over, so this rank's own gradient is read from a copy
    # of the network that has no hooks.
    shadow = copy.deepcopy(net)
    shadow(x, use=(r == 0)).sum().backward()
    local = {k: p.grad for k, p in shadow.named_parameters() if p.grad is not None}
    net(x, use=(r == 0)).sum().backward()
    opt.synchronize()
    for k, p in net.named_parameters():
        want = gs.allreduce(local.get(k, torch.zeros_like(p)), op=gs.Sum) / n
        check(torch.allclose(p.grad, want, rtol=1e-5, atol=1e-6),
              f"step {step}: average of {k}: {p.grad} != {want}")
    with opt.skip_synchronize():
        opt.step()
stats = opt.engine_stats()
check(stats["iterations"] == 3, f"iterations {stats}")
check(stats["unready"] == (0 if r == 0 else 3 * 2), f"unready tensors {stats}")
ok(r, "DistributedOptimizer: averages, unused parameters as zeros")
# The plan's profile (tests/python/test_elastic.sh checks it written by the
# elastic State): None before a plan made from measurements, else JSON of
# the registered gradients; a bad batch is refused.
prof = opt.profile(batch_size=4, name="net")
if prof is not None:
    prof = json.loads(prof)
    check(prof["batch_size"] == 4 and prof["name"] == "net" and len(prof["tensors"]) > 0,
          f"profile {prof}")
try:
    opt.profile(batch_size=-1)
    check(False, "profile(batch_size=-1) accepted")
except ValueError:
    pass
ok(r, "DistributedOptimizer.profile: the plan's profile or None; a bad batch refused")

opt.close()  # its hooks go: a second optimizer takes the parameters over
# backward_passes_per_step=2: two local passes summed, then averaged.
opt2 = gs.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                               named_parameters=net.named_parameters(),
                               backward_passes_per_step=2, policy="single")
for step in range(2):
    opt2.zero_grad()
    shadow = copy.deepcopy(net)  # no hooks: this rank's own sum of two passes
    for p_ in range(2):
        torch.manual_seed(50 + 10 * step + p_ + 100 * r)
        x = torch.randn(2, 3)
        shadow(x, use=True).sum().backward()
        net(x, use=True).sum().backward()
    local = {k: p.grad for k, p in shadow.named_parameters()}
    opt2.synchronize()
    for k, p in net.named_parameters():
        want = gs.allreduce(local[k])
        check(torch.allclose(p.grad, want, rtol=1e-5, atol=1e-6), f"accumulated {k}")
    with opt2.skip_synchronize():
        opt2.step()
net(torch.randn(2, 3), use=True).sum().backward()
net(torch.randn(2, 3), use=True).sum().backward()
raises(gradsync.GradsyncError, opt2.zero_grad, contains="between backward() and step()")
raises(gradsync.GradsyncError, lambda: net(torch.randn(2, 3), use=True).sum().backward(),
       contains="backward_passes_per_step")
opt2.synchronize()
opt2.close()
raises(gradsync.GradsyncError, opt2.step, contains="closed")
ok(r, "backward_passes_per_step")

# DeAR's forward overlap: step() leaves each update to its module's next
# forward pre-hook; a module not run (rank != 0's `unused`) is updated at the
# next synchronize; finish() applies the rest; every rank ends alike. The
# same with policy "auto" and model=: the engine may choose dear, and the
# updates wait for the forward whichever plan it chose.
for pol in ("dear", "auto"):
    torch.manual_seed(9)
    net3 = Net()
    gs.broadcast_parameters(net3.state_dict())
    opt3 = gs.DistributedOptimizer(torch.optim.SGD(net3.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=net3.named_parameters(), policy=pol,
                                   model=net3, warmup_iters=1)
    for step in range(4):
        opt3.zero_grad()
        torch.manual_seed(300 + step + 10 * r)
        net3(torch.randn(4, 3), use=(r == 0)).sum().backward()
        before = net3.a.weight.detach().clone()
        opt3.step()
        check(torch.equal(net3.a.weight, before), f"{pol} overlap: step() updated before the "
                                                  "forward")
        with torch.no_grad():
            net3.a(torch.zeros(1, 3))
        check(not torch.equal(net3.a.weight, before), f"{pol} overlap: the forward did not "
                                                      "update")
    opt3.finish()
    for k, v in net3.state_dict().items():
        check(torch.equal(v, gs.broadcast(v, 0)), f"{pol} overlap: ranks differ in {k}")
    if pol == "dear":
        check(opt3.engine_stats()["chosen"] == "dear", "overlap: dear not chosen")
    opt3.close()
    ok(r, f"{pol} forward overlap")

e = raises(gradsync.GradsyncError, gs.DistributedOptimizer,
           torch.optim.SGD(net.parameters(), lr=1), compression="topk:2",
           contains="'topk:2'")
check(e.status == "INVALID_ARG", f"bad compression spec status {e.status}")
raises(ValueError, gs.DistributedOptimizer, torch.optim.SGD(net.parameters(), lr=1),
       named_parameters=[("a", net.a.weight)], contains="not in it")
raises(TypeError, gs.DistributedOptimizer, object(), contains="Optimizer")
# Refused at construction, naming the parameter (found by a user tester:
# the counts were truncated or taken as they came, a bad policy or timeline
# path raised only at the first step, a NaN warm-up gave Python's message).
def sgd():
    return torch.optim.SGD(net.parameters(), lr=1)
for bad in ("2", 2.7, True):
    raises(TypeError, gs.DistributedOptimizer, sgd(), backward_passes_per_step=bad,
           contains="backward_passes_per_step must be a whole number")
raises(ValueError, gs.DistributedOptimizer, sgd(), backward_passes_per_step=0,
       contains="backward_passes_per_step must be >= 1")
raises(ValueError, gs.DistributedOptimizer, sgd(), warmup_iters=-3,
       contains="warmup_iters must be >= 0")
raises(TypeError, gs.DistributedOptimizer, sgd(), warmup_iters=1.5,
       contains="warmup_iters must be a whole number")
raises(TypeError, gs.DistributedOptimizer, sgd(), compression="topk:0.1",
       compress_warmup_steps=float("nan"), contains="compress_warmup_steps")
for bad in ("bogus", "", "WFBP"):
    raises(gradsync.GradsyncError, gs.DistributedOptimizer, sgd(), policy=bad,
           contains=f"policy={bad}")
raises(ValueError, gs.DistributedOptimizer, sgd(), timeline="/nonexistent/dir/t.json",
       contains="timeline=")
ok(r, "DistributedOptimizer arguments")

gs.shutdown()
check(not gs.is_initialized(), "shutdown")
raises(gradsync.GradsyncError, gs.rank, contains="init")
ok(r, "shutdown")
print(f"rank {r}: all API checks passed", flush=True)

"""DeAR's forward overlap (policy "dear" with model=, whose updates wait for
the next forward) as users drive an optimizer, against one process on the
same global batch (found by a user tester, 2026-12-01; each failed before):

  - a learning-rate scheduler stepped after step(), before the next
    forward: the waiting update must use the rate of its step() (it used
    the next one: 4e-2 apart after 8 steps);
  - synchronize() called by the user to clip the averaged gradients, then
    step() inside skip_synchronize() (the documented pattern), with Adam:
    p.grad after synchronize() must be the average (it held the
    reduce-scatter's partial data) and the weights the reference's;
  - gradsync.torch.elastic's TorchState.commit() after every step (rank 0
    alone applied the waiting updates and waited for all-gathers the others
    never started: a deadlock).

Usage: test_overlap.py [POLICY...]  (default: dear auto)"""
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

import gradsync.torch as gs
from common import check, max_rel_diff, ok

POLICIES = sys.argv[1:] or ["dear", "auto"]
STEPS, BATCH, TOL = 10, 8, 2e-5


def make(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 24),
                               torch.nn.ReLU(), torch.nn.Linear(24, 5))


def batch(step, n):
    g = torch.Generator().manual_seed(900 + step)
    return torch.randn(n * BATCH, 12, generator=g), torch.randint(0, 5, (n * BATCH,), generator=g)


def backward(model, opt, ref, ref_opt, step):
    """This rank's slice of the step's global batch through model (opt),
    the whole batch through the one-process reference (ref_opt)."""
    x, y = batch(step, n)
    opt.zero_grad()
    F.cross_entropy(model(x[r * BATCH:(r + 1) * BATCH]), y[r * BATCH:(r + 1) * BATCH]).backward()
    if ref is not None:
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()


def pair(policy, optim, **kw):
    model, ref = make(7 + r), make(7)
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    ref.load_state_dict(model.state_dict())
    opt = gs.DistributedOptimizer(optim(model.parameters(), **kw),
                                  named_parameters=model.named_parameters(), policy=policy,
                                  model=model, warmup_iters=2)
    return model, ref, opt, optim(ref.parameters(), **kw)


gs.init()
r, n = gs.rank(), gs.size()
torch.set_num_threads(1)
for policy in POLICIES:
    # 1. The rate changes between step() and the next forward.
    model, ref, opt, ref_opt = pair(policy, torch.optim.SGD, lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    ref_sched = torch.optim.lr_scheduler.LambdaLR(ref_opt, lambda s: 1.0 / (1 + s))
    for step in range(STEPS):
        backward(model, opt, ref, ref_opt, step)
        opt.step()
        sched.step()
        ref_opt.step()
        ref_sched.step()
    opt.finish()
    d = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    check(d < TOL, f"{policy}: a scheduler stepped after step(): the parameters differ from "
                   f"one process's by {d:.2e} after {STEPS} steps")
    chosen = opt.engine_stats()["chosen"]
    opt.close()
    ok(r, f"{policy} with model= (chose {chosen}): LambdaLR after step(), {d:.1e}")

    # 2. synchronize(), clip, step() inside skip_synchronize(), with Adam.
    model, ref, opt, ref_opt = pair(policy, torch.optim.Adam, lr=0.01)
    worst_g = 0.0
    for step in range(STEPS):
        backward(model, opt, ref, ref_opt, step)
        opt.synchronize()
        worst_g = max(worst_g, max_rel_diff([p.grad for p in model.parameters()],
                                            [p.grad for p in ref.parameters()]))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.1)
        with opt.skip_synchronize():
            opt.step()
        ref_opt.step()
    opt.finish()
    d = max_rel_diff(list(model.parameters()), list(ref.parameters()))
    check(worst_g < TOL, f"{policy}: p.grad after synchronize() is not the average: "
                         f"{worst_g:.2e} (relative) from one process's gradient")
    check(d < TOL, f"{policy}: synchronize(), clipping, step(): the parameters differ from one "
                   f"process's by {d:.2e} after {STEPS} steps")
    opt.close()
    ok(r, f"{policy} with model=: synchronize() gives the average ({worst_g:.1e}), clipped "
          f"Adam {d:.1e}")

    # 3. An elastic commit after every step ends (GRADSYNC_TIMEOUT bounds a
    # deadlock), and the committed weights are every rank's.
    model, ref, opt, ref_opt = pair(policy, torch.optim.SGD, lr=0.1)
    where = gs.broadcast_object(tempfile.mkdtemp(prefix="gs-overlap-") if r == 0 else None)
    state = gs.elastic.TorchState(model, opt, dir=where, epoch=0)
    for step in range(STEPS):
        backward(model, opt, None, None, step)
        opt.step()
        state.commit()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    rank0 = gs.broadcast(flat.clone(), root_rank=0)
    check(torch.equal(flat, rank0), f"{policy}: after commits the ranks' weights differ")
    opt.close()
    if r == 0:
        for f in os.listdir(where):
            os.unlink(os.path.join(where, f))
        os.rmdir(where)
    ok(r, f"{policy} with model=: {STEPS} elastic commits, the ranks' weights identical")
gs.shutdown()

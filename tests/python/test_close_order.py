"""shutdown() closes the live DistributedOptimizers in the order every rank
created them. Under DeAR's overlap closing is collective (finish() issues
the all-gathers the next forward would), and the order used to follow the
objects' addresses, which differ between ranks: two DeAR optimizers failed
at exit with "ring receive failed" in 1 of 5 runs (found by a tester). Here
eight are created, trained, one is dropped, and shutdown() must close the
other seven in creation order on every rank, with every update applied."""
import gc

import torch

import gradsync.torch as gs
from common import check, ok

gs.init()
r, n = gs.rank(), gs.size()
check(n >= 2, "needs 2 ranks or more")

closed = []
models, opts = [], []
for i in range(8):
    torch.manual_seed(i)
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    o = gs.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                named_parameters=m.named_parameters(), policy="dear",
                                model=m, warmup_iters=1)
    real_close = o.close

    def close(i=i, real_close=real_close):
        closed.append(i)
        real_close()
    o.close = close
    models.append(m)
    opts.append(o)

for step in range(4):
    for i, (m, o) in enumerate(zip(models, opts)):
        o.zero_grad()
        torch.manual_seed(100 * step + 10 * i + r)
        m(torch.randn(4, 6)).pow(2).mean().backward()
        o.step()

# One dropped on every rank: it is closed when collected, not at shutdown.
dropped = opts[3]
del opts[3], models[3]
dropped.close()
del dropped
gc.collect()

gs.shutdown()
check(closed == [3, 0, 1, 2, 4, 5, 6, 7], f"rank {r}: closed in the order {closed}")
ok(r, "shutdown closed seven DeAR optimizers in creation order")

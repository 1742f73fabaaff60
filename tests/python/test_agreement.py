"""Module-level collectives whose ranks disagree (found by a tester: a
broadcast of 3 elements against 5 half-overwrote the longer tensor, an
all-reduce of 2 against 4 elements failed in MPI on one rank and gave the
other a wrong result, float32 against float64 gave garbage, a rank-local
ValueError in alltoall left the others waiting for the watchdog): every
rank raises, naming the first rank that differs and both values, nothing is
sent, and the communicator keeps working. Runs with a small
GRADSYNC_TIMEOUT: a hang fails through the watchdog."""
import torch

import gradsync
import gradsync.torch as gs
from common import check, ok, raises

gs.init()
r, n = gs.rank(), gs.size()
check(n >= 2, "needs 2 ranks or more")
last = n - 1


def alive():
    """The communicator still works after the refused call."""
    check(torch.equal(gs.allreduce(torch.ones(3), op=gs.Sum), torch.full((3,), float(n))),
          "the communicator no longer works")


def mismatch(fn, *args, contains, **kw):
    e = raises(gradsync.GradsyncError, fn, *args, contains=contains, **kw)
    check(e.status == "MISMATCH", f"status {e.status}: {e}")
    alive()
    return e


# Shapes: the last rank's tensor is longer.
nel = 5 if r == last else 3
t = torch.full((nel,), 7.0 + r)
e = mismatch(gs.broadcast_, t, 0, contains=f"rank {last}'s tensor is float32[5], rank 0's "
                                           "float32[3]")
check(torch.equal(t, torch.full((nel,), 7.0 + r)), "broadcast_ wrote into a refused tensor")
mismatch(gs.broadcast, t, 0, contains="float32[5]")
mismatch(gs.allreduce, torch.ones(4 if r == last else 2), contains="float32[4]")
mismatch(gs.allreduce_, torch.ones(4 if r == last else 2), contains="float32[4]")
mismatch(gs.allreduce_async, torch.ones(2, 3 if r == last else 2), contains="float32[2, 3]")
mismatch(gs.broadcast_async_, torch.ones(2, 3 if r == last else 2), 0,
         contains="float32[2, 3]")
ok(r, "shapes")

# Dtypes.
mismatch(gs.allreduce, torch.ones(3, dtype=torch.float64 if r == last else torch.float32),
         contains=f"rank {last}'s tensor is float64[3], rank 0's float32[3]")
mismatch(gs.broadcast, torch.ones(3, dtype=torch.int32 if r == last else torch.float32), 0,
         contains="int32[3]")
ok(r, "dtypes")

# The op and the root.
mismatch(gs.allreduce, torch.ones(3), op=gs.Max if r == last else gs.Sum,
         contains=f"rank {last}'s op is Max, rank 0's Sum")
mismatch(gs.broadcast, torch.ones(3), last if r == last else 0,
         contains=f"rank {last}'s root_rank is {last}, rank 0's 0")
e = mismatch(gs.allreduce, torch.ones(2 if r else 3), name="w",
             contains="allreduce of 'w'")
ok(r, "op and root")

# A rank that refuses its own arguments: it raises its error, every other
# rank GradsyncError (INVALID_ARG) naming it; none waits.
def refused(fn, *args, local, contains, **kw):
    if r == last:
        raises(local, fn, *args, contains=contains, **kw)
    else:
        e = raises(gradsync.GradsyncError, fn, *args, contains=f"rank {last} refused", **kw)
        check(e.status == "INVALID_ARG", f"status {e.status}: {e}")
    alive()


rows = n + 1 if r == last else n  # not divisible by n on the last rank
refused(gs.alltoall, torch.ones(rows, 2), local=ValueError, contains="divisible")
refused(gs.alltoall, torch.ones(n, 2), splits=[n + 1] + [0] * (n - 1) if r == last else None,
        local=ValueError, contains="splits")
refused(gs.allreduce, torch.ones(3, dtype=torch.int8 if r == last else torch.float32),
        local=TypeError, contains="int8")
refused(gs.broadcast_, torch.ones(4, 4).t() if r == last else torch.ones(4, 4), 0,
        local=ValueError, contains="not contiguous")
refused(gs.allgather, torch.ones(3, dtype=torch.bool if r == last else torch.float32),
        local=TypeError, contains="bool")
refused(gs.broadcast, torch.ones(3), "0" if r == last else 0, local=TypeError,
        contains="root_rank must be an int")
ok(r, "a rank-local refusal raises on every rank")

# Root ranks that are not ints are refused, on every rank alike.
for bad in ("1", 1.7, True):
    raises(TypeError, gs.broadcast, torch.ones(2), bad, contains="root_rank must be an int")
    raises(TypeError, gs.broadcast_async_, torch.ones(2), bad, contains="root_rank")
check(torch.equal(gs.broadcast(torch.full((2,), float(r)), torch.tensor(last)),
                  torch.full((2,), float(last))), "an int tensor as root_rank")
alive()
ok(r, "root_rank types")

# alltoall's splits are each rank's own (uneven exchanges stay legal), and a
# row size or dtype that differs raises on every rank.
splits = [1] * n
splits[r] += 1
out = gs.alltoall(torch.full((n + 1, 2), float(r)), splits=splits)
check(out.shape == (n + 1, 2), f"alltoall with per-rank splits: {out.shape}")
e = raises(gradsync.GradsyncError, gs.alltoall, torch.ones(n, 3 if r == last else 2),
           contains="disagree")
check(e.status == "MISMATCH", f"alltoall status {e.status}")
alive()
ok(r, "alltoall")
print(f"rank {r}: every disagreement raised", flush=True)

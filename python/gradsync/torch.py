"""gradsync.torch: data-parallel PyTorch training over gradsync's engine.

Horovod's interface where it has one (docs/PYTORCH.md):

    import gradsync.torch as gs
    gs.init()
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * gs.size())
    opt = gs.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    gs.broadcast_optimizer_state(opt, root_rank=0)
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()   # hooks hand each gradient to the engine
        opt.step()                        # waits for the averages, then updates

launched with `gradsync run -np N [--net RATE] -- /usr/bin/python3 train.py`.

Tensors are CPU tensors of float32, float64, float16 or bfloat16 (and, for
the collectives that do not reduce or for sums, int32, int64 and uint8, which
the library carries too). Anything else, a GPU or sparse tensor, or a
non-contiguous tensor where the call works in place, raises ValueError or
TypeError before any communication. Failures of the library raise
gradsync.GradsyncError with its message.
"""
import atexit
import contextlib
import io
import inspect
import math
import os
import sys
import warnings
import weakref

try:
    import torch
except ImportError as _e:  # torch missing, or a torch that cannot load
    raise ModuleNotFoundError(
        f"gradsync.torch needs PyTorch, which this interpreter ({sys.executable}) "
        f"cannot import ({_e}). Install it with scripts/install-deps.sh --with-torch "
        f"(Debian's python3-torch; run with /usr/bin/python3). The C library, "
        f"`import gradsync` and every gradsync command work without it.",
        name="torch") from _e

from gradsync import _C
from gradsync import elastic
from gradsync._C import GradsyncError

__all__ = [
    "GradsyncError", "init", "shutdown", "is_initialized", "rank", "size",
    "local_rank", "local_size", "Average", "Sum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "allgather", "allgather_async", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "alltoall", "alltoall_async",
    "synchronize", "poll", "barrier", "broadcast_object", "allgather_object",
    "broadcast_parameters", "broadcast_optimizer_state",
    "Compression", "Compressor", "DistributedOptimizer", "SyncBatchNorm", "elastic",
]

# Reduction operations (Horovod's names).
Average = _C.AVG
Sum = _C.SUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PROD

_FLOAT_DTYPES = {torch.float32: _C.F32, torch.float64: _C.F64,
                 torch.float16: _C.F16, torch.bfloat16: _C.BF16}
_INT_DTYPES = {torch.int32: _C.I32, torch.int64: _C.I64, torch.uint8: _C.U8}
_DTYPES = {**_FLOAT_DTYPES, **_INT_DTYPES}
_DTYPE_OF_CODE = {v: k for k, v in _DTYPES.items()}
# torch.optim's zero_grad default (False in torch 1.x, True from 2.0).
_SET_TO_NONE_DEFAULT = inspect.signature(
    torch.optim.Optimizer.zero_grad).parameters["set_to_none"].default

def _and_more(names):
    """The " (and N more)" after the first of `names` in a message, or ""."""
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _error(status, message):
    """A GradsyncError raised by the Python half, shaped like the library's:
    the message ends with the status name, which .status holds."""
    e = GradsyncError(f"{message} ({status})")
    e.status = status
    return e


_topology = None          # (rank, size, local_rank, local_size, node, nodes)
# Live DistributedOptimizers (engines to close), by creation number: closing
# is collective under DeAR's overlap (the last all-gathers), so every rank
# closes them in the order every rank created them (a WeakSet's order
# follows addresses, which differ between ranks).
_optimizers = weakref.WeakValueDictionary()
_optimizers_made = 0
_hooks_installed = False
_prev_excepthook = None


# ---- Set-up -------------------------------------------------------------------

def init():
    """Initialises MPI (thread level MULTIPLE) and gradsync's communicator
    over every rank. Collective; calling it again is a no-op. Reads the
    GRADSYNC_* settings (timeouts, cost model) like every gradsync program."""
    global _topology, _hooks_installed, _prev_excepthook
    _C.init()
    _topology = _C.topology()
    if not _hooks_installed:
        _hooks_installed = True
        atexit.register(shutdown)
        _prev_excepthook = sys.excepthook
        sys.excepthook = _excepthook


def _excepthook(etype, value, tb):
    """An uncaught exception on one rank would leave the others waiting in
    their next collective until the watchdog's timeout (and this rank's exit
    in MPI_Finalize): print it, then end every rank at once, non-zero, with
    gradsync's "rank R: fatal:" message."""
    (_prev_excepthook or sys.__excepthook__)(etype, value, tb)
    if _C.is_initialized() and _topology and _topology[1] > 1:
        _C.abort(f"uncaught Python exception on this rank: {etype.__name__}: {value}; "
                 f"ending every rank", 1)


def shutdown():
    """Destroys the engines of live DistributedOptimizers, then the
    communicator, and finalizes MPI if init() started it. Collective. Runs at
    exit if the script does not call it.

    It first tells the other ranks that this one is ending: a rank that
    ends early (sys.exit, the script's end) while the others still train
    makes them end the job at once, with a message naming it, instead of
    waiting in their next collective for the watchdog's timeout."""
    global _topology
    if _C.is_initialized():
        _C.leave()
    for _, opt in sorted(_optimizers.items()):
        opt.close()
    _C.shutdown()
    _topology = None


def is_initialized():
    return _C.is_initialized()


def _topo():
    if _topology is None or not _C.is_initialized():
        raise _error("STATE", "gradsync is not initialised on this rank: call "
                                     "gradsync.torch.init() first")
    return _topology


def rank():
    """This process's rank, 0 .. size()-1."""
    return _topo()[0]


def size():
    """The number of ranks."""
    return _topo()[1]


def local_rank():
    """This rank's index among the ranks of its node (GRADSYNC_NODE under
    `gradsync run --net`, else the ranks sharing memory)."""
    return _topo()[2]


def local_size():
    return _topo()[3]


# ---- Tensor checks ------------------------------------------------------------

def _dtype_code(t, what, floats_only=False):
    table = _FLOAT_DTYPES if floats_only else _DTYPES
    code = table.get(t.dtype)
    if code is None:
        names = ", ".join(str(d).replace("torch.", "") for d in table)
        raise TypeError(f"gradsync: {what} has dtype {t.dtype}, which gradsync cannot "
                        f"{'reduce' if floats_only else 'carry'} (supported: {names})")
    return code


def _check(t, what, inplace=False, floats_only=False):
    """Validates a tensor argument; returns its gradsync dtype code."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"gradsync: {what} must be a torch.Tensor, not {type(t).__name__}")
    if t.layout != torch.strided:
        raise ValueError(f"gradsync: {what} is a {t.layout} tensor; only dense "
                         "(strided) tensors are supported")
    if t.device.type != "cpu":
        raise ValueError(f"gradsync: {what} is on {t.device}; gradsync.torch works on "
                         "CPU tensors only")
    code = _dtype_code(t, what, floats_only)
    if inplace and not t.is_contiguous():
        raise ValueError(f"gradsync: {what} (shape {tuple(t.shape)}, strides {t.stride()}) "
                         "is not contiguous, and an in-place operation needs it to be: "
                         "pass t.contiguous() and copy the result back, or use the "
                         "out-of-place call")
    return code


_EMPTY = torch.zeros(1, dtype=torch.float64)  # an address for empty tensors


def _addr(t):
    """The data address of a contiguous tensor (a valid one when empty)."""
    return t.data_ptr() if t.numel() > 0 else _EMPTY.data_ptr()


class Handle:
    """A non-blocking collective in flight; finish it with synchronize()."""

    __slots__ = ("_req", "_result", "_finish", "_done", "_extra")

    def __init__(self, req, result, finish=None, extra=None):
        self._req, self._result, self._finish, self._done = req, result, finish, False
        self._extra = extra  # allgather: every rank's rows; alltoall: the rows received

    def wait(self):
        if not self._done:
            self._done = True
            self._req.wait()
            if self._finish is not None:
                self._result = self._finish(self._result)
        return self._result

    def poll(self):
        return self._done or self._req.test()


def synchronize(handle):
    """Waits for a handle from an *_async call and returns its result."""
    if not isinstance(handle, Handle):
        raise TypeError(f"gradsync: synchronize() takes a handle from an *_async call, "
                        f"not {type(handle).__name__}")
    return handle.wait()


def poll(handle):
    """True if the handle's collective has completed (never blocks)."""
    return handle.poll()


def _op_of(average, op):
    if average is not None:  # Horovod's older keyword
        return Average if average else Sum
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError(f"gradsync: unknown reduction op {op!r} (use gradsync.torch.Average, "
                         "Sum, Min, Max or Product)")
    return op


# ---- Collectives ------------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=Average):
    """Starts reducing `tensor` over every rank into a new tensor (the input
    is left as it is). Returns a handle; synchronize(handle) gives the result.
    Average and Product need a floating-point dtype. The ranks' dtypes,
    shapes and ops are compared first (one small blocking exchange): a
    difference raises GradsyncError (MISMATCH) on every rank."""
    def prepare():
        o = _op_of(average, op)
        code = _check(tensor, "allreduce's tensor", floats_only=o in (Average, Product))
        src = tensor.contiguous()
        return (o, code, src), _signature(src, code, op=o)

    o, code, src = _agree(_what("allreduce", name), prepare, _COLS_REDUCE)
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    req = _C.iallreduce(_addr(src), _addr(out), src.numel(), code, o, (src, out))
    return Handle(req, out)


def allreduce(tensor, average=None, name=None, op=Average):
    """The reduction of `tensor` over every rank (a new tensor).
    Differentiable (see _differentiable)."""
    if _differentiable(tensor):
        return _AllreduceFn.apply(tensor, _op_of(average, op), name)
    return synchronize(allreduce_async(tensor, average, name, op))


def allreduce_async_(tensor, average=None, name=None, op=Average):
    """Starts reducing `tensor` in place (it must be contiguous)."""
    def prepare():
        o = _op_of(average, op)
        code = _check(tensor, "allreduce_'s tensor", inplace=True,
                      floats_only=o in (Average, Product))
        return (o, code), _signature(tensor, code, op=o)

    o, code = _agree(_what("allreduce_", name), prepare, _COLS_REDUCE)
    req = _C.iallreduce(0, _addr(tensor), tensor.numel(), code, o, tensor)
    return Handle(req, tensor)


def allreduce_(tensor, average=None, name=None, op=Average):
    return synchronize(allreduce_async_(tensor, average, name, op))


# Agreement. Before a collective moves data, every rank's signature of
# the call (its tensor's dtype and shape, the op, the root) goes to every
# rank in one all-gather of _SIG integers, so that ranks that disagree, or a
# rank that refused its own arguments, raise on every rank instead of
# corrupting data or waiting for the watchdog.
_SIG = 14  # ndim, dtype, dim0, rest numel, up to 8 trailing dims, op, root
_REFUSED = -1  # a signature's ndim when this rank refused the call's arguments
_COL_OP, _COL_ROOT = 12, 13
_COLS_TENSOR = list(range(12))
_COLS_REDUCE = _COLS_TENSOR + [_COL_OP]
_COLS_BCAST = _COLS_TENSOR + [_COL_ROOT]
_COLS_GATHER = [c for c in _COLS_TENSOR if c != 2]  # dimension 0 may differ
_OP_NAMES = {Average: "Average", Sum: "Sum", Min: "Min", Max: "Max", Product: "Product"}


def _signature(t, code, dim0=None, op=-1, root=-1):
    shape = list(t.shape[1:])
    if dim0 is None:
        dim0 = t.shape[0] if t.dim() else 1
    sig = [t.dim(), code, dim0, math.prod(shape)] + (shape + [-1] * 8)[:8] + [op, root]
    return torch.tensor(sig, dtype=torch.int64)


def _describe(sig):
    ndim, code, dim0 = int(sig[0]), int(sig[1]), int(sig[2])
    rest = [int(x) for x in sig[4:4 + min(8, max(0, ndim - 1))]]
    dtype = _DTYPE_OF_CODE.get(code, f"code {code}")
    dims = [dim0] + rest if ndim > 0 else []
    return f"{str(dtype).replace('torch.', '')}[{', '.join(str(d) for d in dims)}]"


def _what(call, name):
    return f"{call} of '{name}'" if name is not None else call


def _gather_signatures(mine):
    """Every rank's signature, one all-gather."""
    n = size()
    all_sigs = torch.empty(n * _SIG, dtype=torch.int64)
    _C.iallgatherv(mine.data_ptr(), _SIG, all_sigs.data_ptr(), [_SIG] * n, _C.I64,
                   (mine, all_sigs)).wait()
    return all_sigs.view(n, _SIG)


def _raise_refused(what, refused):
    """On the ranks that accepted their arguments, when others refused theirs
    (ranks `refused`): INVALID_ARG naming the first."""
    if refused:
        raise _error("INVALID_ARG", f"gradsync: {what}: rank {refused[0]} refused its "
                                    f"arguments (its own error says why); no rank sent data")


def _agree(what, prepare, cols):
    """Runs the call's local checks, prepare() -> (result, signature), and
    makes every rank learn their outcome: a rank whose checks fail raises
    its own TypeError/ValueError, the others GradsyncError (INVALID_ARG)
    naming it; ranks whose signatures differ in `cols` raise GradsyncError
    (MISMATCH) naming the first rank that differs from rank 0 and both
    values. Returns prepare()'s result."""
    return _agree_sigs(what, prepare, cols)[0]


def _agree_sigs(what, prepare, cols):
    """_agree, returning (prepare()'s result, every rank's signature)."""
    n = size()
    error = None
    try:
        result, mine = prepare()
    except (TypeError, ValueError) as e:
        result, error = None, e
        mine = torch.zeros(_SIG, dtype=torch.int64)
        mine[0] = _REFUSED
    sigs = _gather_signatures(mine) if n > 1 else mine.view(1, _SIG)
    if error is not None:
        raise error
    _raise_refused(what, [q for q in range(n) if int(sigs[q, 0]) == _REFUSED])
    ref = sigs[0, cols]
    for q in range(1, n):
        if torch.equal(sigs[q, cols], ref):
            continue
        a, b = sigs[q], sigs[0]
        if not torch.equal(a[[c for c in cols if c < 12]], b[[c for c in cols if c < 12]]):
            diff = f"rank {q}'s tensor is {_describe(a)}, rank 0's {_describe(b)}"
        elif int(a[_COL_OP]) != int(b[_COL_OP]):
            diff = (f"rank {q}'s op is {_OP_NAMES.get(int(a[_COL_OP]), int(a[_COL_OP]))}, "
                    f"rank 0's {_OP_NAMES.get(int(b[_COL_OP]), int(b[_COL_OP]))}")
        else:
            diff = (f"rank {q}'s root_rank is {int(a[_COL_ROOT])}, "
                    f"rank 0's {int(b[_COL_ROOT])}")
        raise _error("MISMATCH", f"gradsync: {what}: ranks disagree: {diff}; no rank sent data")
    return result, sigs


def _root(root_rank):
    """root_rank as an int; a bool, float or string is refused, not converted."""
    if isinstance(root_rank, bool) or not hasattr(root_rank, "__index__"):
        raise TypeError(f"gradsync: root_rank must be an int, not {root_rank!r}")
    return root_rank.__index__()


def allgather_async(tensor, name=None):
    """Starts concatenating every rank's `tensor` along dimension 0. The
    first dimension may differ between ranks; the others and the dtype must
    not (a difference raises GradsyncError on every rank). The sizes are
    exchanged first (blocking); the data moves in the background."""
    def prepare():
        code = _check(tensor, "allgather's tensor")
        src = tensor.contiguous()
        if src.dim() == 0:
            src = src.reshape(1)
        return (code, src), _signature(src, code)

    (code, src), sigs = _agree_sigs(_what("allgather", name) + " (dimension 0 may differ)",
                                    prepare, _COLS_GATHER)
    rest = src.numel() // src.shape[0] if src.shape[0] else int(sigs[0, 3])
    dim0s = [int(d) for d in sigs[:, 2]]
    out = torch.empty([sum(dim0s)] + list(src.shape[1:]), dtype=src.dtype)
    req = _C.iallgatherv(_addr(src), src.numel(), _addr(out), [d * rest for d in dim0s],
                         code, (src, out))
    return Handle(req, out, None, dim0s)


def allgather(tensor, name=None):
    """Every rank's `tensor` concatenated along dimension 0. Differentiable
    (see _differentiable)."""
    if _differentiable(tensor):
        return _AllgatherFn.apply(tensor, name)
    return synchronize(allgather_async(tensor, name))


def broadcast_async_(tensor, root_rank, name=None):
    """Starts overwriting `tensor` (contiguous) with root_rank's. The ranks'
    dtypes, shapes and roots are compared first (one small blocking
    exchange): a difference raises GradsyncError (MISMATCH) on every rank."""
    def prepare():
        root = _root(root_rank)
        code = _check(tensor, "broadcast_'s tensor", inplace=True)
        return (code, root), _signature(tensor, code, root=root)

    code, root = _agree(_what("broadcast_", name), prepare, _COLS_BCAST)
    req = _C.ibcast(_addr(tensor), tensor.numel(), code, root, tensor)
    return Handle(req, tensor)


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


def broadcast_async(tensor, root_rank, name=None):
    """Starts a broadcast into a new tensor (the input is not modified);
    checked as broadcast_async_."""
    def prepare():
        root = _root(root_rank)
        code = _check(tensor, "broadcast's tensor")
        return (code, root), _signature(tensor, code, root=root)

    code, root = _agree(_what("broadcast", name), prepare, _COLS_BCAST)
    out = tensor.contiguous().clone()
    req = _C.ibcast(_addr(out), out.numel(), code, root, out)
    return Handle(req, out)


def broadcast(tensor, root_rank, name=None):
    """root_rank's `tensor` on every rank (a new tensor). Differentiable
    (see _differentiable)."""
    if _differentiable(tensor):
        return _BroadcastFn.apply(tensor, root_rank, name)
    return synchronize(broadcast_async(tensor, root_rank, name))


def alltoall_async(tensor, splits=None, name=None):
    """Starts an all-to-all: the rows (dimension 0) of `tensor` are cut into
    size() blocks, block r going to rank r; the result stacks the blocks
    received from ranks 0, 1, ... `splits` gives each block's number of rows
    (default: equal blocks, dimension 0 divisible by size()); each rank's
    splits are its own. The received sizes are exchanged first (blocking),
    with the dtype, the row size and each rank's verdict on its own
    arguments: a difference, or a rank whose arguments were refused, raises
    on every rank."""
    what = _what("alltoall", name)
    n = size()
    error = None
    try:
        code = _check(tensor, "alltoall's tensor")
        src = tensor.contiguous()
        if src.dim() == 0:
            raise ValueError("gradsync: alltoall needs a tensor with at least one dimension")
        rows = src.shape[0]
        if splits is None:
            if rows % n:
                raise ValueError(f"gradsync: alltoall: dimension 0 ({rows}) is not divisible "
                                 f"by the {n} ranks; pass splits=")
            splits = [rows // n] * n
        else:
            splits = [int(s) for s in (splits.tolist() if isinstance(splits, torch.Tensor)
                                       else splits)]
            if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != rows:
                raise ValueError(f"gradsync: alltoall: splits {splits} must be {n} non-negative "
                                 f"row counts adding up to dimension 0 ({rows})")
        rest = math.prod(src.shape[1:])
        send = torch.tensor([[s, rest, code, 0] for s in splits], dtype=torch.int64)
    except (TypeError, ValueError) as e:
        error = e
        send = torch.tensor([[0, 0, 0, 1]] * n, dtype=torch.int64)
    recv = torch.empty_like(send)
    _C.ialltoallv(send.data_ptr(), [4] * n, recv.data_ptr(), [4] * n, _C.I64,
                  (send, recv)).wait()
    if error is not None:
        raise error
    _raise_refused(what, [q for q in range(n) if int(recv[q, 3])])
    bad = [q for q in range(n) if int(recv[q, 1]) != rest or int(recv[q, 2]) != code]
    if bad:
        q = bad[0]
        theirs = _DTYPE_OF_CODE.get(int(recv[q, 2]), f"code {int(recv[q, 2])}")
        raise _error("MISMATCH", f"gradsync: {what}: ranks disagree: rank {q} sends "
                                 f"{str(theirs).replace('torch.', '')} rows of {int(recv[q, 1])} "
                                 f"elements, rank {rank()}'s are "
                                 f"{str(tensor.dtype).replace('torch.', '')} rows of {rest} "
                                 "elements; no rank sent data")
    rsplits = [int(r) for r in recv[:, 0]]
    out = torch.empty([sum(rsplits)] + list(src.shape[1:]), dtype=src.dtype)
    req = _C.ialltoallv(_addr(src), [s * rest for s in splits], _addr(out),
                        [s * rest for s in rsplits], code, (src, out))
    return Handle(req, out, None, rsplits)


def alltoall(tensor, splits=None, name=None):
    """The all-to-all of alltoall_async, blocking. Differentiable (see
    _differentiable)."""
    if _differentiable(tensor):
        return _AlltoallFn.apply(tensor, splits, name)
    return synchronize(alltoall_async(tensor, splits, name))


# ---- Autograd through the collectives -----------------------------------------------

def _differentiable(tensor):
    """Whether a blocking out-of-place collective records itself for
    autograd: its input requires a gradient and grad mode is on (as
    Horovod's allreduce, allgather, broadcast and alltoall, and
    torch.distributed.nn's). The backward passes are collectives too, so
    every rank must run backward through the same calls. The gradients are
    those of the mean of the ranks' losses, the objective whose gradient
    DistributedOptimizer's average gives: a rank's gradient for its input
    is the sum, over the ranks, of the gradients their outputs received
    for it (allgather and broadcast sum them; alltoall returns each block
    to its sender; allreduce with Average or Sum reduces them with the same
    op; with Min or Max the sum goes to the ranks that held the extreme,
    split among ties; Product is not differentiable here)."""
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and \
        torch.is_grad_enabled()


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name):
        out = synchronize(allreduce_async(tensor, None, name, op))
        ctx.op, ctx.name = op, name
        if op in (Min, Max):
            ctx.save_for_backward((tensor.contiguous() == out).to(out.dtype))
        return out

    @staticmethod
    def backward(ctx, grad):
        op = ctx.op
        if op in (Average, Sum):
            return synchronize(allreduce_async(grad.contiguous(), None, ctx.name, op)), \
                None, None
        if op == Product:
            raise _error("UNSUPPORTED", "gradsync: allreduce with op=Product is not "
                                        "differentiable in gradsync.torch")
        held, = ctx.saved_tensors
        total = synchronize(allreduce_async(grad.contiguous(), None, ctx.name, Sum))
        ties = synchronize(allreduce_async(held, None, ctx.name, Sum))
        return total * held / ties.clamp_min(1), None, None


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        handle = allgather_async(tensor, name)
        out = synchronize(handle)
        dim0s = handle._extra
        ctx.offset, ctx.rows = sum(dim0s[:rank()]), dim0s[rank()]
        ctx.shape, ctx.name = tensor.shape, name
        return out

    @staticmethod
    def backward(ctx, grad):
        total = synchronize(allreduce_async(grad.contiguous(), None, ctx.name, Sum))
        return total.narrow(0, ctx.offset, ctx.rows).reshape(ctx.shape), None


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root, ctx.name = _root(root_rank), name
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        total = synchronize(allreduce_async(grad.contiguous(), None, ctx.name, Sum))
        if rank() != ctx.root:
            total.zero_()
        return total, None, None


class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        handle = alltoall_async(tensor, splits, name)
        out = synchronize(handle)
        ctx.rsplits, ctx.shape, ctx.name = handle._extra, tensor.shape, name
        return out

    @staticmethod
    def backward(ctx, grad):
        back = synchronize(alltoall_async(grad.contiguous(), ctx.rsplits, ctx.name))
        return back.reshape(ctx.shape), None, None


def barrier():
    _C.ibarrier().wait()


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's `obj` on every rank (pickled with torch.save)."""
    del name
    if rank() == root_rank:
        buf = io.BytesIO()
        torch.save(obj, buf)
        data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank)
    if rank() != root_rank:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank)
    if rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(data.numpy().tobytes()))


def allgather_object(obj, name=None):
    """The list of every rank's `obj`, in rank order."""
    del name
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
    lengths = allgather(torch.tensor([data.numel()], dtype=torch.int64)).tolist()
    everything = allgather(data)
    out, at = [], 0
    for n in lengths:
        out.append(torch.load(io.BytesIO(everything[at:at + n].numpy().tobytes())))
        at += n
    return out


def broadcast_parameters(params, root_rank=0):
    """Overwrites every tensor of `params` (a state_dict, or an iterable of
    (name, tensor)) with root_rank's, in place. Non-contiguous tensors are
    broadcast through a contiguous copy."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
    items = [(name, p) for name, p in items if p is not None]
    _agree_names("broadcast_parameters", [name for name, _ in items])
    pending = []
    for name, p in items:
        t = p.data if isinstance(p, torch.nn.Parameter) else p
        if isinstance(t, torch.Tensor) and t.dtype not in _DTYPES and \
                t.layout == torch.strided and t.device.type == "cpu":
            # bool masks, int8 quantisation buffers, ...: a broadcast
            # copies bytes, whatever they mean.
            tmp = t.contiguous().reshape(-1).view(torch.uint8)
            pending.append((broadcast_async_(tmp, root_rank, name), t, tmp))
            continue
        _check(t, f"parameter '{name}'")
        if t.is_contiguous():
            pending.append((broadcast_async_(t, root_rank), None, None))
        else:
            tmp = t.contiguous()
            pending.append((broadcast_async_(tmp, root_rank), t, tmp))
    for handle, target, tmp in pending:
        handle.wait()
        if target is not None:
            target.copy_(tmp.view(target.dtype).reshape(target.shape)
                         if tmp.dtype != target.dtype else tmp)


def _agree_names(what, names):
    """Every rank has the same names in the same order (one all-gather of
    them), else GradsyncError (MISMATCH) on every rank naming the first
    difference from rank 0: a rank with one tensor more would wait in a
    broadcast the others never make."""
    if size() == 1:
        return
    every = allgather_object(list(names))
    ref = every[0]
    for q, theirs in enumerate(every[1:], start=1):
        if theirs == ref:
            continue
        extra = [n for n in theirs if n not in set(ref)]
        missing = [n for n in ref if n not in set(theirs)]
        if extra:
            diff = f"rank {q} has '{extra[0]}', which rank 0 lacks"
        elif missing:
            diff = f"rank 0 has '{missing[0]}', which rank {q} lacks"
        else:
            k = next(i for i, (a, b) in enumerate(zip(ref, theirs)) if a != b)
            diff = f"the order differs: at position {k} rank 0 has '{ref[k]}', rank {q} '{theirs[k]}'"
        raise _error("MISMATCH", f"gradsync: {what}: ranks disagree on the tensors: {diff} "
                                 f"({len(ref)} on rank 0, {len(theirs)} on rank {q}); no rank "
                                 f"sent data")


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Makes every rank's optimizer state (momentum buffers, step counts,
    hyper-parameters) root_rank's: its state_dict is broadcast as one object
    and loaded."""
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None,
                             root_rank)
    if rank() != root_rank:
        # A DistributedOptimizer loads in place (its param_groups dicts,
        # which a scheduler made before wrapping shares, stay).
        optimizer.load_state_dict(state)


# ---- Compression -------------------------------------------------------------------

class Compressor:
    """A gradient compressor for DistributedOptimizer(compression=...), named
    by its spec (gradsync/compress.h): the engine compresses inside its own
    exchange, so this object carries no compress()/decompress() methods of
    its own, unlike Horovod's."""

    __slots__ = ("spec",)

    def __init__(self, spec):
        self.spec = _C.compression_check(str(spec))

    def __repr__(self):
        return f"gradsync.torch.Compressor({self.spec!r})"

    def __eq__(self, other):
        return isinstance(other, Compressor) and other.spec == self.spec

    def __hash__(self):
        return hash(self.spec)


class Compression:
    """Horovod's names for the compressors (hvd.Compression.none / .fp16),
    plus the others by spec. Any spec string works as well:
    compression="topk:0.01" is Compression.topk(0.01)."""

    none = Compressor("none")
    fp16 = Compressor("fp16")
    bf16 = Compressor("bf16")

    @staticmethod
    def topk(density):
        """The k = density * n entries of largest |g| of each message."""
        return Compressor(f"topk:{density!r}")

    @staticmethod
    def spec(spec):
        """Any compressor spec, or "auto:SPEC" (dense or SPEC per message,
        as the plan predicts faster)."""
        return Compressor(spec)


def _whole(name, value, least):
    """value as a whole number of at least `least`, or ValueError/TypeError
    naming the parameter (a float or a string is refused, not truncated)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"gradsync: {name} must be a whole number, not {value!r}")
    v = value.__index__()
    if v < least:
        raise ValueError(f"gradsync: {name} must be >= {least}, got {v}")
    return v


def _compression_spec(compression):
    """The engine's compression spec for a compression= argument: None for
    dense, else a normalised spec ("topk:0.01", "auto:topk:0.01"). A bad
    spec raises GradsyncError (INVALID_ARG) with the parser's message,
    before anything is sent."""
    if compression is None:
        return None
    if isinstance(compression, Compressor):
        spec = compression.spec
    elif isinstance(compression, str):
        spec = _C.compression_check(compression)
    else:
        raise TypeError(
            f"gradsync: compression= takes a spec string (\"topk:0.01\", \"fp16\", "
            f"\"powersgd:4\", \"auto:topk:0.01\", ...) or gradsync.torch.Compression.*, "
            f"not {compression!r}: the engine compresses inside its exchange, so "
            f"Horovod-style compressor classes with compress()/decompress() are not used")
    return None if spec == "none" else spec


# ---- SyncBatchNorm -----------------------------------------------------------------

def _aux_sum_(t):
    """Sums a contiguous float64 tensor over every rank in place, on the
    binding's second communicator (made at the first call, a collective):
    SyncBatchNorm's all-reduces run in forward and backward while the
    engine's gradient messages are under way on the first, and two streams
    of collectives on one communicator would have to be issued in the same
    order on every rank."""
    _C.aux_init()
    req = _C.iallreduce(0, _addr(t), t.numel(), _C.F64, Sum, t, 1)
    Handle(req, t).wait()
    return t


class _SyncBatchNormFn(torch.autograd.Function):
    """Batch normalisation over the samples of every rank: the channels'
    sums and sums of squares (float64) summed over the ranks in forward,
    the gradient's two channel sums in backward (torch.nn.SyncBatchNorm's
    arithmetic; the weight's and bias's gradients are this rank's, which
    DistributedOptimizer averages like any other)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum):
        C = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        shape = [1, C] + [1] * (x.dim() - 2)
        stats = torch.empty(2 * C + 1, dtype=torch.float64)
        stats[:C] = x.sum(dims, dtype=torch.float64)
        stats[C:2 * C] = (x * x).sum(dims, dtype=torch.float64)
        stats[2 * C] = x.numel() // max(C, 1)
        _aux_sum_(stats)
        n = float(stats[2 * C])
        if n < 2:
            raise ValueError(f"gradsync: SyncBatchNorm: expected more than 1 value per channel "
                             f"over every rank's batch, got {n:.0f} (input shape "
                             f"{list(x.shape)} here)")
        mean = stats[:C] / n
        var = (stats[C:2 * C] / n - mean * mean).clamp_min(0)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype),
                                                     alpha=momentum)
                running_var.mul_(1 - momentum).add_((var * (n / (n - 1))).to(running_var.dtype),
                                                    alpha=momentum)
        invstd = (var + eps).rsqrt().to(x.dtype)
        xhat = (x - mean.to(x.dtype).view(shape)) * invstd.view(shape)
        y = xhat if weight is None else xhat * weight.view(shape) + bias.view(shape)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.n = n
        return y

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd = ctx.saved_tensors
        C = xhat.shape[1]
        dims = [0] + list(range(2, xhat.dim()))
        shape = [1, C] + [1] * (xhat.dim() - 2)
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)
        g = torch.cat([sum_dy, sum_dy_xhat]).to(torch.float64)
        _aux_sum_(g)
        n = ctx.n
        mean_dy = (g[:C] / n).to(dy.dtype).view(shape)
        mean_dy_xhat = (g[C:] / n).to(dy.dtype).view(shape)
        scale = invstd if weight is None else invstd * weight
        dx = (dy - mean_dy - xhat * mean_dy_xhat) * scale.view(shape)
        dw = sum_dy_xhat if weight is not None else None
        db = sum_dy if weight is not None else None
        return dx, dw, db, None, None, None, None


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """torch.nn.SyncBatchNorm (and Horovod's hvd.SyncBatchNorm) over
    gradsync: in training, each channel's mean and variance are those of
    the samples of every rank's batch (one all-reduce of 2C + 1 numbers in
    forward, one of 2C in backward, on the binding's second communicator);
    in evaluation, the running statistics, which every rank updates alike.
    Any input of 2 or more dimensions (N, C, ...). One rank, or no
    gradsync.torch.init(): plain batch normalisation. The first training
    forward is collective (it makes the second communicator). Convert a
    model's BatchNorm layers with SyncBatchNorm.convert_sync_batchnorm(model)."""

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"gradsync: SyncBatchNorm: expected an input of 2 or more "
                             f"dimensions (N, C, ...), got {x.dim()}")

    def forward(self, x):
        self._check_input_dim(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average
                factor = 1.0 / float(self.num_batches_tracked)
        training = self.training or (self.running_mean is None and self.running_var is None)
        rm = self.running_mean if not self.training or self.track_running_stats else None
        rv = self.running_var if not self.training or self.track_running_stats else None
        if not training or not is_initialized() or size() == 1:
            return torch.nn.functional.batch_norm(x, rm, rv, self.weight, self.bias, training,
                                                  factor, self.eps)
        return _SyncBatchNormFn.apply(x.contiguous(), self.weight, self.bias, rm, rv, self.eps,
                                      factor)

    @classmethod
    def convert_sync_batchnorm(cls, module):
        """module with every BatchNorm1d/2d/3d (any _BatchNorm) inside it
        replaced by a SyncBatchNorm with its parameters, running statistics
        and settings; the module itself if it is one. Convert before
        building the optimizer: the parameters are the same tensors."""
        out = module
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
                not isinstance(module, cls):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats)
            if module.affine:
                with torch.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child))
        return out


# ---- DistributedOptimizer --------------------------------------------------------

class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's own class (as Horovod does), so
    isinstance() and the optimizer's step() keep working. The methods below
    are its additions; see DistributedOptimizer for the contract."""

    def __init__(self, params, named_parameters, policy, compression,
                 backward_passes_per_step, model, warmup_iters, timeline,
                 error_feedback, compress_warmup_steps, compress_momentum, ef_decay):
        super(self.__class__, self).__init__(params)
        self._gs_compress = _compression_spec(compression)
        self._gs_compress_given = compression is not None
        self._gs_set_compress_options(policy, error_feedback, compress_warmup_steps,
                                      compress_momentum, ef_decay)
        self._gs_k = _whole("backward_passes_per_step", backward_passes_per_step, 1)
        if not isinstance(policy, str):
            raise TypeError(f"gradsync: policy must be a string, not {type(policy).__name__}")
        _C.policy_check(policy)
        self._gs_policy = policy
        self._gs_warmup = -1 if warmup_iters is None else _whole("warmup_iters", warmup_iters, 0)
        if timeline is not None:
            where = os.path.dirname(os.path.abspath(timeline))
            if os.path.isdir(timeline) or not os.access(where, os.W_OK):
                raise ValueError(f"gradsync: timeline={timeline!r}: cannot write a file there "
                                 f"({'a directory' if os.path.isdir(timeline) else where + ' is not a writable directory'})")
        self._gs_timeline = timeline
        self._gs_model = model
        # DeAR's forward overlap (policy "dear" or "auto" with the model):
        # step() only finishes the reduce-scatters; each parameter's
        # all-gather and update happen in the next forward, in a pre-hook of
        # its module. With "auto" the engine may choose dear among the other
        # plans by the cost model (forward_overlap); whichever it chooses,
        # the updates are applied in the pre-hooks.
        self._gs_overlap = policy in ("dear", "auto") and model is not None
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"gradsync: model= must be a torch.nn.Module, "
                            f"not {type(model).__name__}")

        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters.items() if isinstance(named_parameters, dict)
                         else named_parameters)
            bad = [x for x in named if not (isinstance(x, (tuple, list)) and len(x) == 2
                                            and isinstance(x[0], str)
                                            and isinstance(x[1], torch.Tensor))]
            if bad:
                raise TypeError(f"gradsync: named_parameters must give (name, parameter) pairs "
                                f"(model.named_parameters(), or a dict of them), not "
                                f"{type(bad[0]).__name__}")
            names = [n for n, _ in named]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"gradsync: named_parameters has duplicate names: {dup}")
            by_param = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(all_params) if id(p) not in by_param]
            if unnamed:
                raise ValueError(f"gradsync: named_parameters was given, but {len(unnamed)} "
                                 f"parameter(s) of the optimizer are not in it (positions "
                                 f"{unnamed[:8]} of its parameter groups)")
        else:
            by_param = {id(p): f"param.{i}" for i, p in enumerate(all_params)}
        self._gs_by_param = by_param
        self._gs_params = []
        self._gs_names = []
        self._gs_counts = []
        self._gs_first = []          # first iteration: the order gradients arrive in
        self._gs_engine = None
        self._gs_ids = []            # engine ids, by parameter index
        self._gs_bufs = []           # the registered gradient buffers
        self._gs_pending = []        # overlap: averaged, update not yet applied
        self._gs_ver = []            # by index: p.grad's _version when handed to the
                                     # engine (None: not handed since the last exchange)
        self._gs_changed = None      # names of gradients changed in place while averaged
        self._gs_zero_later = []     # overlap: zero_grad() came before the update
        self._gs_accs = []
        self._gs_hooks = []
        self._gs_unused = set()      # indices no rank computed a gradient for this step
        self._gs_hooked = set()      # id() of the parameters taken over
        self._gs_none = []           # by index: torch's p.grad would be None (never
                                     # computed, or zero_grad(set_to_none=True) since)
        self._gs_active = None       # the ranks that stepped at the last exchange (join)
        self._gs_joining = False     # inside join()
        self._gs_joined = False      # join(): this rank's data ended; it shadows the others
        self._gs_join_throw = False  # join(throw_on_early_termination=True)
        self._gs_join_world = False  # join(divide_by_initial_world_size=True)
        self._gs_ended = None        # the ranks whose data ended, to raise (throw)
        self._gs_open = False        # a gradient arrived since the last synchronize
        self._gs_synced = False      # synchronized, and step() has not run since
        self._gs_failed = None       # the GradsyncError that failed this optimizer
        self._gs_skip = False
        self._gs_closed = False
        self._gs_hyper = None  # overlap: the groups' hyper-parameters at that step()
        self._gs_now = False   # overlap: synchronize() was called: step() updates now
        self._gs_register(all_params)
        global _optimizers_made
        _optimizers_made += 1
        _optimizers[_optimizers_made] = self

    def _gs_register(self, params):
        """Takes over the parameters that require a gradient among `params`
        (once each): a hook after each gradient's accumulation and, with
        DeAR's overlap, a forward pre-hook on its module. Before the first
        step only: the engine registers every gradient then."""
        seen = self._gs_hooked
        new = []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                new.append(p)
        first = len(self._gs_params)
        for j, p in enumerate(new):
            name = self._gs_by_param.get(id(p), f"param.{first + j}")
            _check(p.data, f"parameter '{name}'", floats_only=True)
        for j, p in enumerate(new):
            i = first + j
            self._gs_params.append(p)
            self._gs_names.append(self._gs_by_param.get(id(p), f"param.{i}"))
            self._gs_counts.append(0)
            self._gs_ids.append(None)
            self._gs_bufs.append(None)
            self._gs_pending.append(False)
            self._gs_ver.append(None)
            self._gs_zero_later.append(False)
            self._gs_none.append(p.grad is None)
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self._gs_hooks.append(acc.register_hook(self._gs_make_hook(i)))
            self._gs_accs.append(acc)  # the node must outlive the hook
        # The groups' parameters left without a hook (frozen when wrapped):
        # the only ones each step checks for a gradient (_gs_check_unhooked).
        self._gs_frozen = [q for g in self.param_groups for q in g["params"]
                           if id(q) not in seen]
        if self._gs_overlap and new:
            self._gs_add_forward_hooks(self._gs_model, range(first, len(self._gs_params)))

    def add_param_group(self, param_group):
        """torch.optim's add_param_group; the group's parameters are averaged
        like the others. Before the first step() only: the engine registers
        every gradient at the first step, on every rank alike."""
        if "_gs_params" not in self.__dict__:  # torch.optim's __init__
            return super(self.__class__, self).add_param_group(param_group)
        self._gs_usable()
        if self._gs_engine is not None:
            raise _error("STATE", "gradsync: add_param_group() after the first step(): the "
                                  "engine registered every gradient then; add the group "
                                  "before the first step, or close() this optimizer and wrap "
                                  "a new one")
        super(self.__class__, self).add_param_group(param_group)
        try:
            self._gs_register(self.param_groups[-1]["params"])
        except BaseException:
            self.param_groups.pop()
            raise

    def load_state_dict(self, state_dict):
        """torch.optim's load_state_dict, keeping this optimizer's
        param_groups dicts and state mapping (updated in place): a scheduler
        or a reference made on the optimizer before it was wrapped shares
        them, and torch's own version would replace them (on the ranks that
        load: broadcast_optimizer_state's non-root ranks)."""
        groups, state = self.param_groups, self.state
        super(self.__class__, self).load_state_dict(state_dict)
        if groups is self.param_groups:
            return
        for mine, loaded in zip(groups, self.param_groups):
            mine.update(loaded)
        loaded_state = self.state
        if loaded_state is not state:
            state.clear()
            state.update(loaded_state)
        self.param_groups, self.state = groups, state

    def _gs_set_compress_options(self, policy, error_feedback, warmup_steps, momentum,
                                 ef_decay):
        """Checks the compression options against each other and the policy
        (the checks `gradsync train` and the engine make), locally."""
        spec = self._gs_compress
        if not isinstance(error_feedback, bool):
            raise TypeError(f"gradsync: error_feedback must be True or False, "
                            f"not {error_feedback!r}")
        if isinstance(warmup_steps, float) and warmup_steps.is_integer():
            warmup_steps = int(warmup_steps)  # (5.0: a whole number all the same)
        warmup_steps = _whole("compress_warmup_steps", warmup_steps, 0)
        if ef_decay is not None and (isinstance(ef_decay, bool) or
                                     not 0 < float(ef_decay) <= 1):
            raise ValueError(f"gradsync: ef_decay must be above 0 and at most 1, "
                             f"got {ef_decay!r}")
        if not self._gs_compress_given and (not error_feedback or warmup_steps or
                                            momentum is not None or ef_decay is not None):
            raise ValueError("gradsync: error_feedback=False, compress_warmup_steps, "
                             "compress_momentum and ef_decay need compression= (a "
                             "compressor spec)")
        if not error_feedback and ef_decay is not None:
            raise ValueError("gradsync: ef_decay damps the error feedback that "
                             "error_feedback=False turns off: give one of them")
        if spec is not None:
            # The policy rule (dear sends its messages dense) is the library's.
            _C.compression_check(spec, None if policy is None else str(policy))
        self._gs_zmomentum = 0.0 if momentum is None else float(momentum)
        self._gs_move_momentum(spec or "none", momentum)
        self._gs_ef = error_feedback
        self._gs_zwarmup = int(warmup_steps)
        self._gs_ef_decay = 0.0 if ef_decay is None else float(ef_decay)

    def _gs_move_momentum(self, spec, momentum):
        """The library's momentum rule (gs_compress_spec_momentum): a
        compressor that applies momentum itself (DGC's momentum correction,
        Lin et al., ICLR 2018, Sec. 3.2) takes the optimizer's, which
        becomes 0; the move is announced with a warning. A compress_momentum
        that differs from the optimizer's, or a Nesterov momentum, is a
        ValueError, and so is a compress_momentum outside [0, 1)."""
        momentum = None if momentum is None else float(momentum)
        groups = {(float(g.get("momentum", 0) or 0), bool(g.get("nesterov", False)))
                  for g in self.param_groups}
        outcomes = []
        for m, nesterov in sorted(groups):
            try:
                outcomes.append(_C.compression_momentum(spec, m, nesterov, momentum))
            except GradsyncError as e:
                text = str(e).rsplit(" (", 1)[0]
                raise ValueError(f"{text} (the optimizer's momentum= and "
                                 f"DistributedOptimizer's compress_momentum=)") from None
        if not any(moved for _, _, moved in outcomes):
            return
        # One compressor momentum serves every message: param groups with
        # different momenta cannot all move into it (no C equivalent: the
        # command line has one optimizer momentum).
        if len(groups) > 1:
            raise ValueError(
                f"gradsync: compression '{spec}' applies one momentum inside the "
                f"compressor to every message, but the optimizer's param groups have "
                f"momenta {sorted(m for m, _ in groups)}: give them one momentum")
        zmomentum, kept, _ = outcomes[0]
        for g in self.param_groups:
            g["momentum"] = kept
        self._gs_zmomentum = zmomentum
        warnings.warn(
            f"gradsync: compression '{spec}' applies momentum inside the compressor "
            f"(DGC's momentum correction): the optimizer's momentum {zmomentum:g} moved "
            f"into it (compress_momentum={zmomentum:g}), and the param groups' momentum "
            f"is now 0", stacklevel=4)

    def _gs_add_forward_hooks(self, model, indices):
        """A forward pre-hook on every module that owns synchronised
        parameters `indices`: it waits for their averages and applies their
        update just before the module uses them (DeAR's overlap of the
        all-gathers with the forward pass). It runs before the module's
        other pre-hooks, which may compute the weight from the parameters
        (weight_norm, pruning's mask): they must see the updated ones."""
        index = {id(self._gs_params[i]): i for i in indices}
        covered = set()
        for module in model.modules():
            mine = [index[id(p)] for p in module.parameters(recurse=False) if id(p) in index]
            if mine:
                covered.update(mine)
                h = module.register_forward_pre_hook(self._gs_make_pre_hook(mine))
                # torch >= 2.0 has prepend=True; this is what it does.
                module._forward_pre_hooks.move_to_end(h.id, last=False)
                self._gs_hooks.append(h)
        missing = [self._gs_names[i] for i in indices if i not in covered]
        if missing:
            raise ValueError(f"gradsync: policy='{self._gs_policy}' with model=: the optimizer's "
                             f"parameters {missing[:5]} are not in the model")

    def _gs_make_pre_hook(self, indices):
        def pre_hook(module, inputs):
            if any(self._gs_pending[i] for i in indices):
                self._gs_apply(indices)

        return pre_hook

    def _gs_apply(self, indices):
        """Overlap: waits for the averages of parameters `indices` and runs
        the wrapped optimizer's step on them alone."""
        indices = [i for i in indices if self._gs_pending[i]]
        if not indices:
            return
        engine = self._gs_engine
        for i in indices:
            engine.wait_tensor(self._gs_ids[i])
        subset = {id(self._gs_params[i]) for i in indices}
        saved = [g["params"] for g in self.param_groups]
        now = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        try:
            for g, hyper in zip(self.param_groups, self._gs_hyper or now):
                g["params"] = [p for p in g["params"] if id(p) in subset]
                g.update(hyper)  # those of the step() that asked for this update
            super(self.__class__, self).step()
        finally:
            for g, params, hyper in zip(self.param_groups, saved, now):
                g["params"] = params
                g.update(hyper)
        for i in indices:
            self._gs_pending[i] = False
            if self._gs_zero_later[i]:
                self._gs_zero_later[i] = False
                self._gs_bufs[i].zero_()

    def finish(self):
        """Overlap (policy "dear" with model=): applies every update still
        waiting for the next forward, e.g. before evaluating without a
        forward pass, saving or comparing weights. A no-op otherwise.

        Collective under the overlap: it issues the all-gathers that the next
        forward would, so call it on every rank at the same point (rank 0
        alone before saving, then a collective, mismatched the ranks'
        collectives and failed with "ring receive failed")."""
        if self._gs_engine is not None:
            self._gs_apply(range(len(self._gs_params)))

    def _gs_make_hook(self, i):
        """The hook that runs after autograd has accumulated parameter i's
        gradient: the engine's grad_ready on the hot path."""
        p = self._gs_params[i]
        k = self._gs_k
        counts = self._gs_counts

        def hook(*unused):
            self._gs_usable()
            c = counts[i] + 1
            counts[i] = c
            opened = not self._gs_open
            self._gs_open = True
            if c < k:
                return
            if self._gs_pending[i]:
                raise _error(
                    "STATE", f"gradsync: '{self._gs_names[i]}' got a gradient while its "
                    "update from the last step was still waiting for its module's forward "
                    "pre-hook: with policy='dear' and model=, parameters must be used inside "
                    "their own module's forward (or call finish() before the forward)")
            if c > k:
                # Said here: the exchange does not say it again (this pass
                # has already added to the gradient being averaged).
                self._gs_ver[i] = None
                raise _error(
                    "STATE", f"gradsync: the gradient of '{self._gs_names[i]}' was computed "
                    f"{c} times before step(), more than backward_passes_per_step={k}")
            engine = self._gs_engine
            if engine is None:
                self._gs_first.append(i)
                return
            if p.grad is not self._gs_bufs[i]:
                self._gs_adopt(i)
            if opened:
                self._gs_send_lr(engine)
            # An in-place change after this (clip_grad_norm_ between
            # backward() and step(), as in a DDP script) races with the
            # averaging: its version counter tells, at the exchange.
            self._gs_ver[i] = p.grad._version
            engine.grad_ready(self._gs_ids[i])

        return hook

    def _gs_send_lr(self, engine):
        """At an iteration's first gradient: the rate its averages will be
        applied with, so that compressed messages rescale their error
        feedback when the schedule changes it (gs_engine_set_lr). The first
        parameter group's rate stands for all."""
        if self._gs_compress is not None:
            lr = float(self.param_groups[0]["lr"])
            if lr > 0:
                engine.set_lr(lr)

    def _gs_adopt(self, i):
        """Parameter i's gradient is a new tensor (zero_grad(set_to_none=True),
        or an assignment): move it into the registered buffer."""
        p, buf = self._gs_params[i], self._gs_bufs[i]
        if p.grad is not None:
            buf.copy_(p.grad.to_dense() if p.grad.is_sparse else p.grad)
        else:
            buf.zero_()
        p.grad = buf

    def _gs_start(self):
        """First synchronize: agree on the parameters and their order with
        every rank, create the engine and register every gradient in forward
        order (the reverse of the order their gradients arrived in on rank 0;
        parameters without a gradient go first), then mark the gradients
        already computed. Collective."""
        n = len(self._gs_params)
        nr = size()
        counts = allgather(torch.tensor([n], dtype=torch.int64)).tolist()
        if len(set(counts)) != 1:
            raise _error(
                "MISMATCH", f"gradsync: DistributedOptimizer: ranks have different numbers of "
                f"parameters to synchronise "
                f"({', '.join(f'rank {r}: {c}' for r, c in enumerate(counts))})")
        first = set(self._gs_first)
        order = [i for i in range(n) if i not in first] + list(reversed(self._gs_first))
        order_t = torch.tensor(order, dtype=torch.int64)
        if nr > 1:
            broadcast_(order_t, 0)
        order = order_t.tolist()
        overlap = 1 if self._gs_overlap else 0
        engine = _C.Engine(policy=self._gs_policy, warmup_iters=self._gs_warmup,
                           forward_overlap=overlap, timeline=self._gs_timeline,
                           compress=self._gs_compress, error_feedback=self._gs_ef,
                           compress_warmup_steps=self._gs_zwarmup,
                           compress_momentum=self._gs_zmomentum,
                           ef_decay=self._gs_ef_decay)
        self._gs_engine = engine
        for i in order:
            p = self._gs_params[i]
            g = p.grad
            if g is None or g.is_sparse or not g.is_contiguous() or g.dtype != p.dtype:
                buf = torch.zeros_like(p, memory_format=torch.contiguous_format)
                if g is not None:
                    # A sparse gradient (nn.Embedding(sparse=True)) is averaged
                    # dense, as Horovod's sparse_as_dense=True.
                    buf.copy_(g.to_dense() if g.is_sparse else g)
                p.grad = buf
            self._gs_bufs[i] = p.grad
            buf = p.grad
            self._gs_ids[i] = engine.register(self._gs_names[i], _addr(buf), buf.numel(),
                                              _FLOAT_DTYPES[buf.dtype], buf)
        self._gs_send_lr(engine)
        for i in self._gs_first:
            engine.grad_ready(self._gs_ids[i])

    def synchronize(self):
        """Waits until every gradient of this step is averaged over the ranks
        (in place, in p.grad). Parameters without a gradient on this rank
        count as zeros (DDP's find_unused_parameters=True) and receive the
        average. Called by step(); call it yourself to look at or change the
        averaged gradients first (then step() inside skip_synchronize()).
        With DeAR's overlap (policy "dear" with model=) a call of your own
        waits for the all-gathers too, and the step() after it updates at
        once: that step gives up the overlap."""
        self._gs_synchronize(explicit=True)

    def _gs_usable(self):
        """Raises if this optimizer was closed or failed: a failure of the
        engine or of the first step's checks (ranks whose models differ) is
        repeated by every later call, which cannot go on."""
        if self._gs_closed:
            raise _error("STATE", "gradsync: this DistributedOptimizer was closed")
        if self._gs_failed is not None:
            e = self._gs_failed
            text = str(e).rsplit(" (", 1)[0]
            raise _error(e.status, f"gradsync: this DistributedOptimizer failed at an earlier "
                                   f"step and cannot go on (close() it): {text}")

    def _gs_synchronize(self, explicit):
        self._gs_usable()
        # Whether to exchange depends on calls every rank makes alike, never
        # on this rank's backward passes: a rank that computed no gradient
        # (no data this step) still exchanges, contributing zeros, as the
        # others wait for it. The one skip: synchronize() was called and no
        # gradient came since (step() after it, or synchronize() twice).
        if self._gs_synced and not self._gs_open:
            return
        try:
            self._gs_exchange(explicit)
        except GradsyncError as e:
            self._gs_failed = e
            raise
        self._gs_synced = True
        if self._gs_ended:
            ended, self._gs_ended = self._gs_ended, None
            self._gs_now = False  # under the overlap: this step's update is not applied
            who = ", ".join(str(q) for q in ended)
            raise _error("JOINED", f"gradsync: join(throw_on_early_termination=True): the "
                                   f"data of rank{'s' if len(ended) > 1 else ''} {who} ended "
                                   f"before this step; every rank raises here and none applies "
                                   f"it (rank {rank()})")
        # A gradient replaced by a new tensor after its hook handed the
        # buffer to the engine: its average was under way, and every rank
        # has issued its collectives, so the new tensor can no longer be
        # averaged. Say so rather than drop it silently.
        replaced = []
        for i, p in enumerate(self._gs_params):
            if p.grad is not self._gs_bufs[i]:
                replaced.append(self._gs_names[i])
                p.grad = self._gs_bufs[i]
        self._gs_check_unhooked()
        if self._gs_changed:
            changed, self._gs_changed = self._gs_changed, None
            # Under the overlap nothing is applied either: the all-gathers
            # are waited for here, and no pre-hook applies them.
            self._gs_now = False
            for i, pending in enumerate(self._gs_pending):
                if pending:
                    self._gs_engine.wait_tensor(self._gs_ids[i])
                    self._gs_pending[i] = False
            more = _and_more(changed)
            raise _error(
                "STATE", f"gradsync: the gradient of '{changed[0]}'{more} was changed in place "
                f"after backward() handed it to the engine and before step() waited for its "
                f"average (clip_grad_norm_ or p.grad.mul_() between backward() and step(), as "
                f"in a DDP script): the change raced with the averaging, and the ranks would "
                f"differ; this step was not applied. Call opt.synchronize() first, change the "
                f"averaged gradients, then step() inside `with opt.skip_synchronize():`")
        if replaced:
            more = _and_more(replaced)
            raise _error(
                "STATE", f"gradsync: the gradient of '{replaced[0]}'{more} was replaced by a new "
                f"tensor after backward() had handed it to the engine for averaging: the new "
                f"tensor cannot be averaged any more and was dropped (p.grad holds the average "
                f"of the gradients backward() computed). Change the averaged gradient after "
                f"opt.synchronize() (then step() inside `with opt.skip_synchronize():`), or "
                f"replace it before backward() computes it")

    def _gs_check_unhooked(self):
        """A parameter of the groups that has a gradient but no hook (it did
        not require one when it was wrapped: frozen, then unfrozen) is never
        averaged, and the ranks would drift apart: raise instead."""
        for p in self._gs_frozen:
            if p.grad is not None and p.requires_grad:
                name = self._gs_by_param.get(id(p), "a parameter")
                raise _error(
                    "STATE", f"gradsync: '{name}' has a gradient, but it did not require "
                    f"one when this DistributedOptimizer was made (frozen then, unfrozen "
                    f"since), so no rank averages it; this step was not applied. Wrap the "
                    f"optimizer again after unfreezing (gs.DistributedOptimizer(base, ...) "
                    f"closes this one and keeps its state), or wrap after unfreezing")

    def _gs_exchange(self, explicit):
        """synchronize's exchange: every tensor not yet handed over goes now
        (zeros for those without a gradient), then waits for the averages."""
        if self._gs_engine is None:
            self._gs_start()
        engine = self._gs_engine
        if self._gs_overlap:
            # Updates of parameters no forward used since the last step: their
            # all-gathers are done (first grad_ready, or done here), and the
            # wait below writes their buffers again.
            self._gs_apply(range(len(self._gs_params)))
        k = self._gs_k
        used = []
        for i, c in enumerate(self._gs_counts):
            p = self._gs_params[i]
            # step() before k passes: what was accumulated counts; a gradient
            # assigned to a parameter backward did not reach counts too.
            if not self._gs_overlap:
                used.append(1 if c > 0 or (p.grad is not None and p.grad is not self._gs_bufs[i])
                            else 0)
            if 0 < c < k or (c == 0 and p.grad is not None and p.grad is not self._gs_bufs[i]):
                if p.grad is not self._gs_bufs[i]:
                    self._gs_adopt(i)
                engine.grad_ready(self._gs_ids[i])
        engine.wait()
        changed = [self._gs_names[i] for i, v in enumerate(self._gs_ver)
                   if v is not None and self._gs_bufs[i]._version != v]
        self._gs_ver[:] = [None] * len(self._gs_ver)
        if changed:
            self._gs_changed = changed
        # Which parameters some rank computed a gradient for: the others'
        # p.grad is None at the optimizer's step, as torch (and DDP, with
        # find_unused_parameters=True) leave a parameter no backward reached.
        # The engine is idle here, so the flags' all-reduce cannot interleave
        # with its messages. Not under DeAR's overlap, where the all-gathers
        # are still to come on the same communicator: the all-reduce would
        # wait behind them, and an all-reduce issued beside the engine's is
        # an order the ranks must share; so there a parameter no rank used
        # gets zeros, as before 2026-12-06.
        # The same all-reduce carries which ranks stepped (join(): a rank
        # whose data ended contributes zeros and no step): the averages are
        # over those ranks' gradients, as one process stepping on the
        # samples this step had.
        if not self._gs_overlap:
            self._gs_flags(used)
        for i in range(len(self._gs_params)):
            self._gs_counts[i] = 0
        self._gs_open = False
        if self._gs_overlap and (explicit or self._gs_joining):
            # The caller reads p.grad now: every all-gather is waited for,
            # and step() updates at once. Inside join() too: the engine is
            # then idle for the flag of who stepped (join() gives up the
            # all-gathers' overlap with the next forward).
            for i in range(len(self._gs_params)):
                engine.wait_tensor(self._gs_ids[i])
            self._gs_now = True
            if self._gs_joining:
                self._gs_flags(None)
        elif self._gs_overlap:
            self._gs_pending[:] = [True] * len(self._gs_pending)

    def _gs_flags(self, used):
        """The all-reduce, after an exchange with the engine idle, of which
        parameters some rank used (`used`, this rank's 0/1 per parameter;
        None: not exchanged, under DeAR's overlap) and of which ranks
        stepped; rescales the averages to the stepping ranks' mean."""
        nr = size()
        n = len(used) if used is not None else 0
        stepped = [0] * nr
        stepped[rank()] = 0 if self._gs_joined else 1
        flags = torch.tensor((used or []) + stepped, dtype=torch.int32)
        if nr > 1:
            flags = allreduce(flags, op=Sum)
        flags = flags.tolist()
        if used is not None:
            self._gs_unused = {i for i, u in enumerate(flags[:n]) if u == 0}
            for i, u in enumerate(flags[:n]):
                if u:
                    self._gs_none[i] = False
        self._gs_active = [q for q, a in enumerate(flags[n:]) if a]
        if 0 < len(self._gs_active) < nr and self._gs_join_throw:
            # join(throw_on_early_termination=True): every rank raises at
            # the end of this exchange, with no update applied.
            self._gs_ended = [q for q in range(nr) if q not in self._gs_active]
        if 0 < len(self._gs_active) < nr and not self._gs_join_world:
            scale = nr / len(self._gs_active)
            for i, buf in enumerate(self._gs_bufs):
                if i not in self._gs_unused:
                    buf.mul_(scale)

    @contextlib.contextmanager
    def join(self, enable=True, throw_on_early_termination=False,
             divide_by_initial_world_size=False):
        """Uneven inputs: a context manager around the training loop, on
        every rank, for data that gives ranks different numbers of steps
        (DDP's join(), Horovod's hvd.join()):

            with opt.join():
                for x, y in my_shard:      # 5 batches here, 7 there
                    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

        A rank whose loop ends waits in join()'s exit and takes part in the
        others' exchanges with zeros, stepping nothing, until every rank has
        left its loop. Each step's average is over the ranks that stepped
        (their gradients' mean, as one process on that step's samples), not
        over the world size. On exit every rank has the parameters, the
        optimizer state and the model's buffers (with model=) of a rank that
        stepped last: it is broadcast to the ranks that ended early. Inside
        the loop this optimizer's steps must be the only collectives.
        Without join(), a rank whose loop ends while others step ends the
        job naming it (docs/RELIABILITY.md). An exception in the loop is not
        shadowed: it propagates, as without join(). Under DeAR's forward
        overlap (policy "dear" or "auto" with model=) each step inside
        join() waits for its all-gathers and updates at once, as after an
        explicit synchronize(): the overlap with the next forward is given
        up while in join(), so that the engine is idle for the flag.

        DDP's keywords, with the same meaning (every rank must pass the
        same): enable=False makes join() do nothing (the loop must then have
        even inputs). throw_on_early_termination=True: at the first step
        some rank does not take (its loop ended), every rank raises
        GradsyncError (status "JOINED", a RuntimeError as DDP's), the
        ranks still stepping from step() and the others from join()'s exit;
        no rank applies that step, so every rank keeps the parameters of
        the last step all took, and the optimizer stays usable (zero_grad()
        and train on). divide_by_initial_world_size=True divides each
        step's sum by the world size, as DDP does by default, instead of by
        the ranks that stepped: the steps with fewer ranks are then
        smaller."""
        for key, v in (("enable", enable),
                       ("throw_on_early_termination", throw_on_early_termination),
                       ("divide_by_initial_world_size", divide_by_initial_world_size)):
            if not isinstance(v, bool):
                raise TypeError(f"join(): {key}={v!r} (True or False)")
        self._gs_usable()
        if not enable:
            yield self
            return
        if self._gs_joining:
            raise _error("STATE", "gradsync: join() inside join() of the same optimizer")
        self._gs_joining = True
        self._gs_join_throw = throw_on_early_termination
        self._gs_join_world = divide_by_initial_world_size
        self._gs_active = None  # who stepped, from this join()'s steps on
        try:
            yield self
            self._gs_join_shadow()
        finally:
            self._gs_joining = False
            self._gs_joined = False
            self._gs_join_throw = False
            self._gs_join_world = False
            self._gs_ended = None

    def _gs_join_shadow(self):
        """join()'s exit: exchanges zeros, stepping nothing, while any rank
        still steps; then the ranks that ended early take the parameters and
        state of one that stepped last. Collective."""
        if self._gs_open:
            raise _error("STATE", "gradsync: join(): backward() ran after the last step() "
                                  "on this rank: call step() before the loop ends")
        self._gs_joined = True
        last = self._gs_active
        while True:
            self._gs_synced = False
            self._gs_synchronize(explicit=False)
            self._gs_synced = False
            if not self._gs_active:
                break
            last = self._gs_active
        self._gs_joined = False
        self._gs_now = False  # under the overlap: no step() consumes the last round's
        if last is None or len(last) == size():
            return
        root = last[0]
        broadcast_parameters(list(zip(self._gs_names, self._gs_params)), root_rank=root)
        broadcast_optimizer_state(self, root_rank=root)
        if self._gs_model is not None:
            broadcast_parameters(list(self._gs_model.named_buffers()), root_rank=root)

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (it was done
        explicitly before)."""
        self._gs_skip = True
        try:
            yield
        finally:
            self._gs_skip = False

    def step(self, closure=None):
        if closure is not None and self._gs_overlap:
            raise ValueError("gradsync: step(closure) is not available with policy='dear' "
                             "(or 'auto') and model=: the update happens in the next forward")
        if closure is not None and not self._gs_skip:
            # The closure computes the gradients inside step() (and LBFGS
            # calls it again and again): each of its backward passes is
            # averaged before the optimizer reads it. The gradients from
            # before step() were averaged at the last step.
            def averaged():
                loss = closure()
                self._gs_synchronize(explicit=False)
                return loss
            self._gs_usable()
            try:
                return self._gs_without_unused(lambda: super(self.__class__, self).step(averaged))
            finally:
                self._gs_synced = False
        if not self._gs_skip:
            self._gs_synchronize(explicit=False)
        elif not self._gs_closed:
            self._gs_usable()
        self._gs_synced = False
        if self._gs_overlap and self._gs_engine is not None and not self._gs_now:
            # Each module's pre-hook applies its update, with the
            # hyper-parameters of now (a scheduler may change them before
            # the next forward).
            self._gs_hyper = [{k: v for k, v in g.items() if k != "params"}
                              for g in self.param_groups]
            return None
        self._gs_now = False
        return self._gs_without_unused(lambda: super(self.__class__, self).step(closure))

    def _gs_without_unused(self, run):
        """Runs the wrapped optimizer's step with p.grad None for the
        parameters that no rank computed a gradient for at the last
        exchange and whose gradient torch would have left None (never
        computed, or zero_grad(set_to_none=True) since it last was), as
        torch and DDP leave them: weight decay and momentum do not move
        them. A parameter whose gradient was zeroed in place keeps zeros, as
        in torch. p.grad is the engine's buffer again after. (Never
        under DeAR's overlap, whose updates run in _gs_apply: no flags are
        exchanged there, see _gs_exchange.)"""
        hidden = [i for i in self._gs_unused if self._gs_none[i]]
        for i in hidden:
            self._gs_params[i].grad = None
        try:
            return run()
        finally:
            for i in hidden:
                if self._gs_params[i].grad is None:
                    self._gs_params[i].grad = self._gs_bufs[i]

    def zero_grad(self, set_to_none=_SET_TO_NONE_DEFAULT):
        """Zeros the gradients in place (set_to_none's default is this
        torch's). set_to_none=True is honoured only for parameters gradsync
        does not synchronise: the engine averages into fixed buffers, and
        p.grad stays that buffer; but a parameter that then gets no gradient
        on any rank before step() has p.grad None in step(), as torch would
        leave it (with set_to_none=False, zeros, which momentum and weight
        decay act on, as in torch)."""
        if not self._gs_closed:
            self._gs_usable()
        if self._gs_engine is None:  # first iteration: nothing handed over yet
            self._gs_counts[:] = [0] * len(self._gs_counts)
            self._gs_first.clear()
            self._gs_open = False
        elif self._gs_open:
            raise _error("STATE", "gradsync: zero_grad() between backward() and step(): the "
                                  "gradients of this step are being averaged; call step() or "
                                  "synchronize() first")
        elif self._gs_overlap:
            # The pending averages are read by the updates in the next
            # forward: zero those gradients after their update.
            for i, p in enumerate(self._gs_params):
                if self._gs_pending[i]:
                    self._gs_zero_later[i] = True
                elif p.grad is not None:
                    p.grad.zero_()
            return None
        if set_to_none:
            self._gs_none[:] = [True] * len(self._gs_none)
        return super(self.__class__, self).zero_grad(
            set_to_none=set_to_none and self._gs_engine is None)

    def engine_stats(self):
        """The engine's counters (gs_engine_stats) as a dict, or None before
        the first step: iterations, policy, chosen, groups, messages, comm_s,
        wait_s, unready, and for compression compressed_messages,
        compressed_groups, compress_s (coding time), bytes_sent (what this
        rank put on the wire for gradients: payloads for compressed
        messages) and bytes_dense (the dense size of the same messages);
        `compression` is the spec in use ("none" for dense)."""
        if self._gs_engine is None:
            return None
        stats = self._gs_engine.stats()
        stats["compression"] = self._gs_compress or "none"
        stats["error_feedback"] = self._gs_ef
        return stats

    def profile(self, batch_size=0, name=None, source=None):
        """The profile the engine's plan was made from, as JSON text in the
        format `gradsync plan --profile` reads (docs/PLANNING.md,
        "Profiles"): rank 0's forward time and each gradient's size and
        backward time, measured over the warm-up iterations and sent to
        every rank with the plan. None before the first plan. batch_size
        (the samples a rank trains a step), name and source replace the
        profile's own when given. Local: no communication."""
        if self._gs_engine is None:
            return None
        if not (isinstance(batch_size, int) and batch_size >= 0):
            raise ValueError(f"profile: batch_size {batch_size!r} (an integer, at least 0)")
        return self._gs_engine.profile(batch_size, name, source)

    def close(self):
        """Destroys the engine (on every rank: call it everywhere, after a
        step). Later steps raise. shutdown() closes every optimizer."""
        if self._gs_closed:
            return
        if self._gs_overlap and self._gs_engine is not None:
            self.finish()
        self._gs_closed = True
        for h in self._gs_hooks:
            h.remove()
        engine, self._gs_engine = self._gs_engine, None
        if engine is not None:
            engine.destroy()


def _close_earlier(optimizer):
    """Closes, with a warning, each live DistributedOptimizer made earlier
    over some of `optimizer`'s parameters: its hooks would still hand their
    gradients to its engine, whose collectives the other ranks would meet
    in the new one's (a stall until the watchdog's timeout, 2026-12-06).
    Every rank wraps at the same point of the script, so every rank closes
    the same ones, in the order they were made (close is collective under
    DeAR's overlap)."""
    mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
    for _, old in sorted(_optimizers.items()):
        if old._gs_closed:
            continue
        shared = [n for p, n in zip(old._gs_params, old._gs_names) if id(p) in mine]
        if shared:
            more = _and_more(shared)
            warnings.warn(f"gradsync: DistributedOptimizer: '{shared[0]}'{more} is averaged "
                          f"by an earlier DistributedOptimizer that was not closed: closing "
                          f"it now (its hooks would hand the same gradients to its engine); "
                          f"call close() on it before wrapping again", stacklevel=3)
            old.close()


def DistributedOptimizer(optimizer, named_parameters=None, policy="auto", compression=None,
                         backward_passes_per_step=1, model=None, warmup_iters=None,
                         timeline=None, error_feedback=True, compress_warmup_steps=0,
                         compress_momentum=None, ef_decay=None):
    """Wraps a torch.optim optimizer so that step() applies the gradients
    averaged over every rank by gradsync's engine.

    Every parameter that requires a gradient is registered with the engine
    at the first step, in forward order (learned from the order its
    gradients arrived in during the first backward pass). From then on,
    autograd's hook after each gradient's accumulation marks it ready, and
    the engine's background threads average it in the messages the `policy`
    plans (wfbp, single, bucket[:MB], mgwfbp, optimal, dear, auto), while
    backward goes on; step() waits for the averages, then updates.

    named_parameters: (name, parameter) pairs (model.named_parameters()); the
      names must match across ranks (checked at the first step: a difference
      raises GradsyncError on every rank). backward_passes_per_step: the
      number of backward passes accumulated locally before the average.
    warmup_iters: iterations measured under wfbp before a profiled policy
      plans (default 5). timeline: a Chrome-trace file (per rank).
    model: the torch.nn.Module the parameters belong to. With policy="dear"
      it turns on DeAR's forward overlap: step() returns after the
      reduce-scatters, and each module's forward pre-hook waits for its
      parameters' all-gathers and applies their update just before the
      module runs; finish() applies what is left (before evaluating without
      a forward, saving or comparing weights). Without model=, "dear" runs
      its all-gathers inside step(). With policy="auto" it lets the engine
      choose dear's overlap among the other plans by the cost model; the
      updates are then applied in the pre-hooks whatever plan it chose.
    compression: None (dense), a compressor spec as `gradsync train
      --compress` takes ("topk:0.01", "mstopk:0.01", "gtopk:0.01", "dgc:0.001",
      "randomk:0.01", "qsgd:16", "fp16", "bf16", "powersgd:4", "none", ...),
      "auto:SPEC" (each message dense or SPEC, whichever the plan predicts
      faster), or a gradsync.torch.Compression object (.none, .fp16, .bf16,
      .topk(d)). The engine sends every message of float32 gradients
      compressed; in a merged message top-k and mstopk keep each tensor's own
      k = max(1, floor(density * its size)) entries, as if it were sent
      alone (layer-wise selection), with its error-feedback residual beside
      it; float64, float16 and bfloat16 parameters always travel dense. A bad spec raises GradsyncError here, before anything is
      sent; ranks whose specs differ raise GradsyncError (MISMATCH) on every
      rank at the first step. Not with policy="dear" (use "auto:SPEC").
    error_feedback: keep the residual of compression and add it to the next
      step's gradient (default; `--no-ef` of gradsync train is False).
    compress_warmup_steps: DGC's exponential density warm-up, in steps.
    compress_momentum: DGC's momentum. DGC applies momentum inside the
      compressor, so with "dgc:D" the wrapped optimizer's momentum moves into
      it (the param groups' momentum becomes 0) with a warning; a
      compress_momentum that differs from a non-zero optimizer momentum, a
      Nesterov momentum, or param groups of different momenta raise
      ValueError. With an optimizer momentum of 0 it is DGC's (default 0.9).
    ef_decay: damp the error feedback, 0 < G <= 1: the residual becomes
      G * e + g each step (`gradsync train --ef-decay`). None: the
      compressor's default, 1 except randomk's 0.5.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"gradsync: DistributedOptimizer wraps a torch.optim.Optimizer, "
                        f"not {type(optimizer).__name__}")
    if "_gs_params" in optimizer.__dict__:
        raise TypeError("gradsync: DistributedOptimizer: this optimizer is a "
                        "DistributedOptimizer already; wrap the torch.optim optimizer once")
    _topo()
    _close_earlier(optimizer)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    opt = cls(optimizer.param_groups, named_parameters, policy, compression,
              backward_passes_per_step, model, warmup_iters, timeline, error_feedback,
              compress_warmup_steps, compress_momentum, ef_decay)
    # The wrapped optimizer's defaults (add_param_group fills a group from
    # them): the class's own __init__ above saw only the groups.
    opt.defaults = dict(optimizer.defaults)
    # The same param_groups dicts (torch.optim's __init__ keeps the dicts it
    # is given) and the same state: a scheduler made on `optimizer` before
    # wrapping drives this one, and its momentum carries over. Until
    # 2026-12-06 a load_state_dict here gave the wrapper new group dicts,
    # which such a scheduler no longer reached.
    opt.state = optimizer.state
    return opt

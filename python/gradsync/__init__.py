"""gradsync's Python binding.

`gradsync.torch` is the PyTorch interface (Horovod's shape: init, rank, size,
DistributedOptimizer, broadcast_parameters, allreduce, ...); docs/PYTORCH.md
describes it. `GradsyncError` is raised for every failure the library reports,
with the library's message; its `status` attribute names the gs_status
(MISMATCH, MPI, STATE, ...).
"""
from gradsync._C import GradsyncError

__all__ = ["GradsyncError"]
__version__ = "0.1.0"

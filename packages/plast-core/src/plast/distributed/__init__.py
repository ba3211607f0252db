"""plast.distributed: torch.distributed's names over MPI (DESIGN §8), in plast-core behind the `mpi` extra
(``pip install "./packages/plast-core[mpi]"``: mpi4py and the mpich wheel).

Nothing here imports mpi4py until a call needs MPI (``import plast`` never starts MPI). Start the ranks with
``python -m plast.distributed.run -n 2 script.py`` (mpiexec), then in the script::

    import plast, plast.distributed as dist
    dist.init_process_group("mpi")
    t = plast.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)   # in place on every rank: [1.5, 1.5, 1.5, 1.5] with 2 ranks

Tensors travel as numpy views on their own memory (no pickling, no copies through Python objects); a collective
that writes a tensor writes it the way plast's in-place ops do (buffers.py). Every wait has a deadline (60 s by
default): a dead or hung peer is a DistTimeoutError naming it, never a hang (group.py); world.py holds the default group.

>>> import plast.distributed as dist
>>> dist.is_initialized()
False
"""

from .collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    barrier,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .errors import DistBackendError, DistError, DistTimeoutError
from .group import ProcessGroup
from .p2p import irecv, isend, recv, send
from .work import Work
from .world import (
    GroupMember,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    new_group,
)

__all__ = [
    "DistBackendError",
    "DistError",
    "DistTimeoutError",
    "GroupMember",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_reduce_coalesced",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "isend",
    "new_group",
    "recv",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "send",
]

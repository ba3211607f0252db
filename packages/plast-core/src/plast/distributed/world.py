"""The default process group and torch.distributed's functions around it: init_process_group (joining the ranks
that mpiexec started), is_initialized, get_rank, get_world_size, new_group, destroy_process_group; and what a
rank does at exit: abort the MPI job when a group broke or an exception went uncaught (the peers would wait for it
until their timeout otherwise), and tell ``python -m plast.distributed.run`` that it finished (run.py).
"""

from __future__ import annotations

import atexit
import datetime
import os
import socket
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from ._mpi import available, mpi
from .errors import DistError
from .group import ProcessGroup


def _default_timeout():
    env = os.environ.get("PLAST_DIST_TIMEOUT")
    if env:
        try:
            return float(env)
        except ValueError:
            raise ValueError(f"PLAST_DIST_TIMEOUT must be a number of seconds, got {env!r}") from None
    return 60.0


def _seconds(timeout):
    if timeout is None:
        return _default_timeout()
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout} s")
    return timeout


class _State:
    def __init__(self):
        self.world = None  # the default ProcessGroup
        self.groups = []
        self.abort_at_exit = False
        self.hooks_installed = False
        self.launcher = None  # the socket to python -m plast.distributed.run, when it started this rank


_state = _State()


class GroupMember:
    """torch's ``GroupMember``: ``WORLD`` is the default group once initialized; ``NON_GROUP_MEMBER`` is what
    new_group returns on a rank outside the group."""

    WORLD = None
    NON_GROUP_MEMBER = None


group = GroupMember  # torch.distributed.group.WORLD


def is_available() -> bool:
    """Whether plast.distributed can run here (mpi4py is installed; nothing is imported by asking)."""
    return available()


def is_mpi_available() -> bool:
    return available()


def is_initialized() -> bool:
    """Whether init_process_group has run (and destroy_process_group has not)."""
    return _state.world is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: float | datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    **kwargs: Any,
) -> None:
    """Join the ranks started by ``mpiexec`` (or ``python -m plast.distributed.run``) as the default process group;
    one process started without mpiexec is a group of one.

    plast speaks MPI only: ``backend`` may be "mpi" or None (or "gloo"/"nccl", accepted so torch programs run
    unchanged; they run over MPI too). ``world_size`` and ``rank``, when given, must agree with what MPI says.

    >>> import plast.distributed as dist  # doctest: +SKIP
    >>> dist.init_process_group("mpi"); dist.get_rank(), dist.get_world_size()  # doctest: +SKIP
    (0, 1)
    """
    if backend not in (None, "mpi", "gloo", "nccl", "cpu:gloo,cuda:nccl"):
        raise ValueError(
            f"plast.distributed runs over MPI only: backend must be 'mpi' (or None), got {backend!r}"
        )
    if init_method not in (None, "env://"):
        raise ValueError(
            f"init_method={init_method!r}: plast's ranks find each other through mpiexec; start them with "
            "`python -m plast.distributed.run -n N script.py` and leave init_method unset"
        )
    unknown = set(kwargs) - {"store", "group_name", "pg_options", "device_id"}
    if unknown:
        raise TypeError(f"init_process_group got unexpected keyword arguments {sorted(unknown)}")
    if _state.world is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    MPI = mpi()
    comm = MPI.COMM_WORLD
    size, me = comm.Get_size(), comm.Get_rank()
    if world_size not in (-1, None) and world_size != size:
        raise ValueError(f"init_process_group: world_size={world_size}, but mpiexec started {size} ranks")
    if rank not in (-1, None) and rank != me:
        raise ValueError(f"init_process_group: rank={rank}, but MPI says this process is rank {me}")
    comm.Set_errhandler(MPI.ERRORS_RETURN)  # MPI errors become Python exceptions, not a silent abort
    _state.world = ProcessGroup(comm, range(size), _seconds(timeout))
    _state.groups = [_state.world]
    GroupMember.WORLD = _state.world
    _install_exit_hooks()
    _tell_launcher(me)


def _tell_launcher(rank):
    """Under ``python -m plast.distributed.run``, keep a connection to the launcher open for the life of this rank:
    it closes when the process ends, and says "exit" first when it ends on its own (run.py's _Watch)."""
    path = os.environ.get("PLAST_DIST_RUN_SOCKET")
    if not path or _state.launcher is not None:
        return
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        conn.sendall(f"{rank} {os.getpid()}\n".encode())
    except OSError:
        return  # an old or a foreign launcher: it just won't name a dead rank
    _state.launcher = conn
    atexit.register(_say_exit)


def _say_exit():
    try:
        _state.launcher.sendall(b"exit\n")
    except OSError:
        pass


def _install_exit_hooks():
    """An uncaught exception on one rank, or a timed-out wait, aborts the whole MPI job at exit: the peers would
    otherwise wait in their next collective until their own timeout."""
    if _state.hooks_installed:
        return
    _state.hooks_installed = True
    previous = sys.excepthook

    def excepthook(tp, value, tb):
        if _state.world is not None and _state.world.size() > 1:
            sys.stderr.write(f"[plast.distributed rank {_state.world.ranks[_state.world.rank()]}] ")
            _state.abort_at_exit = True
        previous(tp, value, tb)

    sys.excepthook = excepthook
    atexit.register(_abort_if_broken)


def _abort_if_broken():
    broken = any(g.broken is not None for g in _state.groups)
    if (broken or _state.abort_at_exit) and _state.world is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        # NOTE: the abort makes mpiexec tear the job down at once; output of this rank still on its way through
        # mpiexec's proxy (the traceback naming the rank that timed out) could be lost: give it a moment
        time.sleep(0.2)
        mpi().COMM_WORLD.Abort(1)


def usable_group(group, what):
    """The group to use (the default one when None), or None when this rank is not in it (torch warns and does
    nothing then)."""
    if _state.world is None:
        raise DistError(
            f"{what}: the default process group has not been initialized; call "
            "plast.distributed.init_process_group() first (and start the ranks with "
            "`python -m plast.distributed.run -n N script.py`)"
        )
    g = _state.world if group is None else group
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group(), got {type(g).__name__}")
    if g.comm is None:
        if g.ranks and g not in _state.groups:
            raise DistError(f"{what}: this process group was destroyed")
        warnings.warn(f"{what}: this rank is not in the process group; nothing is done", stacklevel=3)
        return None
    g.check_usable(what)
    return g


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in `group` (the default group when None); -1 when it is not in the group."""
    g = _state.world if group is None else group
    if g is None:
        raise DistError("get_rank: the default process group has not been initialized")
    return g.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in `group` (the default group when None); -1 when this rank is not in the group."""
    g = _state.world if group is None else group
    if g is None:
        raise DistError("get_world_size: the default process group has not been initialized")
    return g.size() if g.comm is not None else -1


def get_process_group_ranks(group: ProcessGroup) -> list[int]:
    """The global ranks in `group`, in the group's order."""
    return list(group.ranks)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    return group.ranks[group_rank]


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    return group.group_rank(global_rank, "get_group_rank")


def get_backend(group: ProcessGroup | None = None) -> str:
    usable_group(group, "get_backend")
    return "mpi"


def new_group(
    ranks: Sequence[int] | None = None,
    timeout: float | datetime.timedelta | None = None,
    backend: str | None = None,
    **kwargs: Any,
) -> ProcessGroup:
    """A process group of the global `ranks` (all ranks when None). Every rank of the default group must call it,
    members or not, in the same order (as in torch); a rank outside gets ``GroupMember.NON_GROUP_MEMBER``."""
    world = usable_group(None, "new_group")
    ranks = sorted(set(range(world.size()) if ranks is None else (int(r) for r in ranks)))
    bad = [r for r in ranks if not 0 <= r < world.size()]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are not in the default group of {world.size()} ranks")
    MPI = mpi()
    me = world.rank()
    member = me in ranks
    comm = world.comm.Split(0 if member else MPI.UNDEFINED, ranks.index(me) if member else 0)
    if not member:
        return GroupMember.NON_GROUP_MEMBER or _non_member()
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    g = ProcessGroup(comm, ranks, world.timeout_s if timeout is None else _seconds(timeout))
    _state.groups.append(g)
    return g


def _non_member():
    g = ProcessGroup(None, [], 0.0)
    GroupMember.NON_GROUP_MEMBER = g
    return g


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free `group`'s communicators; with None, every group and the default one (init_process_group may then run
    again)."""
    if _state.world is None:
        raise DistError("destroy_process_group: the default process group has not been initialized")
    if group is None or group is _state.world:
        for g in _state.groups:
            g.free()
        _state.world = None
        _state.groups = []
        GroupMember.WORLD = None
        return
    if group in _state.groups:
        _state.groups.remove(group)
        group.free()

"""Process groups over MPI communicators: the default group (every rank ``mpiexec`` started), ``new_group``
subgroups, their timeouts, and what happens when a peer is dead or hung.

Every request plast.distributed starts is non-blocking; ``ProcessGroup.wait`` polls it against the group's
deadline (default 60 s, ``timeout=`` of init_process_group / new_group, or ``PLAST_DIST_TIMEOUT`` in seconds).
While it polls it also answers other ranks' pings on a second communicator, so when a wait times out the rank
asks every peer whether it is alive and which collective it is in, and the error names the ones that did not
answer or disagree. After a timeout (or an uncaught exception on any rank) the process aborts the MPI job when
it exits, so no rank is left waiting for a peer that will never come.
"""

import atexit
import datetime
import os
import socket
import sys
import time
import warnings

import numpy as np

from ._mpi import available, mpi
from .errors import DistBackendError, DistError, DistTimeoutError

_PING, _PONG = 1, 2
_PING_GRACE_S = 3.0  # at most this much of a timeout goes to asking the peers "are you alive?"


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


class ProcessGroup:
    """A set of ranks that communicate together (torch's ProcessGroup): an MPI communicator, the global ranks it
    holds in its order, and its timeout. Ranks outside a subgroup hold one whose ``comm`` is None."""

    def __init__(self, comm, ranks, timeout_s):
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout_s = timeout_s
        self.seq = (
            0  # collectives started on this group: the ping answer, to tell a peer in another collective
        )
        # NOTE: pings travel on a duplicate of the communicator, so they never match a collective's messages
        self.diag = comm.Dup() if comm is not None else None
        self.broken = None  # the error that broke this group (a timed-out request stays pending in MPI)

    def rank(self):
        return self.comm.Get_rank() if self.comm is not None else -1

    def size(self):
        return len(self.ranks)

    def group_rank(self, global_rank, what):
        """The rank inside this group of a global rank (torch's src/dst arguments are global ranks)."""
        if global_rank not in self.ranks:
            raise ValueError(f"{what}: rank {global_rank} is not in this process group (ranks {self.ranks})")
        return self.ranks.index(global_rank)

    def __repr__(self):
        return f"<plast.distributed.ProcessGroup ranks={self.ranks} timeout={self.timeout_s}s>"

    # ---- waiting with a deadline ----
    def check_usable(self, what):
        if self.broken is not None:
            raise DistError(
                f"{what}: this process group is unusable after an earlier error ({self.broken}); "
                "restart the job (the last checkpoint is intact)"
            )

    def wait(self, reqs, what, timeout_s=None, statuses=None):
        """Wait for the MPI requests `reqs` (filling `statuses`), polling them against the deadline; raise
        DistTimeoutError naming the peers that did not answer when it passes."""
        total = self.timeout_s if timeout_s is None else timeout_s
        # the last part of the timeout is for asking the peers what became of them (_timed_out)
        deadline = time.monotonic() + total - min(_PING_GRACE_S, total / 4)
        spins = 0
        while not self._test(reqs, what, statuses):
            spins += 1
            if spins < 64:
                continue  # a collective between ranks of one machine usually ends within microseconds
            now = time.monotonic()
            if now > deadline:
                self._timed_out(what, total)
            if spins % 64 == 0:
                self.serve_pings()
            # NOTE: sleeping lets the peer rank use this core (2 ranks on 2 cores): spinning would slow it down
            time.sleep(min(1e-3, 1e-6 * (spins - 63)))

    @staticmethod
    def _test(reqs, what, statuses):
        MPI = mpi()
        try:
            return MPI.Request.Testall(reqs, statuses)
        except MPI.Exception as e:
            code = e.Get_error_code()
            if e.Get_error_class() == MPI.ERR_IN_STATUS and statuses:
                code = next((s.Get_error() for s in statuses if s.Get_error() != MPI.SUCCESS), code)
            raise DistBackendError(f"{what}: MPI error: {MPI.Get_error_string(code)}") from None

    def serve_pings(self):
        """Answer the peers that asked whether this rank is alive (see _timed_out)."""
        if self.diag is None:
            return
        MPI = mpi()
        status = MPI.Status()
        while self.diag.Iprobe(source=MPI.ANY_SOURCE, tag=_PING, status=status):
            src = status.Get_source()
            buf = np.empty(1, np.int64)
            self.diag.Recv(buf, source=src, tag=_PING)
            # small messages leave eagerly: this send does not wait for the peer
            self.diag.Send(np.array([self.seq], np.int64), dest=src, tag=_PONG)

    def _timed_out(self, what, total):
        MPI = mpi()
        me = self.rank()
        peers = [r for r in range(self.size()) if r != me]
        out = np.array([self.seq], np.int64)
        answers = {r: np.full(1, -1, np.int64) for r in peers}
        # NOTE: MPI may report an error for a peer that is gone; that peer then simply does not answer
        reqs = []
        for r in peers:
            try:
                reqs.append(self.diag.Isend(out, dest=r, tag=_PING))
                reqs.append(self.diag.Irecv(answers[r], source=r, tag=_PONG))
            except MPI.Exception:
                pass
        end = time.monotonic() + min(_PING_GRACE_S, total / 4)
        while time.monotonic() < end:
            try:
                self.serve_pings()
                if MPI.Request.Testsome(reqs) is None or all(a[0] >= 0 for a in answers.values()):
                    break
            except MPI.Exception:
                pass
            time.sleep(1e-3)
        silent = [self.ranks[r] for r in peers if answers[r][0] < 0]
        elsewhere = [
            f"rank {self.ranks[r]} is in collective #{answers[r][0]}"
            for r in peers
            if answers[r][0] >= 0 and answers[r][0] != self.seq
        ]
        parts = []
        if silent:
            names = ", ".join(map(str, silent))
            parts.append(
                f"rank{'s' if len(silent) > 1 else ''} {names} did not answer (dead, hung, or busy outside "
                "plast.distributed)"
            )
        if elsewhere:
            parts.append(f"this rank is in collective #{self.seq}, " + ", ".join(elsewhere))
        if not parts:
            parts.append("every peer answered and is in the same collective: MPI made no progress")
        msg = (
            f"{what} on rank {self.ranks[me]} timed out after {total:g} s: {'; '.join(parts)}. "
            "Raise the timeout with init_process_group(timeout=...) or PLAST_DIST_TIMEOUT if the peers are slow; "
            "this process aborts the MPI job when it exits"
        )
        self.broken = msg
        _state.abort_at_exit = True
        raise DistTimeoutError(msg)

    def free(self):
        for c in (self.diag, self.comm):
            if c is not None and c != mpi().COMM_WORLD:
                try:
                    c.Free()
                except Exception:  # noqa: BLE001 -- a broken communicator may refuse; it dies with the process
                    pass
        self.comm = self.diag = None


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


def is_available():
    """Whether plast.distributed can run here (mpi4py is installed; nothing is imported by asking)."""
    return available()


def is_mpi_available():
    return available()


def is_initialized():
    """Whether init_process_group has run (and destroy_process_group has not)."""
    return _state.world is not None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, **kwargs):
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
    if _state.abort_at_exit and _state.world is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        # NOTE: the abort makes mpiexec tear the job down at once; output of this rank still on its way through
        # mpiexec's proxy (the traceback naming the rank that timed out) could be lost: give it a moment
        time.sleep(0.2)
        mpi().COMM_WORLD.Abort(1)


def _group(group, what):
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


def get_rank(group=None):
    """This process's rank in `group` (the default group when None); -1 when it is not in the group."""
    g = _state.world if group is None else group
    if g is None:
        raise DistError("get_rank: the default process group has not been initialized")
    return g.rank()


def get_world_size(group=None):
    """The number of ranks in `group` (the default group when None); -1 when this rank is not in the group."""
    g = _state.world if group is None else group
    if g is None:
        raise DistError("get_world_size: the default process group has not been initialized")
    return g.size() if g.comm is not None else -1


def get_process_group_ranks(group):
    """The global ranks in `group`, in the group's order."""
    return list(group.ranks)


def get_global_rank(group, group_rank):
    return group.ranks[group_rank]


def get_group_rank(group, global_rank):
    return group.group_rank(global_rank, "get_group_rank")


def get_backend(group=None):
    _group(group, "get_backend")
    return "mpi"


def new_group(ranks=None, timeout=None, backend=None, **kwargs):
    """A process group of the global `ranks` (all ranks when None). Every rank of the default group must call it,
    members or not, in the same order (as in torch); a rank outside gets ``GroupMember.NON_GROUP_MEMBER``."""
    world = _group(None, "new_group")
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


def destroy_process_group(group=None):
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

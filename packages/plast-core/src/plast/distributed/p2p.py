"""Point-to-point calls with torch.distributed's names: send, recv, isend, irecv (over MPI's non-blocking
calls, so every wait has the group's deadline). A recv checks that the message had exactly the tensor's size."""

from __future__ import annotations

from .._core.errors import ShapeError
from .._core.hints import TensorBase
from ._mpi import mpi
from .buffers import as_mpi, check_tensor, read_view, write
from .errors import DistBackendError, from_mpi
from .group import ProcessGroup
from .work import Work
from .world import usable_group


def isend(tensor: TensorBase, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> Work | None:
    """Send `tensor` to global rank `dst`; returns a Work (keep `tensor` unchanged until it is done)."""
    what = "isend"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(tensor, what)
    peer = g.group_rank(dst, what)
    if peer == g.rank():
        raise ValueError(f"{what}: dst {dst} is this rank; sending to oneself is not supported (as in torch)")
    MPI = mpi()
    try:
        req = g.comm.Isend(as_mpi(read_view(tensor)), dest=peer, tag=tag)
    except MPI.Exception as e:
        raise from_mpi(e, what) from None
    return Work(g, [req], f"{what} to rank {dst}", None, [tensor])


def send(tensor: TensorBase, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> None:
    """Send `tensor` to global rank `dst` (returns when it has left this rank's buffer)."""
    work = isend(tensor, dst, group, tag)
    if work is not None:
        work.wait()


def irecv(
    tensor: TensorBase, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0
) -> Work | None:
    """Receive into `tensor` from global rank `src` (any rank when None); returns a Work whose ``source()`` is
    the sender's rank."""
    what = "irecv"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(tensor, what)
    MPI = mpi()
    peer = MPI.ANY_SOURCE if src is None else g.group_rank(src, what)
    reqs = []

    def start(view):
        reqs.append(g.comm.Irecv(as_mpi(view), source=peer, tag=tag))

    try:
        write(tensor, start, what)
    except MPI.Exception as e:
        raise from_mpi(e, what) from None
    return _RecvWork(g, reqs, f"{what} from rank {'any' if src is None else src}", None, [tensor])


class _RecvWork(Work):
    """irecv's Work: also checks that the message had exactly the tensor's size (MPI accepts a shorter one), and
    tells the sender's rank."""

    def __init__(self, *args):
        super().__init__(*args)
        self._status = mpi().Status()
        self._sender = None

    def _check(self):
        t = self._outputs[0]
        count = self._status.Get_count(mpi().BYTE) // t.dtype.itemsize
        self._sender = self._group.ranks[self._status.Get_source()]
        self._done = True
        if count != t.numel():
            raise ShapeError(
                f"{self._what}: rank {self._sender} sent {count} elements, the tensor holds {t.numel()}; send "
                "and recv tensors must have the same number of elements"
            )

    def wait(self, timeout=None):
        if not self._done:
            seconds = None if timeout is None else getattr(timeout, "total_seconds", lambda: timeout)()
            try:
                self._group.wait(self._reqs, self._what, seconds, [self._status])
            except DistBackendError as e:
                if mpi().Get_error_class(self._status.Get_error()) == mpi().ERR_TRUNCATE:
                    sender = self._group.ranks[self._status.Get_source()]
                    raise ShapeError(
                        f"{self._what}: rank {sender} sent more elements than the tensor holds "
                        f"({self._outputs[0].numel()}); send and recv tensors must have the same number of elements"
                    ) from e
                raise
            self._check()
        return True

    def is_completed(self):
        if not self._done and self._reqs[0].Test(self._status):
            self._check()
        return self._done

    def source(self):
        self.wait()
        return self._sender


def recv(tensor: TensorBase, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0) -> int:
    """Receive into `tensor` from global rank `src` (any rank when None); returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    if work is None:
        return -1
    return work.source()

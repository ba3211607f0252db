"""The collectives and point-to-point calls, with torch.distributed's names and semantics, over MPI's
non-blocking calls (so every wait has a deadline: group.py).

Before each collective the ranks compare a few numbers (which call, dtype, element count, op, root) in one tiny
allgather, so a rank that calls a different collective or passes a different size gets a ShapeError naming the
ranks, instead of a hang or silently wrong values (``PLAST_DIST_CHECK=0`` skips it: one latency less per call).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence

import numpy as np

from .._core.codes import DTYPE_CODES
from .._core.errors import DTypeError, ShapeError
from .._core.hints import TensorBase
from ..graph.inplace import compute_before_write
from ..graph.tape import host_side, in_host_side, note_host, tracing
from ._mpi import mpi
from .buffers import as_mpi, check_same, check_tensor, read_view, write
from .errors import from_mpi
from .group import ProcessGroup
from .work import Work
from .world import usable_group

_CHECK = os.environ.get("PLAST_DIST_CHECK", "1") != "0"


class ReduceOp(enum.Enum):
    """How all_reduce / reduce_scatter combine the ranks' values (torch's names). On bool tensors SUM and MAX are
    logical or, PRODUCT and MIN logical and. AVG needs a floating point tensor."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7


_KINDS = {
    n: i
    for i, n in enumerate(
        ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "all_reduce_coalesced"]
    )
}


def _mpi_op(op, t, what):
    MPI = mpi()
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a plast.distributed.ReduceOp, got {op!r}")
    if t.dtype.itemsize == 2 and t.dtype.is_floating_point:
        if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
            raise DTypeError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got {t.dtype}")
        return _half_op(MPI, op, t.dtype.np)
    if t.dtype.name == "bool":
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    elif op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and t.dtype.is_floating_point:
        raise DTypeError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got {t.dtype}")
    if op is ReduceOp.AVG and not t.dtype.is_floating_point:
        raise DTypeError(f"{what}: ReduceOp.AVG needs a floating point tensor, got {t.dtype}")
    return {
        ReduceOp.SUM: MPI.SUM,
        ReduceOp.AVG: MPI.SUM,  # then divided by the group's size
        ReduceOp.PRODUCT: MPI.PROD,
        ReduceOp.MIN: MPI.MIN,
        ReduceOp.MAX: MPI.MAX,
        ReduceOp.BAND: MPI.BAND,
        ReduceOp.BOR: MPI.BOR,
        ReduceOp.BXOR: MPI.BXOR,
    }[op]


_HALF_COMBINE = {
    ReduceOp.SUM: np.add,
    ReduceOp.AVG: np.add,  # then divided by the group's size
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,  # NaN wins, as in torch
    ReduceOp.MAX: np.maximum,
}
_HALF_OPS = {}


def _half_op(MPI, op, np_dtype):
    """The MPI op that reduces bfloat16 or float16 values. MPI has no 16-bit floating types: these tensors travel
    as their 16 bits (as_mpi), and a user-defined op widens each pair of values to float32, combines them and
    rounds back: one rounding per combining step, as a 16-bit allreduce has on any transport. Made once per op and
    dtype (MPI ops live as long as MPI)."""
    key = (op, np.dtype(np_dtype))
    mop = _HALF_OPS.get(key)
    if mop is None:
        combine, dt = _HALF_COMBINE[op], key[1]

        def reduce_16(inbuf, inoutbuf, datatype):
            a = np.frombuffer(inbuf, dtype=dt)
            b = np.frombuffer(inoutbuf, dtype=dt)
            b[...] = combine(a.astype(np.float32), b.astype(np.float32)).astype(dt)

        mop = _HALF_OPS[key] = MPI.Op.Create(reduce_16, commute=True)
    return mop


def _agree(g, what, dtype, numel, extra=0):
    """Check that every rank of `g` is in the same call with the same dtype and size (see the module's
    docstring); called before the collective itself."""
    g.seq += 1
    if not _CHECK or g.size() == 1:
        return
    mine = np.array([_KINDS[what], dtype.code if dtype is not None else -1, numel, extra], np.int64)
    every = np.empty((g.size(), 4), np.int64)
    g.wait([g.comm.Iallgather(mine, every)], what)
    if (every == mine).all():
        return
    rows = []
    names = {v: k for k, v in _KINDS.items()}
    codes = {code: name for name, code in DTYPE_CODES.items()} | {-1: "-"}
    for r, (k, dt, n, x) in enumerate(every):
        rows.append(
            f"rank {g.ranks[r]}: {names.get(int(k), k)} of {n} {codes.get(int(dt), dt)} elements ({x})"
        )
    raise ShapeError(
        f"{what}: the ranks disagree on the call (call, elements, dtype, op or root): " + "; ".join(rows)
    )


def _run(g, reqs, what, async_op, finish=None, outputs=()):
    work = Work(g, reqs, what, finish, outputs)
    if async_op:
        return work
    work.wait()
    return None


def _traced(what, tensors, redo, async_op):
    """A collective inside a @plast.jit trace: the trace is a real call, so it runs now, synchronously, and the
    plan gets a step that runs it again (``redo(tensors)``) at this point of every replay. The tensors and what
    reads their old values are computed first, as steps of the plan; the collective itself is host code."""
    compute_before_write(tensors)
    with host_side():
        redo(tensors)
    note_host(redo, tensors, what)
    if not async_op:
        return None
    work = Work(None, [], what, None, tensors)
    work._complete()  # (done already: the replay's step runs it synchronously as well)
    return work


def all_reduce(
    tensor: TensorBase, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False
) -> Work | None:
    """Combine `tensor` across the ranks with `op`, in place on every rank. Inside a @plast.jit function it is a
    step of the plan (as all_reduce_coalesced and broadcast are).

    >>> import plast, plast.distributed as dist  # doctest: +SKIP
    >>> t = plast.ones(3) * (dist.get_rank() + 1); dist.all_reduce(t); t.tolist()  # doctest: +SKIP
    [3.0, 3.0, 3.0]
    """
    what = "all_reduce"
    if tracing() and not in_host_side() and isinstance(tensor, TensorBase):
        return _traced(what, [tensor], lambda ts: all_reduce(ts[0], op, group), async_op)
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(tensor, what)
    mop = _mpi_op(op, tensor, what)
    _agree(g, what, tensor.dtype, tensor.numel(), op.value)
    return _reduce_in_place(g, [tensor], op, mop, what, async_op)


def all_reduce_coalesced(
    tensors: Sequence[TensorBase],
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None:
    """all_reduce of several tensors of one dtype as one message: they are copied into one flat buffer, reduced,
    and copied back (what DistributedDataParallel's buckets use)."""
    what = "all_reduce_coalesced"
    tensors = list(tensors)
    if tracing() and not in_host_side() and all(isinstance(t, TensorBase) for t in tensors):
        return _traced(what, tensors, lambda ts: all_reduce_coalesced(ts, op, group), async_op)
    g = usable_group(group, what)
    if g is None:
        return None
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what}: needs at least one tensor")
    for i, t in enumerate(tensors):
        check_tensor(t, what, f"tensors[{i}]")
        if t.dtype is not tensors[0].dtype:
            raise DTypeError(
                f"{what}: tensors[{i}] is {t.dtype}, tensors[0] is {tensors[0].dtype}; one dtype only"
            )
    mop = _mpi_op(op, tensors[0], what)
    _agree(g, what, tensors[0].dtype, sum(t.numel() for t in tensors), op.value)
    return _reduce_in_place(g, tensors, op, mop, what, async_op)


def _reduce_in_place(g, tensors, op, mop, what, async_op):
    MPI = mpi()
    size = g.size()
    if len(tensors) == 1:
        t = tensors[0]
        reqs = []

        def start(view):
            if view.size:
                reqs.append(g.comm.Iallreduce(MPI.IN_PLACE, as_mpi(view), mop))

        try:
            write(t, start, what)
        except MPI.Exception as e:
            raise from_mpi(e, what) from None
        finish = None
        if op is ReduceOp.AVG:

            def finish():
                # the memory is the tensor's: dividing it is the last write of the same in-place op
                read_view(t)[...] /= size

        return _run(g, reqs, what, async_op, finish, [t])
    flat = np.concatenate([read_view(t) for t in tensors])
    try:
        reqs = [g.comm.Iallreduce(MPI.IN_PLACE, as_mpi(flat), mop)] if flat.size else []
    except MPI.Exception as e:
        raise from_mpi(e, what) from None

    def finish():
        if op is ReduceOp.AVG:
            flat[...] /= size
        at = 0
        for t in tensors:
            n = t.numel()
            write(t, lambda view, a=at, n=n: view.__setitem__(slice(None), flat[a : a + n]), what)
            at += n

    return _run(g, reqs, what, async_op, finish, tensors)


def broadcast(
    tensor: TensorBase, src: int, group: ProcessGroup | None = None, async_op: bool = False
) -> Work | None:
    """Copy `tensor` of global rank `src` into `tensor` on every rank of the group."""
    what = "broadcast"
    if tracing() and not in_host_side() and isinstance(tensor, TensorBase):
        return _traced(what, [tensor], lambda ts: broadcast(ts[0], src, group), async_op)
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(tensor, what)
    root = g.group_rank(src, what)
    _agree(g, what, tensor.dtype, tensor.numel(), root)
    MPI = mpi()
    reqs = []

    def start(view):
        if view.size:
            reqs.append(g.comm.Ibcast(as_mpi(view), root=root))

    try:
        if g.rank() == root:
            start(read_view(tensor))  # the root's tensor does not change: no in-place write, no version bump
        else:
            write(tensor, start, what)
    except MPI.Exception as e:
        raise from_mpi(e, what) from None
    return _run(g, reqs, what, async_op, None, [tensor])


def all_gather_into_tensor(
    output_tensor: TensorBase,
    input_tensor: TensorBase,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None:
    """Every rank's `input_tensor`, concatenated along dim 0 (or stacked: output shape (world, *input shape)) in
    `output_tensor`, written in place with no copy."""
    what = "all_gather_into_tensor"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(input_tensor, what, "input_tensor")
    check_tensor(output_tensor, what, "output_tensor")
    _check_dtype(output_tensor, input_tensor, what)
    if output_tensor.numel() != g.size() * input_tensor.numel():
        raise ShapeError(
            f"{what}: output_tensor has {output_tensor.numel()} elements ({tuple(output_tensor.shape)}) but must "
            f"hold world size {g.size()} x input's {input_tensor.numel()} ({tuple(input_tensor.shape)})"
        )
    _agree(g, "all_gather", input_tensor.dtype, input_tensor.numel())
    send = read_view(input_tensor)
    MPI = mpi()
    reqs = []

    def start(view):
        if view.size:
            reqs.append(g.comm.Iallgather(as_mpi(send), as_mpi(view)))

    try:
        write(output_tensor, start, what)
    except MPI.Exception as e:
        raise from_mpi(e, what) from None
    return _run(g, reqs, what, async_op, None, [output_tensor])


def _check_dtype(out, inp, what):
    if out.dtype is not inp.dtype:
        raise DTypeError(
            f"{what}: output is {out.dtype} but the input is {inp.dtype}; they must be the same dtype"
        )


def all_gather(
    tensor_list: Sequence[TensorBase],
    tensor: TensorBase,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None:
    """``tensor_list[r]`` receives rank r's `tensor` (one list entry per rank, each shaped like `tensor`)."""
    what = "all_gather"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(tensor, what)
    tensor_list = list(tensor_list)
    if len(tensor_list) != g.size():
        raise ValueError(
            f"{what}: tensor_list has {len(tensor_list)} tensors, the group has {g.size()} ranks"
        )
    for i, t in enumerate(tensor_list):
        check_tensor(t, what, f"tensor_list[{i}]")
        check_same(t, tensor, what, f"tensor_list[{i}]")
    _agree(g, what, tensor.dtype, tensor.numel())
    send = read_view(tensor)
    every = np.empty((g.size(), send.size), send.dtype)
    MPI = mpi()
    try:
        reqs = [g.comm.Iallgather(as_mpi(send), as_mpi(every))] if send.size else []
    except MPI.Exception as e:
        raise from_mpi(e, what) from None

    def finish():
        for r, t in enumerate(tensor_list):
            write(t, lambda view, r=r: view.__setitem__(slice(None), every[r]), what)

    return _run(g, reqs, what, async_op, finish, tensor_list)


def reduce_scatter_tensor(
    output: TensorBase,
    input: TensorBase,  # noqa: A002
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce `input` (world size x output's elements, split along dim 0) across ranks with `op`; rank r keeps the
    r-th part in `output`, written in place with no copy."""
    what = "reduce_scatter_tensor"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(input, what, "input")
    check_tensor(output, what, "output")
    _check_dtype(output, input, what)
    if input.numel() != g.size() * output.numel():
        raise ShapeError(
            f"{what}: input has {input.numel()} elements ({tuple(input.shape)}) but must hold world size "
            f"{g.size()} x output's {output.numel()} ({tuple(output.shape)})"
        )
    mop = _mpi_op(op, input, what)
    _agree(g, "reduce_scatter", input.dtype, output.numel(), op.value)
    send = read_view(input)
    return _reduce_scatter(g, output, send, op, mop, what, async_op)


def _reduce_scatter(g, output, send, op, mop, what, async_op):
    MPI = mpi()
    size = g.size()
    reqs = []

    def start(view):
        if view.size:
            reqs.append(g.comm.Ireduce_scatter_block(as_mpi(send), as_mpi(view), mop))

    try:
        write(output, start, what)
    except MPI.Exception as e:
        raise from_mpi(e, what) from None
    finish = None
    if op is ReduceOp.AVG:

        def finish():
            read_view(output)[...] /= size

    return _run(g, reqs, what, async_op, finish, [output])


def reduce_scatter(
    output: TensorBase,
    input_list: Sequence[TensorBase],
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``input_list[r]`` across ranks with `op` into `output` of rank r (one list entry per rank)."""
    what = "reduce_scatter"
    g = usable_group(group, what)
    if g is None:
        return None
    check_tensor(output, what, "output")
    input_list = list(input_list)
    if len(input_list) != g.size():
        raise ValueError(f"{what}: input_list has {len(input_list)} tensors, the group has {g.size()} ranks")
    for i, t in enumerate(input_list):
        check_tensor(t, what, f"input_list[{i}]")
        check_same(t, output, what, f"input_list[{i}]")
    mop = _mpi_op(op, output, what)
    _agree(g, what, output.dtype, output.numel(), op.value)
    send = np.concatenate([read_view(t) for t in input_list])  # one copy: MPI wants one send buffer
    return _reduce_scatter(g, output, send, op, mop, what, async_op)


def barrier(
    group: ProcessGroup | None = None, async_op: bool = False, device_ids: Sequence[int] | None = None
) -> Work | None:
    """Wait until every rank of the group has called barrier (with the group's timeout)."""
    what = "barrier"
    g = usable_group(group, what)
    if g is None:
        return None
    _agree(g, what, None, 0)
    return _run(g, [g.comm.Ibarrier()], what, async_op)

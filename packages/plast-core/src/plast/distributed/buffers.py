"""Tensors as MPI buffers: numpy views on a tensor's own memory (no pickling, no Python-object copies), and the
in-place write that keeps plast's lazy graph right.

A collective that writes a tensor (all_reduce, broadcast, recv, ...) goes through graph/inplace.write_inplace,
as a random fill does: the tensor is realized first, every pending lazy op that reads its old value is computed
before MPI touches the memory (so ``y = x * 2; all_reduce(x); y`` is the old x times 2, as in eager torch), and
the storage's version goes up afterwards (autograd refuses a saved value that changed, views see the change).
"""

import numpy as np

from .._core import grad_mode
from .._core._structs import TensorBase
from .._core.errors import DTypeError, ShapeError
from ..graph.inplace import write_inplace
from ..graph.realize import realize
from ..graph.tape import host_side, tracing
from ..kernels.cpu.kernels import np_view

# the collectives a @plast.jit trace runs and records as a step of its plan (collectives.py: _traced)
TRACED = ("all_reduce", "all_reduce_coalesced", "broadcast")


def check_tensor(t, what, name="tensor"):
    if not isinstance(t, TensorBase):
        raise TypeError(f"{what}: {name} must be a plast tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise NotImplementedError(
            f"{what}: {name} is on {t.device}; plast.distributed moves CPU tensors only so far (MPICH here has no "
            "GPU transport): communicate t.cpu() and copy the result back"
        )
    if tracing() and what not in TRACED:
        raise NotImplementedError(
            f"{what} inside a @plast.jit function: of the collectives only {', '.join(TRACED)} are steps of a "
            "traced plan so far; call it outside the jitted function"
        )
    if not t.is_contiguous():
        raise ValueError(f"{what}: Tensors must be contiguous ({name} has shape {tuple(t.shape)}, strides "
                         f"{t.stride()}); pass {name}.contiguous()")  # fmt: skip


def check_same(t, ref, what, name):
    """`t` has `ref`'s dtype and shape (outputs of all_gather, reduce_scatter)."""
    if t.dtype is not ref.dtype:
        raise DTypeError(
            f"{what}: {name} is {t.dtype} but the input is {ref.dtype}; they must be the same dtype"
        )
    if tuple(t.shape) != tuple(ref.shape):
        raise ShapeError(f"{what}: {name} has shape {tuple(t.shape)} but the input has {tuple(ref.shape)}")


def read_view(t):
    """A flat numpy view of t's values, computing them first (zero-copy: MPI reads the tensor's memory)."""
    if t._storage is None:
        realize([t])
    t._storage.check()
    return np_view(t).reshape(-1)


def as_mpi(view):
    """The buffer MPI gets for a numpy view. NOTE: MPI has no MAX/MIN on C_BOOL, so bool travels as its bytes
    (0/1), where MAX is logical or and MIN logical and; bfloat16 and float16 travel as their 16 bits (MPI has no
    type for them; collectives.py reduces them with an op of its own)."""
    if view.dtype == np.bool_:
        return view.view(np.uint8)
    if view.dtype.itemsize == 2 and view.dtype.kind != "i":
        return view.view(np.uint16)
    return view


def write(t, fill, what):
    """Let ``fill(view)`` put new values into t's memory (a flat numpy view), the way in-place ops do.

    Collectives run outside autograd (torch's c10d ops do too), so a leaf that requires grad may be written
    without no_grad(); a tensor that is the result of a differentiable op can't: its old value belongs to the
    graph."""
    if tracing():  # a traced collective (collectives._traced): t and its readers were computed as plan steps
        with host_side():
            fill(np_view(t).reshape(-1))
        t._storage.version += 1
        t._version += 1
        return
    with grad_mode._grad_mode(False):
        done = write_inplace(t, lambda dst: fill(np_view(dst).reshape(-1)), what)
    if done is None:
        raise RuntimeError(
            f"{what}: the tensor is the result of a differentiable op (it has grad_fn {t.grad_fn.op.name}); a "
            "collective writes in place outside autograd: communicate t.detach() (or a clone) instead"
        )

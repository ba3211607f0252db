"""Casts, copies and views."""

from __future__ import annotations

from .._core import grad_mode as autograd_state
from .._core.errors import ShapeError
from .._core.hints import TensorBase
from ..graph import _graph
from ..graph._graph import record
from . import _movement
from ._movement import COPY, EXPAND, PERMUTE, VIEW  # noqa: F401 (the rows, registered with the functions)
from .registry import adopt

# cast: built by the recorder, which inserts it around rows that compute 16-bit tensors in float32
# (graph/_graph.pyx: its kernel, the copy, and its backward, the cast back)
CAST = adopt(_graph.CAST)


def clone(x: TensorBase) -> TensorBase:
    """A copy of x. Outside a graph (``t.detach().clone()``) the copy is made now, in persistent memory, so it
    survives reset_transient_arenas() (DESIGN §3); inside a graph it is an op like any other."""
    if x.requires_grad and autograd_state.is_grad_enabled():
        return record(COPY, (x,), (), [(x.shape, x.dtype)], x.device)[0]
    x._realized()
    return _movement.persistent_copy(x)


# The op-layer functions are compiled (ops/_movement.pyx): a training step calls them dozens of times.
cast, contiguous, view, reshape = _movement.cast, _movement.contiguous, _movement.view, _movement.reshape
expand, permute, transpose = _movement.expand, _movement.permute, _movement.transpose


def t(x: TensorBase) -> TensorBase:
    """The transpose of a matrix (0-d and 1-d tensors are returned as they are), as torch.t."""
    if x.ndim > 2:
        raise ShapeError(
            f"t() expects a tensor with <= 2 dimensions, got shape {tuple(x.shape)}; use transpose()"
        )
    return transpose(x, 0, 1) if x.ndim == 2 else x


__all__ = ["cast", "contiguous", "clone", "view", "reshape", "expand", "permute", "transpose", "t"]

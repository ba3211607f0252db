"""Casts, copies and views."""

from __future__ import annotations

from .._core import grad_mode as autograd_state
from .._core.errors import ShapeError
from .._core.hints import TensorBase
from ..graph import _graph
from ..graph._graph import record
from ..kernels.cpu import kernels as cpu
from . import _movement
from ._reduce import sum_to_shape  # the compiled reduce half: reduce.py imports this module
from .registry import adopt, register

# cast: built by the recorder, which inserts it around rows that compute 16-bit tensors in float32
# (graph/_graph.pyx: its kernel, the copy below, and its backward, the cast back)
CAST = adopt(_graph.CAST)
COPY = register("copy", cpu=cpu.copy, backward=lambda node, g: (g,), saves_inputs=False, half=True)


def clone(x: TensorBase) -> TensorBase:
    """A copy of x. Outside a graph (``t.detach().clone()``) the copy is made now, in persistent memory, so it
    survives reset_transient_arenas() (DESIGN §3); inside a graph it is an op like any other."""
    if x.requires_grad and autograd_state.grad_enabled:
        return record(COPY, (x,), (), [(x.shape, x.dtype)], x.device)[0]
    x._realized()
    return _movement.persistent_copy(x)


def _view_bw(node, g):
    x = node.inputs[0]
    return (reshape(g, x.shape),)


VIEW = register("view", cpu=cpu.view, backward=_view_bw, view=True, saves_inputs=False)


def _expand_bw(node, g):
    return (sum_to_shape(g, node.inputs[0].shape),)


EXPAND = register("expand", cpu=cpu.view, backward=_expand_bw, view=True, saves_inputs=False)


def _permute_bw(node, g):
    perm = node.args[0]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (permute(g, tuple(inv)),)


PERMUTE = register("permute", cpu=cpu.view, backward=_permute_bw, view=True, saves_inputs=False)


_movement.bind({"copy": COPY, "view": VIEW, "expand": EXPAND, "permute": PERMUTE})
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

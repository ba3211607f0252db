"""Custom autograd functions: ``plast.autograd.Function``, as ``torch.autograd.Function``.

How a Function enters the graph. ``Fn.apply(*args)`` runs ``forward`` under ``no_grad`` (its plast ops record
ordinary nodes that need no gradient), then records one node of the op table's ``autograd_function`` row over
(the tensor arguments, the forward's tensor results). The node's kernel copies each forward result into the
node's own output, and those outputs are what ``apply`` returns; the row's backward rule calls the class's
Python ``backward`` with the ``ctx`` the node carries. So the engine sees an ordinary op: the scheduler plans
it, a ``@plast.jit`` trace records its copy kernel and the kernels of the forward's and backward's plast ops
(Python in ``forward``/``backward`` runs at trace time only; the replay runs what it launched), and with
``create_graph=True`` the Python backward's ops record for double backward like any rule's.

Why a graph node with one shared row and not a row per Function class: rows are process-wide and named once
(``register`` refuses a second), classes come and go (tests define them in functions), and the engine needs
nothing class-specific but the backward call, which the node's ``ctx`` provides. Why a copy: a node's outputs
are fresh tensors the engine allocates, and the forward's results already belong to the nodes that computed
them; the copy (one pass over the outputs) is the price of keeping the engine's contract unchanged.

Eager backward replays (autograd/backward_replay.py) replay kernels keyed by the graph's structure, but a
Python ``backward`` may depend on anything (``ctx`` attributes, globals): a backward through a Function is
marked unreplayable (``Unreplayable``) and always runs the ordinary way, so its results are always the Python
backward's. In-place Functions (``ctx.mark_dirty``) are not supported: ``mark_dirty`` raises
NotImplementedError. The row's CUDA kernel (kernels/cuda/kernels.py: function_outputs) is the same copy, not yet
run on a GPU.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from .._core import grad_mode as autograd_state
from .._core._structs import TensorBase
from .._core.grad_mode import no_grad
from ..graph._graph import record
from ..kernels.cpu.kernels import copy as _cpu_copy
from ..ops.creation import zeros_like
from ..ops.registry import register


def _copy_kernel(node, inputs, outputs):
    """The node's inputs end with the forward's results: copy each into the matching output."""
    base = len(inputs) - len(outputs)
    for j, o in enumerate(outputs):
        _cpu_copy(node, (inputs[base + j],), (o,))


class _Key:
    """The node's argument: the Function class (what graph keys compare and hash) and the call's ctx."""

    __slots__ = ("cls", "ctx")

    def __init__(self, cls, ctx):
        self.cls, self.ctx = cls, ctx

    def __eq__(self, other):
        return type(other) is _Key and other.cls is self.cls

    def __hash__(self):
        return hash(self.cls)

    def __repr__(self):
        return f"<{self.cls.__name__}>"


def _is_expandable_to(shape, to):
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a != b and a != 1:
            return False
    return True


def _backward_rule(node, *grads):
    ctx = node.args[0].ctx
    cls = node.args[0].cls
    name = f"{cls.__name__}Backward"
    grads = list(grads)
    if ctx._materialize_grads:
        for j, g in enumerate(grads):
            if g is None:
                grads[j] = zeros_like(ctx._raw_outputs[j])
    res = cls.backward(ctx, *grads)
    if not isinstance(res, tuple):
        res = (res,)
    n = len(ctx._arg_is_tensor)
    if len(res) != n:
        if len(res) > n and all(g is None for g in res[n:]):
            res = res[:n]
        else:
            raise RuntimeError(
                f"function {name} returned an incorrect number of gradients (expected {n}, got {len(res)})"
            )
    out = []
    k = 0
    for i, g in enumerate(res):
        if not ctx._arg_is_tensor[i]:
            if g is not None:
                raise RuntimeError(
                    f"function {name} returned a gradient different than None at position {i + 1}, but the "
                    f"corresponding forward input was not a Variable"
                )
            continue
        t = node.inputs[k]
        k += 1
        if g is not None:
            if not isinstance(g, TensorBase):
                raise TypeError(
                    f"function {name} returned a {type(g).__name__} as gradient {i}, not a tensor"
                )
            if tuple(g.shape) != tuple(t.shape) and not _is_expandable_to(tuple(t.shape), tuple(g.shape)):
                raise RuntimeError(
                    f"Function {name} returned an invalid gradient at index {i} - got {list(g.shape)} but "
                    f"expected shape compatible with {list(t.shape)}"
                )
        out.append(g)
    out.extend([None] * len(ctx._raw_outputs))
    return tuple(out)


ROW = register("autograd_function", cpu=_copy_kernel, backward=_backward_rule, saves_inputs=False, half=True)


def is_function_row(op: object) -> bool:
    """Whether `op` is the row of Function nodes (backward_replay.py refuses to replay through them)."""
    return op is ROW


class FunctionCtx:
    """The ``ctx`` a Function's ``forward``/``setup_context`` and ``backward`` share (torch's FunctionCtx).
    Any attribute may be set on it (``ctx.k = 3``)."""

    def __init__(self) -> None:
        self._saved: tuple[Any, ...] = ()
        self._saved_versions: tuple[int, ...] = ()
        self._non_differentiable: tuple[Any, ...] = ()
        self._materialize_grads = True
        self._raw_outputs: list[TensorBase] = []
        self._node = None
        self._arg_is_tensor: tuple[bool, ...] = ()
        self._tensor_args: list[TensorBase] = []
        self.needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: TensorBase | None) -> None:
        """Keep `tensors` (or None) for ``backward`` (``ctx.saved_tensors``)."""
        for t in tensors:
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError("save_for_backward can only save variables, but argument 0 is not a Variable")
        self._saved = tensors
        self._saved_versions = tuple(_version(t) for t in tensors)

    def save_for_forward(self, *tensors: TensorBase | None) -> None:
        raise NotImplementedError("plast has no forward-mode AD: save_for_forward is not supported")

    @property
    def saved_tensors(self) -> tuple[TensorBase | None, ...]:
        """The tensors given to ``save_for_backward``; a forward result saved there is the Function's output
        (so a double backward flows through it, as in torch)."""
        out = []
        for i, t in enumerate(self._saved):
            t = self._output_for(t)
            if t is not None and _version(t) != self._saved_versions[i]:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.dtype}, {list(t.shape)}] is at version {_version(t)}; expected version "
                    f"{self._saved_versions[i]} instead"
                )
            out.append(t)
        return tuple(out)

    def _output_for(self, t):
        """What backward reads for saved tensor `t`: a forward result is the Function's output; an argument is
        the node's input (which an in-place write after the call repoints to the old value, graph/inplace.py)."""
        node = self._node
        if node is None or t is None:
            return t
        for j, raw in enumerate(self._raw_outputs):
            if raw is t:
                o = node.outputs[j]()
                return o if o is not None else t
        if node.inputs:
            for k, a in enumerate(self._tensor_args):
                if a is t:
                    return node.inputs[k]
        return t

    def mark_non_differentiable(self, *outputs: TensorBase) -> None:
        """These outputs get no gradient: they do not require grad, and ``backward`` gets None (or zeros, with
        materialized grads) for them."""
        self._non_differentiable = outputs

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (True, the default) or None for outputs that got no gradient."""
        self._materialize_grads = bool(value)

    def mark_dirty(self, *args: TensorBase) -> None:
        raise NotImplementedError(
            "plast.autograd.Function does not support in-place outputs (ctx.mark_dirty): return a new tensor"
        )

    def mark_shared_storage(self, *pairs: Any) -> None:
        raise NotImplementedError("mark_shared_storage is deprecated in torch and not supported by plast")


def _version(t):
    st = getattr(t, "_storage", None) if t is not None else None
    return 0 if st is None else st.version


class Function:
    """Base of custom autograd functions: subclass it with ``@staticmethod forward(ctx, *args)`` (or
    ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``) and ``@staticmethod backward(ctx,
    *grad_outputs)`` returning one gradient per forward argument (None for non-tensors and for inputs that get
    none), then call ``Fn.apply(*args)``.

    >>> import plast
    >>> class Exp(plast.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> x = plast.tensor([0.0, 1.0], requires_grad=True)
    >>> Exp.apply(x).sum().backward()
    >>> [round(v, 4) for v in x.grad.tolist()]
    [1.0, 2.7183]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            f"{type(self)} should not be instantiated. Methods on autograd functions are all static, so you "
            f"should invoke them on the class itself. Instantiating an autograd function will raise an error in "
            f"a future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-style "
            "autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it "
            "with backward mode AD."
        )

    @staticmethod
    def vjp(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it "
            "with backward mode AD."
        )

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise NotImplementedError("plast has no forward-mode AD: jvp is not supported")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on `args` and return its result, recorded so that backward calls ``backward``."""
        if cls.backward is Function.backward and cls.vjp is not Function.vjp:
            cls.backward = cls.vjp  # torch's alias
        ctx = FunctionCtx()
        new_style = cls.setup_context is not Function.setup_context
        with no_grad():
            if new_style:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        tensors = [a for a in args if isinstance(a, TensorBase)]
        ctx._arg_is_tensor = tuple(isinstance(a, TensorBase) for a in args)
        ctx.needs_input_grad = tuple(isinstance(a, TensorBase) and bool(a.requires_grad) for a in args)
        if not (autograd_state.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return output
        single = not isinstance(output, tuple)
        outs = (output,) if single else output
        raws = [o for o in outs if isinstance(o, TensorBase)]
        if not raws:
            return output
        ctx._raw_outputs = raws
        ctx._tensor_args = tensors
        device = tensors[0].device
        specs = [(r._shape, r.dtype) for r in raws]
        wrapped = record(ROW, tuple(tensors) + tuple(raws), (_Key(cls, ctx),), specs, device)
        ctx._node = wrapped[0]._node
        nondiff = {id(t) for t in ctx._non_differentiable}
        for r, w in zip(raws, wrapped):
            if id(r) in nondiff:
                w.requires_grad = False
        it = iter(wrapped)
        result = tuple(next(it) if isinstance(o, TensorBase) else o for o in outs)
        return result[0] if single else result


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Function's ``backward`` that is not itself differentiable: it runs under ``no_grad`` (its
    results carry no graph even under ``create_graph=True``)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper


__all__ = ["Function", "FunctionCtx", "once_differentiable"]

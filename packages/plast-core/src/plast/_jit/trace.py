"""@plast.jit: trace a whole step once, then replay its kernels (DESIGN §2.5).

Tracing runs the function for real, on alias tensors of its arguments, while every kernel the engine runs is
written to a tape: op kernels (graph/realize.py), in-place copies (graph/inplace.py), fused updates
(apply_mutation), gradient write-backs (autograd) and random fills (plast.random). The tape becomes a plan:

* memory the trace allocated in the transient arena and that nothing outside needs (activations, gradients in
  flight) is laid out in one block by the liveness planner (graph/planner.py) and reused call after call;
* persistent memory the trace created (gradients, optimizer state, random draws) stays where it is, and replays
  write it again;
* argument tensors are rebound on every call; the values returned are copied to fresh persistent tensors, so each
  call's results survive ``reset_transient_arenas()`` and later calls.

Devices. Every step is recorded with its device's kernel (a copy on the GPU replays as a GPU copy). A plan whose
steps are all CUDA kernels replays as one CUDA graph (kernels/cuda/graphs.py: captured on its first replay,
arguments copied into plan-owned buffers before each launch; ``PLAST_CUDA_GRAPHS=0`` turns this off); a plan
with CPU steps, or one the graph can't record, replays step by step.

What is a runtime input and what is frozen:
* Python control flow and Python values are frozen at trace time (an ``if`` on a config flag takes the branch it
  took while tracing). Reading a tensor's value inside the function (``.item()``, ``.numpy()``, ``print``) raises
  JitError: the value does not exist while tracing.
* Learning rates and other hyperparameters are refreshed before every call by ``runtime_input`` callbacks
  (optimizers register them); step counts live in tensors their kernels increment; random ops draw from their
  generator's current offset at run time.
* The trace key holds the arguments' shapes, dtypes, devices and strides, the non-tensor arguments, and every
  ``note_state`` key seen while tracing (modules register their training flag and parameter set). A change in
  any of them traces again.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, overload

from .._core._structs import TensorBase, record_grads_at_start
from .._core.errors import JitError
from ..graph import _replay
from ..graph import tape as _tape_mod
from ..graph._graph import tensor_class
from ..graph._replay import run
from ..graph.planner import plan_memory
from ..graph.realize import realize
from ..graph.tape import Step, Trace, recording
from ..memory import arenas as _arenas
from ..ops._movement import persistent_copy


def _debug():
    return os.environ.get("PLAST_DEBUG", "0") not in ("", "0")


# ---- the decorator ----------------------------------------------------------------------------------------


class Plan:
    __slots__ = (
        "steps",
        "compiled",
        "arg_aliases",
        "arg_views",
        "captured_transient",
        "results",
        "runtime_inputs",
        "states",
        "block",
        "block_bytes",
        "treedef",
        "graph",
    )

    def valid(self):
        for ref, keyfn, key in self.states:
            obj = ref()
            if obj is None or keyfn() != key:
                return False
        return True


def _alias(t):
    a = tensor_class()._from_storage(t._storage, t.shape, t.dtype, t.device, t._strides, t._offset)
    a.requires_grad = t.requires_grad
    return a


def _flatten(obj, leaves):
    """Replace tensors in a (nested tuple/list/dict) result by placeholders, collecting them in `leaves`."""
    if isinstance(obj, TensorBase):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_flatten(o, leaves) for o in obj])
    if isinstance(obj, dict):
        return (dict, {k: _flatten(v, leaves) for k, v in obj.items()})
    return ("C", obj)


def _unflatten(tree, leaves):
    kind, val = tree
    if kind == "T":
        return leaves[val]
    if kind == "C":
        return val
    if kind is dict:
        return {k: _unflatten(v, leaves) for k, v in val.items()}
    items = [_unflatten(v, leaves) for v in val]
    # a named tuple (max/min/sort/topk's (values, indices)) takes its fields as arguments, not one iterable
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


class JitFunction:
    """A function traced once per key and replayed afterwards (see the module docstring)."""

    # plans kept per argument key besides the newest, for state that alternates between calls (a DiLoCo step and
    # its every-H-th step with the outer update; train and eval modes): the plan whose state keys match replays
    KEEP = 3

    def __init__(self, fn):
        self.fn = fn
        self.plans = {}  # argument key -> the newest plan
        self.older = {}  # argument key -> up to KEEP earlier plans, most recently used first
        self.traces = 0
        self.replays = 0
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def _key(self, args, kwargs):
        parts = []
        for a in (args + tuple([kwargs[k] for k in sorted(kwargs)])) if kwargs else args:
            if isinstance(a, TensorBase):
                dev = a.device
                parts.append(
                    ("T", a._shape, a.dtype.code, dev.type, dev.index, tuple(a._strides), a.requires_grad)
                )
            else:
                try:
                    hash(a)
                except TypeError:
                    parts.append(("id", id(a)))
                else:
                    parts.append(("V", a))
        return tuple(parts) + tuple(sorted(kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _tape_mod._tape is not None and _tape_mod.active() is not None:  # (another thread's: it waits)
            if _tape_mod.tracing():
                raise JitError(
                    "calling a @plast.jit function while another one is being traced is not supported"
                )
            raise JitError(
                f"calling a @plast.jit function while {_tape_mod._tape.what} is recorded is not supported"
            )
        tensors = [
            a for a in (args + tuple(kwargs.values()) if kwargs else args) if isinstance(a, TensorBase)
        ]
        pending = [t for t in tensors if t._storage is None]
        if pending:
            realize(pending)
        for t in tensors:
            t._storage.check()
        key = self._key(args, kwargs)
        plan = self.plans.get(key)
        if plan is not None and plan.valid():
            return self._replay(plan, tensors)
        older = self.older.get(key)
        if older:
            for i, other in enumerate(older):
                if other.valid():  # it becomes the newest: the one tried first next time
                    del older[i]
                    older.insert(0, plan)
                    self.plans[key] = other
                    return self._replay(other, tensors)
        out = self._trace(key, args, kwargs)
        for dev in {t.device.type for t in tensors} or {"cpu"}:
            _arenas.transient(dev).release_if_idle()
        return out

    # ---- trace ----
    def _trace(self, key, args, kwargs):
        if _debug():
            print(f"plast.jit: trace {self.fn.__qualname__} (plan {len(self.plans) + 1})")
        aliases = []

        def sub(a):
            if isinstance(a, TensorBase):
                al = _alias(a)
                aliases.append(al)
                return al
            return a

        args2 = [sub(a) for a in args]
        kwargs2 = {k: sub(v) for k, v in kwargs.items()}
        with recording(Trace()) as tape:
            # the .grad assignments the function makes (autograd/engine.py reads them); set once the recording
            # is this thread's (another thread's trace ends first)
            record_grads_at_start({})
            try:
                out = self.fn(*args2, **kwargs2)
                leaves = []
                tree = _flatten(out, leaves)
                realize([t for t in leaves if t._storage is None])
                results = [persistent_copy(t) for t in leaves]  # taped: copies into persistent memory
            finally:
                record_grads_at_start(None)
        self.traces += 1
        plan = Plan()
        plan.steps = tape.steps
        plan.compiled = None  # compiled on the first replay (graph/_replay.pyx)
        plan.graph = None  # decided on the first replay: a CUDA graph (kernels/cuda/graphs.py) or False
        plan.arg_aliases = aliases
        plan.results = results
        plan.runtime_inputs = tape.runtime_inputs
        plan.states = tape.states
        plan.treedef = tree
        plan.block, plan.block_bytes = plan_memory(tape, aliases)
        plan.arg_views = _arg_views(tape, aliases)
        plan.captured_transient = _captured_transient(tape, aliases)
        previous = self.plans.get(key)
        if previous is not None and all(ref() is not None for ref, _, _ in previous.states):
            # (a plan whose objects died can never be valid again: it goes, with its memory)
            older = self.older.setdefault(key, [])
            older.insert(0, previous)
            del older[self.KEEP :]
        self.plans[key] = plan
        return _unflatten(tree, [_fresh(r) for r in results])

    # ---- replay ----
    def _replay(self, plan, tensors):
        if _debug():
            print(f"plast.jit: replay {self.fn.__qualname__} ({len(plan.steps)} kernels)")
        for fn in plan.runtime_inputs:
            fn()  # (this thread records nothing: __call__ refused; another thread's recording ignores it)
        for st in plan.captured_transient:
            st.check()  # a transient tensor the function captured (not an argument) was freed by a reset
        if plan.graph is None:
            plan.graph = _cuda_graph(plan)
        if plan.graph:
            if plan.graph.run(tensors):
                self.replays += 1
                return _unflatten(plan.treedef, [_fresh(r) for r in plan.results])
            if not plan.graph.usable:
                plan.graph = False
        for al, t, views in zip(plan.arg_aliases, tensors, plan.arg_views):
            al._storage, al._strides, al._offset = t._storage, t._strides, t._offset
            # views of the argument taken while tracing (reshape, .T, indexing) read the new argument too
            for v, rel in views:
                v._storage, v._offset, v._npcache = t._storage, t._offset + rel, None
        if plan.compiled is None:
            plan.compiled = _replay.compile_steps([_compilable(s) for s in plan.steps])
        _run_compiled(plan.compiled)
        self.replays += 1
        return _unflatten(plan.treedef, [_fresh(r) for r in plan.results])


def _run_compiled(compiled):
    global _run_compiled
    _run_compiled = run  # bound on first use: _replay imports the CPU kernels, which import the engine
    run(compiled)


def _devices(plan):
    out = {a.device.type for a in plan.arg_aliases}
    for s in plan.steps:
        out.update(t.device.type for t in s.inputs + s.outputs)
    return out


def _cuda_graph(plan):
    """A PlanGraph when the plan's steps are all CUDA kernels and graphs are on, else False (step by step)."""
    if not plan.steps or _devices(plan) != {"cuda"}:
        return False
    from ..kernels.cuda import graphs

    if not graphs.enabled():
        return False
    try:
        graphs.api()
    except graphs.GraphsUnavailable as e:
        if _debug():
            print(f"plast.jit: no CUDA graphs ({e}); replaying step by step")
        return False
    g = graphs.PlanGraph(plan.steps, plan.arg_aliases, plan.arg_views, debug=_debug())
    return g if g.usable else False


class _DeviceKernel:
    """A step's kernel as an opaque call: the compiled replay (graph/_replay.pyx) runs CPU kernels through C
    entry points when it recognizes them, and a step on another device must never look like one."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, node, inputs, outputs):
        return self.kernel(node, inputs, outputs)


def _compilable(s):
    if all(t.device.type == "cpu" for t in s.inputs + s.outputs):
        return s
    return Step(_DeviceKernel(s.kernel), s.node, s.inputs, s.outputs, s.what, s.kind)


def _captured_transient(tape, aliases):
    """Transient storages the plan reads that it neither owns nor rebinds: values computed before the call and
    captured by the function. A reset frees them, so every replay checks them first."""
    args = {id(a._storage) for a in aliases}
    seen = {}
    for s in tape.steps:
        for t in s.inputs + s.outputs:
            st = t._storage
            if st is not None and id(st) not in args and st.arena is not None and st.arena.transient:
                seen[id(st)] = st
    return list(seen.values())


def _arg_views(tape, aliases):
    """For each argument alias: the other plan tensors that share its memory, with their element offset relative
    to the alias (the layout of a view does not change when the argument's memory does: the trace key pins the
    argument's strides)."""
    out = []
    for al in aliases:
        st = al._storage
        seen = {id(al)}
        views = []
        for s in tape.steps:
            for t in s.inputs + s.outputs:
                if t._storage is st and id(t) not in seen:
                    seen.add(id(t))
                    views.append((t, t._offset - al._offset))
        out.append(views)
    return out


def _fresh(t):
    """A new persistent tensor with t's value: what one call hands to its caller."""
    return persistent_copy(t)


@overload
def jit(fn: None = None) -> Callable[[Callable[..., Any]], JitFunction]: ...
@overload
def jit(fn: Callable[..., Any]) -> JitFunction: ...


def jit(
    fn: Callable[..., Any] | None = None,
) -> JitFunction | Callable[[Callable[..., Any]], JitFunction]:
    """Trace `fn` once per argument signature, then replay its kernels with no Python per op.

    >>> @plast.jit
    ... def step(x):
    ...     return (x * 2).sum()
    >>> step(plast.ones(3)).item()
    6.0
    """
    if fn is None:
        return jit
    if isinstance(fn, JitFunction):
        return fn
    if not callable(fn):
        raise TypeError(f"plast.jit expects a function, got {type(fn).__name__}")
    return JitFunction(fn)

"""What modules and optimizers tell plast's compiler: the public seam between ``@plast.jit`` / eager replays and
the packages above plast-core (torch.compiler's role; plast-nn is its first user).

A ``@plast.jit`` trace records every kernel a step runs and replays them later without Python. Code that runs
inside a traced step may need to say three things, and this module is how:

* ``note_state(obj, keyfn)``: "this step's plan depends on ``keyfn()``" (a module's training flag and parameter
  set): a later call whose ``keyfn()`` differs traces again.
* ``runtime_input(fn)``: "run ``fn`` before every replay" (an optimizer copying the current learning rate into
  its hyperparameter tensor): what ``fn`` writes is an input of the plan, not a constant baked into it.
* ``is_compiling()``: a trace is running now (Python control flow is frozen; read no values).
* ``compile(model)`` / ``disable(fn)``: torch.compile's and torch.compiler.disable's names; both hand back what
  they were given (see ``compile``).
* ``on_trace(listener)``: ``listener(True)`` when a trace starts, ``listener(False)`` when it ends, for code that
  would otherwise ask ``is_compiling()`` on every call (plast-nn's ``Module.__call__``).

Eager optimizer steps replay too: ``capture_updates()`` records the fused update calls of one eager step and
``UpdateReplay`` runs them again on later steps' gradients while nothing they were built from changed
(plast.optim.Optimizer uses both; ``PLAST_PLAN_CACHE=0`` turns replays off, see ``update_replays_enabled()``).

>>> import plast
>>> plast.compiler.is_compiling()
False
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .graph._mutation import UpdateReplay, replays_enabled
from .graph.tape import UpdateCapture, note_state, on_trace, recording, runtime_input, tracing

is_compiling = tracing  # True while a @plast.jit function is being traced


def update_replays_enabled() -> bool:
    """Whether eager optimizer steps may replay their fused updates (off under ``PLAST_PLAN_CACHE=0``)."""
    return replays_enabled()


@contextlib.contextmanager
def capture_updates() -> Iterator[list[Any]]:
    """Record the fused update calls (``plast.*_update_`` ops) run inside the block; the list of calls (the
    steps of the tape they were recorded on) is ``yield``-ed empty and filled when the block ends, ready for
    ``UpdateReplay(calls, ...)``."""
    calls = []
    with recording(UpdateCapture()) as tape:
        try:
            yield calls
        finally:
            calls.extend(tape.steps)


def compile(  # noqa: A001 (torch.compile's name)
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] | None = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
    **kwargs: Any,
) -> Any:
    """``torch.compile``'s signature; returns `model` itself, unchanged (or, called without a model, a decorator
    that does), so it never changes a result.

    plast needs no separate compile step for what torch.compile does: the eager path already records a lazy
    graph, plans and fuses it, caches the plan, and replays repeated backward passes and optimizer updates
    (DESIGN §2). The explicit whole-step tracer is ``@plast.jit``: it records a step's kernels once and
    replays them without Python, with rules of its own (values read in Python freeze at trace time), so
    ``compile`` does not apply it behind the caller's back.

    Why the object itself and not a wrapper: torch's ``OptimizedModule`` forwards attributes but changes
    ``type()`` and prefixes ``state_dict()`` keys with ``_orig_mod.``; returning the module keeps it the same
    module in every respect (its state_dict keys have no prefix, unlike torch's). The keyword arguments are
    checked as torch checks them and otherwise ignored.

    >>> import plast
    >>> f = plast.compile(lambda x: x * 2)
    >>> f(plast.tensor([1.0])).tolist()
    [2.0]
    """
    if mode is not None and options is not None:
        raise RuntimeError(
            "Either mode or options can be specified, but both can't be specified at the same time."
        )
    if backend is not None and not isinstance(backend, str) and not callable(backend):
        raise TypeError(f"backend must be a string or a callable, got {type(backend).__name__}")

    def apply(m: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(m):
            raise AssertionError(f"A callable function is expected, but {type(m)} is provided.")
        return m

    return apply if model is None else apply(model)


def disable(
    fn: Callable[..., Any] | None = None, recursive: bool = True, *, reason: str | None = None
) -> Any:
    """``torch.compiler.disable``: `fn` itself (``compile`` changes nothing to opt out of); a decorator when
    called without `fn`."""
    if fn is None:
        return lambda f: f
    return fn


def reset() -> None:
    """``torch.compiler.reset``: nothing to reset (``compile`` keeps no state)."""


def is_dynamo_compiling() -> bool:
    """``torch.compiler.is_dynamo_compiling``: always False (plast has no Dynamo)."""
    return False


__all__ = [
    "compile",
    "disable",
    "is_dynamo_compiling",
    "reset",
    "UpdateReplay",
    "capture_updates",
    "is_compiling",
    "note_state",
    "on_trace",
    "runtime_input",
    "update_replays_enabled",
]

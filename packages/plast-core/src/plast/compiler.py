"""What modules and optimizers tell plast's compiler: the public seam between ``@plast.jit`` / eager replays and
the packages above plast-core (torch.compiler's role; plast-nn is its first user).

A ``@plast.jit`` trace records every kernel a step runs and replays them later without Python. Code that runs
inside a traced step may need to say three things, and this module is how:

* ``note_state(obj, keyfn)``: "this step's plan depends on ``keyfn()``" (a module's training flag and parameter
  set): a later call whose ``keyfn()`` differs traces again.
* ``runtime_input(fn)``: "run ``fn`` before every replay" (an optimizer copying the current learning rate into
  its hyperparameter tensor): what ``fn`` writes is an input of the plan, not a constant baked into it.
* ``is_compiling()``: a trace is running now (Python control flow is frozen; read no values).
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
from collections.abc import Iterator
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


__all__ = [
    "UpdateReplay",
    "capture_updates",
    "is_compiling",
    "note_state",
    "on_trace",
    "runtime_input",
    "update_replays_enabled",
]

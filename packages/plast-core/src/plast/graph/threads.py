"""What Python threads share in the engine, and how they take turns.

One thread at a time computes: the scheduler's plan cache, the planner and backward replays keep state between
calls that two threads computing at once would tear. ``engine_lock`` serialises them; realize and backward take
it only while another Python thread is alive (``other_threads()``: threads started besides the main one), so a
single-threaded step pays one C call, not the lock. A recording (a @plast.jit trace, a backward or optimizer
recording: graph/tape.py) holds it from start to end, so another thread's kernels never land in it; the other
thread waits instead.

Each thread has transient arenas of its own (memory/arenas.py), as torch's tensors are each thread's own:
``reset_transient_arenas()`` frees the calling thread's transient tensors only. The shared arena slots the
scheduler reads without a call hold the transient arenas of the thread computing now; ``bind_arenas()`` puts the
calling thread's there, and every caller of the lock calls it after taking it.
"""

from __future__ import annotations

import os
import threading
from _thread import _count as other_threads
from _thread import get_ident

from ..memory import arenas as _arenas

__all__ = ["bind_arenas", "engine_lock", "get_ident", "other_threads"]

engine_lock = threading.RLock()


def _after_fork_in_child():
    # a fork while another thread computed must not leave the child's lock held by a thread that is not there
    engine_lock._at_fork_reinit()


os.register_at_fork(after_in_child=_after_fork_in_child)


def bind_arenas():
    """Make the shared arena slots hold the calling thread's transient arenas (call with the engine lock held,
    or with no other thread alive)."""
    if _arenas.bound_thread != get_ident():
        _arenas.bind_thread()

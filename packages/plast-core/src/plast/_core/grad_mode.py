"""Grad mode: whether op calls record what backward needs, and the context managers that set it (torch's
``no_grad``, ``enable_grad``, ``inference_mode``, ``set_grad_enabled``). The lowest layer holds them: ops run
under ``no_grad`` (optimizer updates) as much as user code does.

Grad mode is per thread, as in torch: a thread starts with grad enabled, and ``no_grad`` in one thread does not
change another's. The thread that imported plast (normally the main one) keeps its mode in the module attribute
``grad_enabled``, which compiled readers look up in the module's dict (``_state.grad_on``: a thread-id compare and
a dict read); any other thread keeps its mode in ``_local``. Read the mode with ``is_grad_enabled()`` and set it
with ``_set()``, never through the attribute, so that every thread sees its own."""

from __future__ import annotations

import contextlib
import copy
import sys
import threading
from _thread import get_ident

grad_enabled = True  # the owner thread's mode (see above)
anomaly_detection = False

_this = sys.modules[__name__]  # the flags are module attributes: compiled readers look them up in __dict__
_owner = get_ident()
_local = threading.local()


def is_grad_enabled() -> bool:
    if get_ident() == _owner:
        return _this.grad_enabled
    return getattr(_local, "enabled", True)


def _set(enabled):
    if get_ident() == _owner:
        _this.grad_enabled = enabled
    else:
        _local.enabled = enabled


@contextlib.contextmanager
def _grad_mode(enabled):
    prev = is_grad_enabled()
    _set(enabled)
    try:
        yield
    finally:
        _set(prev)


class no_grad(contextlib.ContextDecorator):
    """Ops inside record nothing for backward (a context manager and a decorator, as in torch)."""

    def _recreate_cm(self):
        # a decorated function gets a fresh manager per call: threads calling it at once keep their own _prev
        return copy.copy(self)

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(False)

    def __exit__(self, *exc):
        _set(self._prev)
        return False


class enable_grad(contextlib.ContextDecorator):
    _recreate_cm = no_grad._recreate_cm

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(True)

    def __exit__(self, *exc):
        _set(self._prev)
        return False


class inference_mode(no_grad):
    """Like no_grad (plast has no separate inference tensors)."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(not self.mode)


class set_grad_enabled(contextlib.ContextDecorator):
    def __init__(self, mode):
        self._prev = is_grad_enabled()
        _set(bool(mode))

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _set(self._prev)
        return False

"""Grad mode: whether op calls record what backward needs, and the context managers that set it (torch's
``no_grad``, ``enable_grad``, ``inference_mode``, ``set_grad_enabled``). The lowest layer holds them: ops run
under ``no_grad`` (optimizer updates) as much as user code does."""

from __future__ import annotations

import contextlib
import sys

grad_enabled = True
anomaly_detection = False

_this = sys.modules[__name__]  # the flags are module attributes: compiled readers look them up in __dict__


@contextlib.contextmanager
def _grad_mode(enabled):
    prev = _this.grad_enabled
    _this.grad_enabled = enabled
    try:
        yield
    finally:
        _this.grad_enabled = prev


class no_grad(contextlib.ContextDecorator):
    """Ops inside record nothing for backward (a context manager and a decorator, as in torch)."""

    def __enter__(self):
        self._prev = _this.grad_enabled
        _this.grad_enabled = False

    def __exit__(self, *exc):
        _this.grad_enabled = self._prev
        return False


class enable_grad(contextlib.ContextDecorator):
    def __enter__(self):
        self._prev = _this.grad_enabled
        _this.grad_enabled = True

    def __exit__(self, *exc):
        _this.grad_enabled = self._prev
        return False


class inference_mode(no_grad):
    """Like no_grad (plast has no separate inference tensors)."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._prev = _this.grad_enabled
        _this.grad_enabled = not self.mode


class set_grad_enabled(contextlib.ContextDecorator):
    def __init__(self, mode):
        self._prev = _this.grad_enabled
        _this.grad_enabled = bool(mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _this.grad_enabled = self._prev
        return False


def is_grad_enabled() -> bool:
    return _this.grad_enabled

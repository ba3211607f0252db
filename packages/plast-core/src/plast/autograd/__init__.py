"""plast.autograd: the torch.autograd names."""

from __future__ import annotations

from .._core import grad_mode as autograd_state
from . import function
from .api import (
    backward,
    enable_grad,
    grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .function import Function, FunctionCtx, once_differentiable
from .hooks import queue_callback


class set_detect_anomaly:
    """Check every floating point result for NaN as it is computed and raise naming the op (slow; debugging).

    Works as a call (``set_detect_anomaly(True)``) and as a context manager, like torch's.
    """

    def __init__(self, mode, check_nan=True):
        self.prev = autograd_state.anomaly_detection
        autograd_state.anomaly_detection = bool(mode) and check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        autograd_state.anomaly_detection = self.prev
        return False


def detect_anomaly(check_nan: bool = True) -> set_detect_anomaly:
    return set_detect_anomaly(True, check_nan)


def is_anomaly_enabled() -> bool:
    return autograd_state.anomaly_detection


__all__ = [
    "Function",
    "FunctionCtx",
    "function",
    "once_differentiable",
    "backward",
    "grad",
    "no_grad",
    "enable_grad",
    "inference_mode",
    "set_grad_enabled",
    "is_grad_enabled",
    "set_detect_anomaly",
    "detect_anomaly",
    "is_anomaly_enabled",
    "queue_callback",
]

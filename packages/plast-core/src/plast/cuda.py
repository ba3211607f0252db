"""plast.cuda: is a GPU usable, and why not (torch.cuda's names).

The CUDA backend (plast.kernels.cuda, plast.memory.cuda; the context is plast._core.cuda_driver's) is imported when
the first CUDA tensor is asked for (``device="cuda"``, ``.cuda()``, ``.to("cuda")``, ``init_arenas(device="cuda")``);
where no GPU is usable those raise ``CudaUnavailableError`` with unavailable_reason()'s text.

>>> import plast
>>> isinstance(plast.cuda.is_available(), bool)
True
"""

from __future__ import annotations

from . import amp as _amp
from ._core import cuda_driver as _backend
from ._core import dtypes as _dtypes
from ._core.cuda_driver import CudaUnavailableError


def is_available() -> bool:
    """True when pycuda, a driver and a GPU of compute capability 8.0+ are present."""
    return _backend.is_available()


def unavailable_reason() -> str | None:
    """Why is_available() is False (None when it is True)."""
    return None if _backend.is_available() else _backend.unavailable_reason()


def device_count() -> int:
    return 1 if _backend.is_available() else 0


def synchronize() -> None:
    """Wait for every kernel queued on the GPU (for timing; reading a value waits by itself)."""
    _backend.require("plast.cuda.synchronize()")
    _backend.driver().Context.synchronize()


class _Amp:
    """``plast.cuda.amp``: torch.cuda.amp's autocast (``plast.autocast("cuda", ...)``)."""

    @staticmethod
    def autocast(enabled=True, dtype=_dtypes.float16, cache_enabled=True):
        return _amp.autocast("cuda", dtype, enabled, cache_enabled)

    GradScaler = _amp.GradScaler


amp = _Amp()

__all__ = ["CudaUnavailableError", "amp", "is_available", "unavailable_reason", "device_count", "synchronize"]

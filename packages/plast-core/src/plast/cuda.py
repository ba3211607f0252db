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
from ._core import devices as _devices
from ._core import dtypes as _dtypes
from ._core.cuda_driver import CudaUnavailableError
from .ops import random as _random


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


def manual_seed(seed: int) -> None:
    """Seed the generator CUDA tensors draw from. plast has one generator for every device (plast.manual_seed's):
    with a GPU this seeds it; without one it does nothing, as torch.cuda.manual_seed does then."""
    if _backend.is_available():
        _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """manual_seed() for every GPU (plast uses one)."""
    manual_seed(seed)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True when a GPU is usable: plast's CUDA kernels need compute capability 8.0+, which has bfloat16."""
    return _backend.is_available()


def current_device() -> int:
    _backend.require("plast.cuda.current_device()")
    return 0


def set_device(device: int | str | _devices.device) -> None:
    """Select the GPU: plast uses device 0 only, so 0 (or "cuda", "cuda:0") is accepted and anything else raises."""
    index = device if isinstance(device, int) else _devices.device(device).index
    if index not in (None, 0):
        raise ValueError(f"plast uses one GPU (index 0); set_device({device!r}) asks for another")
    _backend.require("plast.cuda.set_device()")


class _Amp:
    """``plast.cuda.amp``: torch.cuda.amp's autocast (``plast.autocast("cuda", ...)``)."""

    @staticmethod
    def autocast(enabled=True, dtype=_dtypes.float16, cache_enabled=True):
        return _amp.autocast("cuda", dtype, enabled, cache_enabled)

    GradScaler = _amp.GradScaler


amp = _Amp()

__all__ = [
    "CudaUnavailableError",
    "amp",
    "current_device",
    "device_count",
    "is_available",
    "is_bf16_supported",
    "manual_seed",
    "manual_seed_all",
    "set_device",
    "synchronize",
    "unavailable_reason",
]

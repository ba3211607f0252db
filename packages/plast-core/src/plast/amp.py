"""Automatic mixed precision: ``plast.autocast`` (also ``plast.amp.autocast``), as torch's.

Inside a region, the ops on autocast's lists cast their floating arguments first (ops/autocast.py: matrix
products, convolutions and attention compute in the region's 16-bit type; losses and products over many elements
in float32; joins at the widest type); every other op follows its inputs. Parameters stay float32 and are cast
once per region. A region is a context manager or a decorator; regions nest, and ``enabled=False`` switches
autocast off inside another region.

>>> import plast
>>> w = plast.ones(3, 2)
>>> with plast.autocast("cpu"):
...     y = plast.ones(4, 3) @ w
>>> y.dtype
plast.bfloat16
"""

import contextlib

from ._core import autocast_state as _state
from ._core import dtypes

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype"]


def _device_type(device_type):
    name = str(getattr(device_type, "type", device_type)).split(":")[0]
    if name not in ("cpu", "cuda"):
        raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    return name


def _set(cpu, on, dtype):
    if cpu:
        _state.cpu, _state.cpu_dtype = on, dtype
    else:
        _state.cuda, _state.cuda_dtype = on, dtype


class autocast(contextlib.ContextDecorator):
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=True)``: dtype defaults to bfloat16 on
    the CPU (torch's default there) and float16 on CUDA."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=True):
        self.device_type = _device_type(device_type)
        default = dtypes.bfloat16 if self.device_type == "cpu" else dtypes.float16
        self.fast_dtype = default if dtype is None else dtypes.as_dtype(dtype)
        if self.fast_dtype not in (dtypes.bfloat16, dtypes.float16):
            raise ValueError(
                f"autocast: dtype must be plast.bfloat16 or plast.float16, got {self.fast_dtype}"
            )
        self.enabled = bool(enabled)
        self.cache_enabled = bool(cache_enabled)
        self._saved = []  # one entry per open use of this object (a decorated function may recurse)

    def __enter__(self):
        if self.enabled and self.device_type == "cuda":
            raise NotImplementedError(
                "autocast('cuda'): the CUDA backend has no 16-bit kernels yet; autocast runs on the CPU"
            )
        cpu = self.device_type == "cpu"
        on, dt = (_state.cpu, _state.cpu_dtype) if cpu else (_state.cuda, _state.cuda_dtype)
        self._saved.append((on, dt, _state.cache_enabled))
        _set(cpu, self.enabled, self.fast_dtype if self.enabled else dt)
        if self.enabled:
            _state.cache_enabled = self.cache_enabled
            _state.depth += 1
        _state._refresh()
        return self

    def __exit__(self, *exc):
        on, dt, cache_enabled = self._saved.pop()
        _set(self.device_type == "cpu", on, dt)
        _state.cache_enabled = cache_enabled
        if self.enabled:
            _state.depth -= 1
            if _state.depth == 0:
                _state.cache.clear()  # the casts of parameters live as long as the outermost region
        _state._refresh()
        return False


def is_autocast_enabled(device_type="cpu"):
    """Whether autocast is on for `device_type` here."""
    return _state.on_for(_device_type(device_type)) is not None


def get_autocast_dtype(device_type="cpu"):
    """The 16-bit type autocast uses (or would use) for `device_type`."""
    return _state.cpu_dtype if _device_type(device_type) == "cpu" else _state.cuda_dtype

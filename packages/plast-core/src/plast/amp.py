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

from __future__ import annotations

import contextlib
import math

from . import compiler
from ._core import autocast_state as _state
from ._core import dtypes
from ._core.errors import JitError
from ._core.grad_mode import no_grad
from .ops.shape import stack as _stack

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "GradScaler"]


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


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    """Whether autocast is on for `device_type` here."""
    return _state.on_for(_device_type(device_type)) is not None


def get_autocast_dtype(device_type: str = "cpu") -> dtypes.dtype:
    """The 16-bit type autocast uses (or would use) for `device_type`."""
    return _state.cpu_dtype if _device_type(device_type) == "cpu" else _state.cuda_dtype


class GradScaler:
    """Dynamic loss scaling for float16 training, as torch.amp.GradScaler: ``scaler.scale(loss).backward()``,
    then ``scaler.step(optimizer)`` (which unscales the gradients and skips the step when any is inf or NaN),
    then ``scaler.update()`` (the scale halves after a skipped step and doubles after ``growth_interval`` clean
    ones). ``unscale_(optimizer)`` before gradient clipping, as in torch. The optimizer is any object with
    ``param_groups`` and ``step()`` (plast.optim's).

    Not yet under ``@plast.jit``: a jitted step cannot decide in Python whether to skip, and the skip is not yet
    data in the replayed plan; call ``step``/``update`` outside the jitted function.
    """

    def __init__(
        self,
        device="cpu",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval}")
        self._device = _device_type(device)
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"unscaled": bool, "found_inf": bool, "stepped": bool}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and note whether any is inf or NaN."""
        if not self._enabled:
            return
        if compiler.is_compiling():
            raise JitError(
                "GradScaler.unscale_/step inside @plast.jit is not supported yet; call them outside"
            )
        st = self._state(optimizer)
        if st["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        inv = 1.0 / self._scale
        probes = []
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    g.mul_(inv)
                    probes.append(g.abs().amax().float() * 0.0)  # NaN exactly when g holds an inf or a NaN
            total = _stack(probes).sum().item() if probes else 0.0  # one read for all gradients
        st["found_inf"] = not math.isfinite(total)
        st["unscaled"] = True

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless done), then ``optimizer.step(*args, **kwargs)`` unless a gradient is inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        st = self._state(optimizer)
        if not st["unscaled"]:
            self.unscale_(optimizer)
        st["stepped"] = True
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adjust the scale: backoff after a step with inf/NaN gradients, growth after growth_interval clean ones
        (or set it to new_scale, a number or a one-element tensor)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            states = list(self._per_optimizer.values())
            if not states:
                raise RuntimeError("update(): no inf checks were recorded; call step(optimizer) first")
            if any(s["found_inf"] for s in states):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError(
                "GradScaler.load_state_dict: the state dict is empty (saved from a disabled scaler)"
            )
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} - set(
            state_dict
        )
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing {sorted(missing)}")
        value = state_dict["scale"]
        self._scale = float(value.item() if hasattr(value, "item") else value)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        tracker = state_dict["_growth_tracker"]
        self._growth_tracker = int(tracker.item() if hasattr(tracker, "item") else tracker)

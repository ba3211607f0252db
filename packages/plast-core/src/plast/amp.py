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
import warnings

from . import compiler
from ._core import autocast_state as _state
from ._core import cuda_driver as _cuda_driver
from ._core import dtypes
from ._core.grad_mode import no_grad
from .ops.creation import full as _full
from .ops.creation import zeros as _zeros
from .ops.creation import zeros_like as _zeros_like
from .ops.pointwise import where as _where
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

    The scale and the growth tracker are tensors (0-d float32 and int32, as torch's), and every decision is data:
    ``unscale_`` computes ``found_inf`` with tensor ops, ``step`` hands it to an optimizer that says
    ``_step_supports_amp_scaling`` (plast.optim's fused ones: their update ops skip while it is nonzero) and
    ``update`` computes the new scale with ``where``. So the four calls work inside one ``@plast.jit`` step: the
    plan is traced once and each replay skips, backs off or grows by the values it computes. Other optimizers get
    torch's eager behaviour (a Python branch on ``found_inf``), which a jitted step cannot take.

    >>> scaler = plast.amp.GradScaler(init_scale=8.0)
    >>> w = plast.ones(2, requires_grad=True)
    >>> scaler.scale((w * w).sum()).backward()
    >>> w.grad.tolist()
    [16.0, 16.0]
    >>> scaler.update(new_scale=4.0)
    >>> scaler.get_scale(), scaler.state_dict()["_growth_tracker"]
    (4.0, 0)
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
        if self._enabled and self._device == "cuda" and not _cuda_driver.is_available():
            # torch's behaviour: a CUDA scaler without CUDA warns and passes everything through
            warnings.warn("GradScaler is enabled, but CUDA is not available. Disabling.", stacklevel=2)
            self._enabled = False
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        # written in place by update(), so a jitted step's plan reads the current values on every replay
        device = self._device if self._enabled else "cpu"
        self._scale = _full((), float(init_scale), dtype=dtypes.float32, device=device)
        self._growth_tracker = _zeros((), dtype=dtypes.int32, device=device)
        self._per_optimizer = {}  # id(optimizer) -> {"unscaled": bool, "found_inf": tensor, "stepped": bool}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        """The current scale as a Python float (reads the tensor: not inside a jitted step)."""
        return self._scale.item() if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def _get_growth_tracker(self):
        return int(self._growth_tracker.item()) if self._enabled else 0

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) multiplied by the scale tensor."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": None})

    def unscale_(self, optimizer):
        """Multiply the optimizer's gradients by 1 / scale, in place, and note (as a tensor) whether any is inf
        or NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        # the reciprocal in double, then float32, as torch's
        inv = (1.0 / self._scale.double()).float()
        probes = []
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    g.mul_(inv)
                    probes.append(g.abs().amax().float() * 0.0)  # NaN exactly when g holds an inf or a NaN
            if probes:
                total = _stack(probes).sum()  # one check for all gradients
                found = (total != total).float().reshape(1)
            else:
                found = _zeros((1,), dtype=dtypes.float32, device=self._device)
        st["found_inf"] = found
        st["unscaled"] = True

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless done), then ``optimizer.step(*args, **kwargs)``, skipped when a gradient is inf or
        NaN: by the optimizer's update ops reading found_inf when it says ``_step_supports_amp_scaling`` (the
        step then returns its result, as torch's), else by a Python branch (eager only)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        st = self._state(optimizer)
        if not st["unscaled"]:
            self.unscale_(optimizer)
        st["stepped"] = True
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            # torch's contract: the optimizer finds the tensors as attributes during step(); grad_scale is None
            # because unscale_ has already divided the gradients
            optimizer.grad_scale, optimizer.found_inf = None, st["found_inf"]
            try:
                return optimizer.step(*args, **kwargs)
            finally:
                del optimizer.grad_scale, optimizer.found_inf
        if compiler.is_compiling():
            raise NotImplementedError(
                f"GradScaler.step inside @plast.jit needs an optimizer that skips by data "
                f"(_step_supports_amp_scaling, as plast.optim's fused ones); {type(optimizer).__name__} would "
                "need a Python branch on found_inf: call step/update outside the jitted function"
            )
        if st["found_inf"].item() != 0:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adjust the scale: backoff after a step with inf/NaN gradients, growth after growth_interval clean steps
        (or set it to new_scale, a number or a one-element tensor). Tensor ops only, in place."""
        if not self._enabled:
            return
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, (int, float)):
                    self._scale.fill_(float(new_scale))
                else:
                    self._scale.copy_(new_scale.reshape(()).to(self._scale.dtype))
            else:
                founds = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
                if not founds:
                    raise RuntimeError("update(): no inf checks were recorded; call step(optimizer) first")
                found = founds[0]
                for f in founds[1:]:
                    found = found + f
                skip = (found != 0).reshape(())  # NaN != 0 too
                tracker = self._growth_tracker + 1
                grow = (skip == 0) & (tracker >= self._growth_interval)
                grown = self._scale * self._growth_factor
                # torch grows only to a finite scale (the tracker resets either way)
                grown = _where(grown.abs() < math.inf, grown, self._scale)
                scale = _where(skip, self._scale * self._backoff_factor, _where(grow, grown, self._scale))
                tracker = _where(skip | grow, _zeros_like(tracker), tracker)
                self._scale.copy_(scale)
                self._growth_tracker.copy_(tracker)
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
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
        tracker = state_dict["_growth_tracker"]
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        with no_grad():  # in place: a jitted step traced before the load reads the loaded values
            self._scale.fill_(float(value.item() if hasattr(value, "item") else value))
            self._growth_tracker.fill_(int(tracker.item() if hasattr(tracker, "item") else tracker))

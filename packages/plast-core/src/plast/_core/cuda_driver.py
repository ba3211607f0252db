"""Is a CUDA device usable here, and why not (NVIDIA GPUs of compute capability 8.0 and newer, through PyCUDA).

This module is the lowest layer's view of CUDA: the memory layer asks it before making device arenas, the kernels
(plast.kernels.cuda) before compiling. Nothing CUDA-related is imported with it: ``is_available()`` imports pycuda on its first call and
remembers the answer, and the kernels (``kernels/*.cu``) compile on first use (loader.py). Without pycuda, a
driver or a suitable GPU, ``is_available()`` is False and ``unavailable_reason()`` says which one is missing.

It also holds the one CUDA context (``context()``, ``driver()``, ``arch()``): device memory (plast.memory.cuda)
and the kernels (plast.kernels.cuda) both need it, so it lives below both.

``plast._core.cuda_driver.matmul.allow_tf32`` (False by default, as torch names it) lets float32 matmuls use the
TF32 tensor-core kernel: faster, with 10 mantissa bits per input instead of 23.

>>> import plast._core.cuda_driver as pcuda
>>> isinstance(pcuda.is_available(), bool)
True
"""

import atexit
import os
import threading

from .errors import PlastError

MIN_COMPUTE_CAPABILITY = (8, 0)


class CudaUnavailableError(PlastError, RuntimeError):
    """CUDA was asked for where it can't run; the message says why (no pycuda, no driver, no device, or a GPU
    older than compute capability 8.0)."""


class _MatmulFlags:
    """``allow_tf32``: let float32 matmuls run on TF32 tensor cores (torch.backends.cuda.matmul's name)."""

    __slots__ = ("allow_tf32",)

    def __init__(self):
        self.allow_tf32 = False

    def __repr__(self):
        return f"<plast._core.cuda_driver.matmul allow_tf32={self.allow_tf32}>"


matmul = _MatmulFlags()

_probe = None  # (available, reason, info) once probed


def _probe_device():
    """(available, reason, info): imports pycuda and looks at device 0. Never raises."""
    if os.environ.get("PLAST_DISABLE_CUDA", "0") not in ("", "0"):
        return False, "disabled by PLAST_DISABLE_CUDA", {}
    try:
        import pycuda.driver as drv
    except ImportError as e:
        return False, f"pycuda is not installed (pip install 'plast-core[cuda]'): {e}", {}
    except Exception as e:  # a broken pycuda build (e.g. libcuda missing at import) is "no driver"
        return False, f"pycuda could not load the CUDA driver: {e}", {}
    try:
        drv.init()
    except Exception as e:
        return False, f"no usable NVIDIA driver: {e}", {}
    try:
        count = drv.Device.count()
    except Exception as e:
        return False, f"the CUDA driver could not count devices: {e}", {}
    if count == 0:
        return False, "no CUDA device found", {}
    dev = drv.Device(0)
    cc = dev.compute_capability()
    info = {
        "name": dev.name(),
        "compute_capability": cc,
        "devices": count,
        "memory_bytes": dev.total_memory(),
        "driver_version": drv.get_driver_version(),
    }
    if tuple(cc) < MIN_COMPUTE_CAPABILITY:
        return (
            False,
            (
                f"{dev.name()} has compute capability {cc[0]}.{cc[1]}; plast needs "
                f"{MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]} or newer (Ampere+)"
            ),
            info,
        )
    return True, "", info


def _state():
    global _probe
    if _probe is None:
        _probe = _probe_device()
    return _probe


def is_available():
    """True when pycuda, a driver and a GPU of compute capability 8.0+ are present."""
    return _state()[0]


def unavailable_reason():
    """Why the CUDA backend can't run here ("" when it can)."""
    return _state()[1]


def device_info():
    """Name, compute capability, memory and driver version of device 0 ({} when there is none)."""
    return dict(_state()[2])


def config_lines():
    """Lines for plast.show_config()."""
    ok, reason, info = _state()
    if not ok:
        return [f"cuda: not available ({reason})"]
    cc = info["compute_capability"]
    return [
        f"cuda: {info['name']} (sm_{cc[0]}{cc[1]}, {info['memory_bytes'] / 2**30:.1f} GiB, "
        f"{info['devices']} device(s)), tf32 matmul {'on' if matmul.allow_tf32 else 'off'}"
    ]


def require(what="CUDA tensors"):
    """Raise CudaUnavailableError saying why `what` can't run here, unless the backend is available."""
    if not is_available():
        raise CudaUnavailableError(
            f"{what} need an NVIDIA GPU of compute capability "
            f"{MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]}+ with pycuda, and this machine can't "
            f"provide one: {unavailable_reason()}"
        )


# ---- the context --------------------------------------------------------------------------------------------

_lock = threading.Lock()
_ctx = None  # (pycuda.driver module, context, arch string)


def context():
    """(pycuda.driver, context, arch): device 0's primary context, made current on first use."""
    global _ctx
    if _ctx is None:
        with _lock:
            if _ctx is None:
                require("the CUDA backend")
                import pycuda.driver as drv

                dev = drv.Device(0)
                ctx = dev.retain_primary_context()
                ctx.push()
                atexit.register(_pop_context, ctx)
                major, minor = dev.compute_capability()
                _ctx = (drv, ctx, f"sm_{major}{minor}")
    return _ctx


def _pop_context(ctx):
    try:
        ctx.pop()
    except Exception:
        pass


def driver():
    """The pycuda.driver module, once the context is current."""
    return context()[0]


def arch():
    """This GPU's architecture as nvcc names it ("sm_90")."""
    return context()[2]


__all__ = [
    "CudaUnavailableError",
    "require",
    "is_available",
    "unavailable_reason",
    "device_info",
    "config_lines",
    "matmul",
    "context",
    "driver",
    "arch",
]

"""The process's arenas, per device: one persistent (leaves, parameters, grads, optimizer state) and one
transient (results of ops). DESIGN §3."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._core import cuda_driver as backend
from .._core.devices import Device, as_device
from .._core.hints import DeviceLike
from .arena import Arena
from .arena import view_of as _cpu_view_of

_arenas = {}  # device type -> (persistent, transient)


def _make(dev_type, persistent_bytes=None, transient_bytes=None, grow=True):
    if dev_type == "cuda":
        p, t = _make_cuda(persistent_bytes, transient_bytes, grow)
    else:
        p = Arena("persistent", False, persistent_bytes or 0, grow)
        t = Arena("transient", True, transient_bytes or 0, grow)
    _arenas[dev_type] = (p, t)
    return p, t


def _make_cuda(persistent_bytes, transient_bytes, grow):
    """Device arenas from the CUDA backend, imported only now (the first CUDA tensor or init_arenas): pycuda
    stays unimported in CPU-only programs. Raises CudaUnavailableError saying why when there is no usable GPU."""
    backend.require()
    from . import cuda as memory

    return memory.make_arenas(persistent_bytes, transient_bytes, grow)


def view_of(block, byte_offset, nbytes):
    """A storage for bytes [byte_offset, byte_offset + nbytes) of `block`, on the block's device (the memory
    planner lays out a graph's intermediates in one block this way)."""
    if getattr(block, "device_type", "cpu") == "cuda":
        from .cuda import view_of as cuda_view_of

        return cuda_view_of(block, byte_offset, nbytes)
    return _cpu_view_of(block, byte_offset, nbytes)


def arenas(dev_type="cpu"):
    pair = _arenas.get(dev_type)
    if pair is None:
        pair = _make(dev_type)
    return pair


def persistent(dev_type="cpu"):
    return arenas(dev_type)[0]


def transient(dev_type="cpu"):
    return arenas(dev_type)[1]


def init_arenas(
    device: DeviceLike = Device.CPU,
    persistent_bytes: int | None = None,
    transient_bytes: int | None = None,
    grow: bool = True,
) -> None:
    """Set up the arenas of `device`. Optional: by default arenas grow on demand.

    With ``grow=False`` each arena holds exactly the bytes given and a request that does not fit raises
    ArenaExhaustedError. Calling it again replaces the arenas; tensors made before keep their memory alive.

    ``device=plast.Device.CUDA`` (or "cuda") makes the GPU's arenas; without a usable GPU it raises
    CudaUnavailableError saying why.

    >>> import plast
    >>> plast.init_arenas(device=plast.Device.CPU)
    """
    dev = as_device(device)
    if not grow and (not persistent_bytes or not transient_bytes):
        raise ValueError("init_arenas(grow=False) needs persistent_bytes and transient_bytes")
    _make(dev.type, persistent_bytes, transient_bytes, grow)


def reset_transient_arenas() -> None:
    """Free every transient block at once (O(1)). Tensors still holding transient memory become stale:
    reading them raises StaleTensorError. Leaves, parameters, grads and jit results are not transient."""
    for _, t in _arenas.values():
        t.reset()


@contextlib.contextmanager
def arena_scope() -> Iterator[None]:
    """Run a block and free all transient memory it made on exit (like reset_transient_arenas())."""
    try:
        yield
    finally:
        reset_transient_arenas()


def arena_stats() -> dict[str, dict[str, dict[str, Any]]]:
    """Bytes in use, reserved and peak, per device and arena."""
    out = {}
    for dev_type in list(_arenas) or ["cpu"]:
        p, t = arenas(dev_type)
        out[dev_type] = {"persistent": p.stats(), "transient": t.stats()}
    return out

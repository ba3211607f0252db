"""The process's arenas, per device: one persistent (leaves, parameters, grads, optimizer state), shared by all
threads, and one transient (results of ops) per thread. DESIGN §3.

``_arenas[dev_type]`` is (persistent, transient of the thread computing now): the scheduler and backward replays
read it without a call. graph/threads.bind_arenas() swaps in the calling thread's transient arena when another
thread's was there (``bind_thread``); a thread's own transient arenas live in its thread-local dict and go with
it."""

from __future__ import annotations

import contextlib
import threading
from _thread import get_ident
from collections.abc import Iterator
from typing import Any

from .._core import cuda_driver as backend
from .._core.devices import Device, as_device
from .._core.hints import DeviceLike
from .arena import Arena
from .arena import view_of as _cpu_view_of

_arenas = {}  # device type -> (persistent, transient of the thread `bound_thread`)
_made = {}  # device type -> (version, transient_bytes, grow): how each thread's transient arena is made
_local = threading.local()  # .transient: {device type: (version, Arena)}, the thread's own transient arenas
bound_thread = None  # the thread whose transient arenas _arenas holds (graph/threads.bind_arenas)


def _make(dev_type, persistent_bytes=None, transient_bytes=None, grow=True):
    global bound_thread
    if dev_type == "cuda":
        p, t = _make_cuda(persistent_bytes, transient_bytes, grow)
    else:
        p = Arena("persistent", False, persistent_bytes or 0, grow)
        t = Arena("transient", True, transient_bytes or 0, grow)
    version = _made.get(dev_type, (0,))[0] + 1
    _made[dev_type] = (version, transient_bytes, grow)
    _own()[dev_type] = (version, t)
    _arenas[dev_type] = (p, t)
    if bound_thread != get_ident():
        bound_thread = None  # the other devices' slots: bind_thread puts this thread's in on the next compute
    return p, t


def _own():
    d = getattr(_local, "transient", None)
    if d is None:
        d = _local.transient = {}
    return d


def _own_transient(dev_type):
    """The calling thread's transient arena of `dev_type`, made on first use (as the device's first one was)."""
    own = _own()
    version, transient_bytes, grow = _made[dev_type]
    have = own.get(dev_type)
    if have is None or have[0] != version:  # none yet, or init_arenas replaced the device's arenas since
        if dev_type == "cuda":
            t = _make_cuda(None, transient_bytes, grow)[1]
        else:
            t = Arena("transient", True, transient_bytes or 0, grow)
        have = own[dev_type] = (version, t)
    return have[1]


def bind_thread():
    """Put the calling thread's transient arenas into the shared slots (graph/threads.bind_arenas)."""
    global bound_thread
    for dev_type, (p, _) in list(_arenas.items()):
        _arenas[dev_type] = (p, _own_transient(dev_type))
    bound_thread = get_ident()


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
    """The calling thread's transient arena of `dev_type`."""
    pair = arenas(dev_type)
    return pair[1] if bound_thread == get_ident() else _own_transient(dev_type)


def init_arenas(
    device: DeviceLike = Device.CPU,
    persistent_bytes: int | None = None,
    transient_bytes: int | None = None,
    grow: bool = True,
) -> None:
    """Set up the arenas of `device`. Optional: by default arenas grow on demand.

    With ``grow=False`` each arena holds exactly the bytes given and a request that does not fit raises
    ArenaExhaustedError. Each thread that computes gets a transient arena of its own, made the same way. Calling
    it again replaces the arenas; tensors made before keep their memory alive.

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
    """Free every transient block of the calling thread at once (O(1)). Tensors still holding that memory become
    stale: reading them raises StaleTensorError. Leaves, parameters, grads and jit results are not transient;
    another thread's transient tensors are its own (each thread has its transient arenas)."""
    here = bound_thread == get_ident()  # (transient(), inline: a training loop calls this every step)
    for dev_type, pair in list(_arenas.items()):
        (pair[1] if here else _own_transient(dev_type)).reset()


@contextlib.contextmanager
def arena_scope() -> Iterator[None]:
    """Run a block and free all transient memory it made on exit (like reset_transient_arenas())."""
    try:
        yield
    finally:
        reset_transient_arenas()


def arena_stats() -> dict[str, dict[str, dict[str, Any]]]:
    """Bytes in use, reserved and peak, per device and arena (the transient arena: the calling thread's)."""
    out = {}
    for dev_type in list(_arenas) or ["cpu"]:
        out[dev_type] = {"persistent": persistent(dev_type).stats(), "transient": transient(dev_type).stats()}
    return out

"""Tensors the engine makes without an op: fresh leaves in the persistent arena, leaves filled from numpy, and
the shared 0-d constants that stand for Python scalars in an op (``x * 2``). The public factories
(ops/creation.py, plast.random) and the op families build on these.

Every tensor made here is a ``plast.Tensor``: graph/_graph.py's ``tensor_class()``, the class whose instances
``record`` makes.
"""

import math

import numpy as np

from .._core import dtypes as _dtypes
from .._core.devices import as_device
from .._core.shapes import nbytes
from ..graph._graph import tensor_class
from ..kernels.host import write_host
from ..memory import arenas as _arenas
from .device import _check_device


def device_for(device):
    """The device object for `device`; for CUDA, its arenas and kernels are set up now (CudaUnavailableError
    says why when there is no usable GPU)."""
    return _check_device(as_device(device))


def new_leaf(shape, dtype, device, requires_grad=False, zero=False):
    """A fresh leaf of `shape` in the persistent arena of `device`: zero-filled when `zero`, else uninitialized."""
    dev = device_for(device)
    _dtypes.check_16bit_device(dtype, dev, "new tensor")
    st = _arenas.persistent(dev.type).new(nbytes(shape, dtype.itemsize), zero)
    t = tensor_class()._from_storage(st, shape, dtype, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def leaf_array(t):
    """Writable numpy view of a fresh persistent CPU leaf (for filling it)."""
    return np.frombuffer(t._storage, dtype=t.dtype.np, count=t.numel()).reshape(t.shape)


def write(t, arr):
    """Fill a fresh leaf with host values (copied to the GPU for a CUDA leaf)."""
    if t.device.type == "cpu":
        leaf_array(t)[...] = arr
    else:
        write_host(t, arr)


def from_array(arr, dtype, device=None, requires_grad=False):
    """A new leaf holding a copy of the numpy array `arr`, as `dtype` on `device`."""
    t = new_leaf(arr.shape, dtype, device, requires_grad)
    if arr.size:
        write(t, arr)
    return t


# (type, value, sign, dtype code, device type, device index) -> the shared 0-d constant; ops/elementwise.pyx
# reads it with the same key before calling scalar_tensor, and backward replays skip its storages
SCALAR_CACHE = {}


def wrap_int(value, dtype):
    """A Python int as an integer dtype holds it: its low bits (two's complement), as torch converts the scalar
    operand of arithmetic (``uint8_tensor + 300`` adds 44; ``-uint8_tensor`` multiplies by 255)."""
    bits = 8 * dtype.itemsize
    if dtype.is_signed:
        return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return value % (1 << bits)


def scalar_tensor(value, dtype, device):
    """A 0-d constant in persistent memory, shared by every op that uses the same (value, dtype, device)."""
    # -0.0 == 0.0 (and hashes alike) but is another constant: the sign is part of the key
    key = (
        type(value),
        value,
        math.copysign(1.0, value) if type(value) is float else 0.0,
        dtype.code,
        device.type,
        device.index,
    )
    t = SCALAR_CACHE.get(key)
    if t is None:
        if type(value) is int and dtype is not _dtypes.bool_ and not dtype.is_floating_point:
            if wrap_int(value, dtype) != value:  # a fill, a bound or a written value: torch refuses too
                raise RuntimeError(
                    f"value cannot be converted to type {dtype.name} without overflow: {value}"
                )
        if len(SCALAR_CACHE) > 4096:
            SCALAR_CACHE.clear()
        st = _arenas.persistent(device.type).new(dtype.itemsize)
        t = tensor_class()._from_storage(st, (), dtype, device)
        if device.type == "cpu":
            np.frombuffer(st, dtype=dtype.np, count=1)[0] = value
        else:
            write_host(t, value)
        SCALAR_CACHE[key] = t
    return t

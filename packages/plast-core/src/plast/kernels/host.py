"""Host views, host writes and same-device copies of realized tensors on either device: numpy over CPU memory, the
CUDA backend's transfers for GPU memory (imported on first use: CPU programs never load the CUDA backend)."""

import numpy as np

from .._core.errors import DeviceMismatchError
from .cpu.kernels import np_view


def host_array(t):
    """The values of a realized tensor as numpy: a zero-copy view of CPU memory (internal use only), a fresh
    copy of GPU memory."""
    t._storage.check()
    if t.device.type == "cuda":
        from .cuda import transfer

        return transfer.to_host_array(t)
    return np_view(t)


def write_host(t, values):
    """Write host `values` (broadcast to t's shape, cast to its dtype) into a realized tensor's memory."""
    t._storage.check()
    if t.device.type == "cuda":
        from .cuda import transfer

        transfer.write_from_host(t, values)
        return
    if t.numel():
        np_view(t)[...] = np.asarray(values)


def copy_values(dst, src):
    """dst[...] = src for two realized tensors of one shape on one device."""
    if dst.device != src.device:
        raise DeviceMismatchError(f"copy_values: tensors are on {dst.device} and {src.device}")
    if dst.device.type == "cuda":
        from .cuda import transfer

        transfer.copy_values(dst, src)
        return
    if dst.numel():
        np_view(dst)[...] = np_view(src)

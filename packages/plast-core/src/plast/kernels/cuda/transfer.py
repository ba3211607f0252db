"""Values between the host and CUDA tensors: the kernels of the ``to_device`` op (both columns of its row) and
the host reads and writes the engine needs for CUDA tensors (``.numpy()``, factories, scalar constants,
persistent copies, anomaly checks).

Copies go through the driver's synchronous memcpy calls (memory.py), so a host read also waits for the kernels
that write the tensor. Strided views are read as the smallest byte span that holds them when that span is small,
else gathered into a contiguous block on the device first (a copy kernel). Importable without pycuda.
"""

import numpy as np

from ...memory import cuda as memory
from ..cpu.kernels import np_view
from . import kernels

# A strided view is read back as its whole byte span when the span is at most SPAN_FACTOR times its size or
# at most SPAN_BYTES (a small copy costs about a launch), else gathered on the device first.
SPAN_FACTOR = 2
SPAN_BYTES = 256 << 10


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _contiguous_strides(shape):
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= max(int(shape[i]), 1)
    return tuple(st)


def _is_contiguous(t):
    expected = 1
    for s, st in zip(reversed(t._shape), reversed(t._strides)):
        if s != 1 and st != expected:
            return False
        expected *= s
    return True


def _span(t):
    """(lowest, highest + 1) element offsets a non-empty view touches in its storage."""
    lo = hi = t._offset
    for s, st in zip(t._shape, t._strides):
        if st < 0:
            lo += (s - 1) * st
        else:
            hi += (s - 1) * st
    return lo, hi + 1


def to_host_array(t, out=None):
    """The values of a realized CUDA tensor as a C-contiguous numpy array (a copy; written into `out`, a
    C-contiguous array of t's shape and dtype, when given)."""
    st = t._storage
    st.check()
    shape, npdt, isz = tuple(t._shape), t.dtype.np, t.dtype.itemsize
    n = _prod(shape)
    if out is None:
        out = np.empty(shape, dtype=npdt)
    if n == 0:
        return out
    if _is_contiguous(t):
        return memory.to_host(st, shape, npdt, t._offset * isz, out=out)
    lo, hi = _span(t)
    if hi - lo <= SPAN_FACTOR * n or (hi - lo) * isz <= SPAN_BYTES:
        flat = memory.to_host(st, (hi - lo,), npdt, lo * isz)
        view = np.lib.stride_tricks.as_strided(
            flat[t._offset - lo :], shape=shape, strides=tuple(s * isz for s in t._strides)
        )
        out[...] = view
        return out
    # a sparse view of a large block (a column of a matrix): gather it on the device, then copy n elements
    tmp = memory.transient_arena().new(n * isz)
    kernels.copy_raw(kernels.operand(t), tmp.address, _contiguous_strides(shape), t.dtype.code)
    return memory.to_host(tmp, shape, npdt, out=out)


def write_from_host(t, values):
    """Write host `values` (anything numpy broadcasts to t's shape) into the memory of realized CUDA tensor t."""
    st = t._storage
    st.check()
    a = np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype=t.dtype.np), tuple(t._shape)))
    if a.size == 0:
        return
    if _is_contiguous(t):
        memory.from_host(st, a, t._offset * t.dtype.itemsize)
        return
    tmp = memory.transient_arena().new(a.nbytes)
    memory.from_host(tmp, a)
    src = kernels.Operand(tmp.address, a.shape, _contiguous_strides(a.shape), t.dtype.code, tmp)
    kernels.copy_raw(src, kernels.addr(t), t._strides, t.dtype.code)


def copy_values(dst, src):
    """dst[...] = src for two realized CUDA tensors of one shape (dst's dtype; a cast when they differ)."""
    if tuple(dst._shape) != tuple(src._shape):
        raise ValueError(f"copy_values: shapes differ: {tuple(dst._shape)} and {tuple(src._shape)}")
    dst._storage.check()
    src._storage.check()
    n = _prod(dst._shape)
    if n == 0:
        return
    if dst.dtype is src.dtype and _is_contiguous(dst) and _is_contiguous(src):
        isz = dst.dtype.itemsize
        memory.copy_device(
            dst._storage.address + dst._offset * isz, src._storage.address + src._offset * isz, n * isz
        )
        return
    kernels.copy_raw(kernels.operand(src), kernels.addr(dst), dst._strides, dst.dtype.code)


# ---- the to_device op's kernels (engine contract: outputs are fresh and contiguous) -----------------------


def copy_to_cpu(node, inputs, outputs):
    """CPU column of ``to_device``: a CUDA input copied into a CPU output."""
    x, out = inputs[0], outputs[0]
    if x.device.type != "cuda":
        raise RuntimeError(f"to_device: the CPU kernel copies from CUDA, got an input on {x.device}")
    if out.numel():
        to_host_array(x, out=np_view(out))


def copy_to_cuda(node, inputs, outputs):
    """CUDA column of ``to_device``: a CPU (host to device) or CUDA (device to device) input into a CUDA output."""
    x, out = inputs[0], outputs[0]
    if x.device.type == "cuda":
        copy_values(out, x)
        return
    if not out.numel():
        return

    x._storage.check()
    memory.from_host(out._storage, np.ascontiguousarray(np_view(x)), out._offset * out.dtype.itemsize)

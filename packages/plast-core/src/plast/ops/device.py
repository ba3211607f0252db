"""Moving tensors between devices (``.to(device)``, ``.cuda()``, ``.cpu()``), and reading or writing a tensor's
memory from the host on any device.

A transfer is the op ``to_device``: its row has a kernel per destination (CPU: copy from the GPU; CUDA: copy from
the host or the GPU), and its backward sends the gradient back to the source device, as in torch. Outside a
graph (no grad needed, not tracing) a transfer copies now into persistent memory, as ``clone()`` does.

A transfer always computes its input first and its own output at once, so no unrealized graph ever spans two
devices: the scheduler, the memory planner and fusion only ever see graphs of one device.
"""

from __future__ import annotations

from .._core import dtypes as _dtypes
from .._core import grad_mode as autograd_state
from .._core._structs import TensorBase
from .._core.devices import as_device
from .._core.hints import DeviceLike
from ..graph._graph import record, tensor_class
from ..graph.tape import tracing
from ..kernels.host import host_array
from ..memory import arenas as _arenas
from .registry import register, register_cuda_kernels


def _copy_to_cpu(node, inputs, outputs):
    from ..kernels.cuda import transfer

    transfer.copy_to_cpu(node, inputs, outputs)


def _copy_to_cuda(node, inputs, outputs):
    from ..kernels.cuda import transfer

    transfer.copy_to_cuda(node, inputs, outputs)


def _to_device_bw(node, g):
    return (to_device(g, node.args[0]),)


# The "cuda" column is filled by register_cuda_kernels() (kernels/cuda/table.py) with the same copy.
TO_DEVICE = register("to_device", cpu=_copy_to_cpu, backward=_to_device_bw, saves_inputs=False)


_CUDA = as_device("cuda")


def _check_device(dev):
    """`dev` once it can hold tensors (for CUDA: its arenas and kernels exist, else CudaUnavailableError says
    why). "cuda:0" is "cuda": plast drives one GPU. Every CUDA tensor's device passed here first (factories,
    transfers; an op's output is on its inputs' device), so the op table's "cuda" column is filled here, before
    the first CUDA tensor exists."""
    if dev.type == "cuda":
        if dev.index not in (None, 0):
            raise NotImplementedError(f"plast uses one GPU, cuda:0; got {dev}")
        _arenas.arenas("cuda")
        if "cuda" not in TO_DEVICE.kernels:
            register_cuda_kernels()
        return _CUDA
    return dev


def to_device(x: TensorBase, device: DeviceLike) -> TensorBase:
    """x on `device` (x itself when it is there already)."""
    if not isinstance(x, TensorBase):
        raise TypeError(f"to_device: expected a tensor, got {type(x).__name__}")
    dev = as_device(device)
    if dev == x.device:
        return x
    dev = _check_device(dev)
    _check_device(x.device)
    _dtypes.check_16bit_device(x.dtype, dev, "to_device")
    x._realized()
    if (x.requires_grad and autograd_state.is_grad_enabled()) or tracing():
        # an op: autograd sends the gradient back, and a jit plan replays the copy
        out = record(TO_DEVICE, (x,), (str(x.device),), [(tuple(x.shape), x.dtype)], dev)[0]
        out._realized()
        return out
    st = _arenas.persistent(dev.type).new(x.numel() * x.dtype.itemsize)
    out = tensor_class()._from_storage(st, tuple(x.shape), x.dtype, dev)
    (_copy_to_cuda if dev.type == "cuda" else _copy_to_cpu)(None, [x], [out])
    return out


def cuda(x: TensorBase, device: DeviceLike | int | None = None, non_blocking: bool = False) -> TensorBase:
    """x on the GPU (``non_blocking`` is accepted for torch's sake; copies are synchronous)."""
    if device is None:
        device = "cuda"
    elif isinstance(device, int):
        device = f"cuda:{device}"
    dev = as_device(device)
    if dev.type != "cuda":
        raise ValueError(f"cuda(): expected a CUDA device, got {dev}")
    return to_device(x, dev)


# ---- host reads and writes of tensor memory, on any device ---------------------------------------------------


def values_of(t):
    """t's values as a host array (computed first; a host copy for a GPU tensor): for ops whose result
    depends on values (nonzero, boolean masks)."""
    t._realized()
    return host_array(t)


__all__ = []

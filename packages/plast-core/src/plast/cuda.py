"""plast.cuda: is a GPU usable, and why not (torch.cuda's names).

The CUDA backend's kernels, loader and device arena live in plast.backends.cuda; moving tensors to the GPU
(``.to("cuda")``, ``device="cuda"``) is wired into the engine with the CUDA issue's GPU check.

>>> import plast
>>> isinstance(plast.cuda.is_available(), bool)
True
"""

from .backends import cuda as _backend


def is_available():
    """True when pycuda, a driver and a GPU of compute capability 8.0+ are present."""
    return _backend.is_available()


def unavailable_reason():
    """Why is_available() is False (None when it is True)."""
    return None if _backend.is_available() else _backend.unavailable_reason()


def device_count():
    return 1 if _backend.is_available() else 0


__all__ = ["is_available", "unavailable_reason", "device_count"]

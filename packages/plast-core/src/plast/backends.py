"""plast.backends: torch.backends' flag objects, so scripts that set them run unchanged.

``backends.cuda.matmul.allow_tf32`` is read by plast's float32 GEMMs on GPU. The cudnn and mps flags are read by
nothing (plast has no cuDNN or Metal backend): they hold what is set, and ``is_available()`` answers False.

>>> import plast
>>> plast.backends.cudnn.benchmark = True
>>> plast.backends.cudnn.is_available(), plast.backends.mps.is_available()
(False, False)
"""

from __future__ import annotations

import types

from ._core import cuda_driver as _cuda_driver


class _Cudnn:
    """torch.backends.cudnn's flags; plast uses no cuDNN, so they change nothing."""

    def __init__(self):
        self.enabled = True
        self.benchmark = False
        self.deterministic = False
        self.allow_tf32 = True

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def version():
        return None

    def __repr__(self):
        return (
            f"<plast.backends.cudnn (unused by plast) enabled={self.enabled} benchmark={self.benchmark} "
            f"deterministic={self.deterministic} allow_tf32={self.allow_tf32}>"
        )


class _Mps:
    """torch.backends.mps: plast has no Metal backend."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


cudnn = _Cudnn()
mps = _Mps()
# backends.cuda.matmul.allow_tf32: the flag plast's CUDA GEMMs read
cuda = types.SimpleNamespace(matmul=_cuda_driver.matmul, is_built=lambda: True)

__all__ = ["cuda", "cudnn", "mps"]

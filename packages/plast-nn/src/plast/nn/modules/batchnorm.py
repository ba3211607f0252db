"""torch.nn.modules.batchnorm's names in plast (re-exports only; the classes live in plast.nn)."""

from ..normalization import BatchNorm1d, BatchNorm2d

__all__ = ["BatchNorm1d", "BatchNorm2d"]

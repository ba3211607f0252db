"""torch.nn.modules.pooling's names in plast (re-exports only; the classes live in plast.nn)."""

from ..pooling import AvgPool2d, MaxPool2d

__all__ = ["MaxPool2d", "AvgPool2d"]

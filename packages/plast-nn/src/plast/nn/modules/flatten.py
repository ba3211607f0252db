"""torch.nn.modules.flatten's names in plast (re-exports only; the classes live in plast.nn)."""

from ..linear import Flatten

__all__ = ["Flatten"]

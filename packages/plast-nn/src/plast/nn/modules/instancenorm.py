"""torch.nn.modules.instancenorm's names in plast (re-exports only; the classes live in plast.nn)."""

from ..instancenorm import InstanceNorm1d, InstanceNorm2d

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]

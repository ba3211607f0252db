"""torch.nn.modules.linear's names in plast (re-exports only; the classes live in plast.nn)."""

from ..linear import Bilinear, Identity, Linear, NonDynamicallyQuantizableLinear

__all__ = ["Identity", "Linear", "Bilinear", "NonDynamicallyQuantizableLinear"]

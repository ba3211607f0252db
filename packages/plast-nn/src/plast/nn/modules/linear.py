"""torch.nn.modules.linear's names in plast (re-exports only; the classes live in plast.nn)."""

from ..linear import (
    Bilinear,
    Identity,
    Linear,
    NonDynamicallyQuantizableLinear,  # noqa: F401 (torch has it here, outside __all__ too)
)

__all__ = ["Identity", "Linear", "Bilinear"]

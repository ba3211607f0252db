"""torch.nn.modules.pixelshuffle's names in plast (re-exports only; the classes live in plast.nn)."""

from ..pixelshuffle import PixelShuffle, PixelUnshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]

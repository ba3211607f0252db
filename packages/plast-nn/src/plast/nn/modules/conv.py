"""torch.nn.modules.conv's names in plast (re-exports only; the classes live in plast.nn)."""

from ..conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]

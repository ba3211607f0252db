"""torch.nn.modules.upsampling's names in plast (re-exports only; the classes live in plast.nn)."""

from ..upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]

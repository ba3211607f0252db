"""torch.nn.modules.normalization's names in plast (re-exports only; the classes live in plast.nn)."""

from ..normalization import GroupNorm, LayerNorm, RMSNorm

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm"]

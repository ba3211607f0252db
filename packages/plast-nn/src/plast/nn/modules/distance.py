"""torch.nn.modules.distance's names in plast (re-exports only; the classes live in plast.nn)."""

from ..distance import CosineSimilarity, PairwiseDistance

__all__ = ["CosineSimilarity", "PairwiseDistance"]

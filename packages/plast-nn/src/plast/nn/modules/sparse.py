"""torch.nn.modules.sparse's names in plast (re-exports only; the classes live in plast.nn)."""

from ..sparse import Embedding

__all__ = ["Embedding"]

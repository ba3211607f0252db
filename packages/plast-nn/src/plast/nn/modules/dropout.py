"""torch.nn.modules.dropout's names in plast (re-exports only; the classes live in plast.nn)."""

from ..dropout import Dropout

__all__ = ["Dropout"]

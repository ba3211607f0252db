"""torch.nn.modules.module's names in plast (re-exports only; the classes live in plast.nn)."""

from ..module import Module, RemovableHandle

__all__ = ["Module", "RemovableHandle"]

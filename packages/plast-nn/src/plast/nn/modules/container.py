"""torch.nn.modules.container's names in plast (re-exports only; the classes live in plast.nn)."""

from ..containers import ModuleDict, ModuleList, Sequential

__all__ = ["Sequential", "ModuleList", "ModuleDict"]

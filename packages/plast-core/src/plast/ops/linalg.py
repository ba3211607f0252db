"""matmul: 1-D, 2-D and batched with broadcasting, like torch.matmul (but integer x float promotes)."""

from . import _linalg

MATMUL = _linalg.MATMUL  # the row, registered with the compiled function (ops/_linalg.pyx)
matmul = _linalg.matmul  # compiled (ops/_linalg.pyx): a Linear layer's backward runs two per step


__all__ = ["matmul"]

"""matmul: 1-D, 2-D and batched with broadcasting, like torch.matmul (but integer x float promotes)."""

from ..kernels.cpu import kernels as cpu
from . import _linalg, movement
from .registry import register


def _matmul_bw(node, g):
    a, b = node.inputs
    ga = matmul(g, movement.transpose(b, -1, -2)) if a.requires_grad else None
    if not b.requires_grad:
        return ga, None
    if a.ndim == 2 and b.ndim == 2:
        return ga, _linalg.weight_grad(a, g, b)
    return ga, matmul(movement.transpose(a, -1, -2), g)


MATMUL = register("matmul", cpu=cpu.matmul_nd, backward=_matmul_bw, half=True)  # 16-bit: csrc/gemm16.c


_linalg.bind({"matmul": MATMUL})
matmul = _linalg.matmul  # compiled (ops/_linalg.pyx): a Linear layer's backward runs two per step


__all__ = ["matmul"]

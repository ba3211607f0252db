"""``plast.linalg``: norms under torch.linalg's names and rules (the kernels and gradients are in ops/reduce.py).

>>> plast.linalg.vector_norm(plast.tensor([3.0, 4.0])).item()
5.0
>>> plast.linalg.matrix_norm(plast.eye(2), "nuc").item()
2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._core.hints import DTypeLike
from .ops.reduce import matrix_norm, vector_norm

if TYPE_CHECKING:  # for annotations only: no run-time import
    from ._tensor import Tensor


def norm(
    x: Tensor,
    ord: float | str | None = None,  # noqa: A002 -- torch's argument name
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: DTypeLike | None = None,
) -> Tensor:
    """torch.linalg.norm: a vector norm over one dim (or over all elements when ``ord`` and ``dim`` are both
    None), a matrix norm over two dims (``dim`` a pair, or a 2-D input with ``ord`` given and no ``dim``)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, tuple(dim), keepdim, dtype=dtype)
    if dim is None and ord is not None:
        if x.ndim == 2:
            return matrix_norm(x, ord, (-2, -1), keepdim, dtype=dtype)
        if x.ndim != 1:
            raise RuntimeError(
                f"linalg.norm: an input of {x.ndim} dims with ord={ord!r} needs dim= (1 or 2 dims), as in torch"
            )
    return vector_norm(x, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


__all__ = ["matrix_norm", "norm", "vector_norm"]

"""Distances between rows (torch.nn.functional.cosine_similarity / pairwise_distance and their modules
CosineSimilarity, PairwiseDistance), written in plast ops."""

import plast
from plast.errors import ShapeError

from .module import Module


def _broadcast(x1, x2, what):
    a, b = tuple(x1.shape), tuple(x2.shape)
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    shape = []
    for i, (p, q) in enumerate(zip(a, b)):
        if p != q and 1 not in (p, q):
            raise ShapeError(
                f"{what}: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not broadcast (dim {i}: {p} vs {q})"
            )
        shape.append(max(p, q))
    return x1.expand(*shape), x2.expand(*shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim``, after broadcasting, as torch
    computes it (each input divided by its clamped norm first).

    >>> from plast.nn.functional import cosine_similarity
    >>> cosine_similarity(plast.tensor([[1.0, 0.0]]), plast.tensor([[1.0, 1.0]])).tolist()  # doctest: +ELLIPSIS
    [0.7071...]
    """
    x1, x2 = _broadcast(x1, x2, "cosine_similarity")
    n1 = plast.linalg.vector_norm(x1, 2, dim=dim, keepdim=True).clamp_min(eps)
    n2 = plast.linalg.vector_norm(x2, 2, dim=dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim, after broadcasting (torch.nn.functional.pairwise_distance).

    >>> from plast.nn.functional import pairwise_distance
    >>> [round(v, 4) for v in pairwise_distance(plast.tensor([[0.0, 0.0]]), plast.tensor([[3.0, 4.0]])).tolist()]
    [5.0]
    """
    x1, x2 = _broadcast(x1, x2, "pairwise_distance")
    if x1.ndim == 0:
        raise ShapeError("pairwise_distance: expected inputs with at least 1 dim, got 0-d tensors")
    return plast.linalg.vector_norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


class CosineSimilarity(Module):
    """cosine_similarity(x1, x2, dim, eps) (torch.nn.CosineSimilarity).

    >>> plast.nn.CosineSimilarity(dim=0)(plast.tensor([1.0, 0.0]), plast.tensor([2.0, 0.0])).item()
    1.0
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """pairwise_distance(x1, x2, p, eps, keepdim) (torch.nn.PairwiseDistance).

    >>> plast.nn.PairwiseDistance(p=1.0, eps=0.0)(plast.tensor([[0.0, 0.0]]), plast.tensor([[3.0, 4.0]])).tolist()
    [7.0]
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

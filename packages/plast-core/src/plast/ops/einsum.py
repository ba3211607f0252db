"""einsum as a composite of views, sums and batched matmuls (autograd and double backward come for free).

Each operand first takes diagonals for labels repeated within it and sums out labels no one else needs; then
operands are contracted left to right, each pair as one batched matmul: (batch, kept-left, contracted) @
(batch, contracted, kept-right). Labels of size 1 broadcast against the other operands, as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core._structs import TensorBase
from .._core.errors import ShapeError
from . import movement
from .linalg import matmul
from .reduce import sum as rsum
from .shape import diagonal

_LETTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _parse_term(term, where):
    """Labels of one term; '...' becomes the marker None."""
    out, i = [], 0
    while i < len(term):
        if term.startswith("...", i):
            if None in out:
                raise ValueError(f"einsum(): {where} contains more than one ellipsis ('...')")
            out.append(None)
            i += 3
        elif term[i] in _LETTERS:
            out.append(term[i])
            i += 1
        else:
            raise ValueError(
                f"einsum(): invalid subscript {term[i]!r} in {where}; subscripts are letters a-z, A-Z"
            )
    return out


def _expand_ellipsis(labels, ndim, n_ell, k):
    """Replace the ellipsis marker by labels for the operand's broadcast dims (right-aligned with the others)."""
    if None not in labels:
        if len(labels) != ndim:
            raise ValueError(
                f"einsum(): the number of subscripts ({len(labels)}) does not match the number of dims ({ndim}) "
                f"of operand {k}"
            )
        return labels
    n_here = ndim - (len(labels) - 1)
    if n_here < 0:
        raise ValueError(
            f"einsum(): operand {k} has {ndim} dims, fewer than its {len(labels) - 1} subscripts"
        )
    i = labels.index(None)
    return labels[:i] + [f".{n_ell - n_here + j}" for j in range(n_here)] + labels[i + 1 :]


def _sum_labels(x, labels, drop):
    dims = tuple(i for i, lab in enumerate(labels) if lab in drop)
    if not dims:
        return x, labels
    return rsum(x, dims), [lab for lab in labels if lab not in drop]


def _contract(a, la, b, lb, keep, size):
    a, la = _sum_labels(a, la, {lab for lab in la if lab not in lb and lab not in keep})
    b, lb = _sum_labels(b, lb, {lab for lab in lb if lab not in la and lab not in keep})
    batch = [lab for lab in la if lab in lb and lab in keep]
    con = [lab for lab in la if lab in lb and lab not in keep]
    a_only = [lab for lab in la if lab not in lb]
    b_only = [lab for lab in lb if lab not in la]

    def prod(labels):
        n = 1
        for lab in labels:
            n *= size[lab]
        return n

    a2 = movement.permute(a, tuple(la.index(lab) for lab in batch + a_only + con))
    b2 = movement.permute(b, tuple(lb.index(lab) for lab in batch + con + b_only))
    a2 = movement.reshape(a2, (prod(batch), prod(a_only), prod(con)))
    b2 = movement.reshape(b2, (prod(batch), prod(con), prod(b_only)))
    out = matmul(a2, b2)
    labels = batch + a_only + b_only
    return movement.reshape(out, tuple(size[lab] for lab in labels)), labels


def einsum(equation: str, *operands: TensorBase | Sequence[TensorBase]) -> TensorBase:
    """Einstein summation, as torch.einsum: ``einsum("bij,bjk->bik", a, b)``; '...' broadcasts, labels repeated
    within one operand take its diagonal, and without '->' the output is the labels used once, sorted.

    >>> a, b = plast.ones(2, 3), plast.ones(3, 4)
    >>> plast.einsum("ij,jk->ik", a, b).shape
    plast.Size([2, 4])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a string, got {type(equation).__name__}")
    for k, t in enumerate(operands):
        if not isinstance(t, TensorBase):
            raise TypeError(f"einsum(): operand {k} must be a tensor, got {type(t).__name__}")
    if not operands:
        raise ValueError("einsum(): needs at least one operand")
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError(f"einsum(): the equation {equation!r} has more than one '->'")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum(): the equation {equation!r} has {len(terms)} operand term(s) but {len(operands)} operand(s) "
            "were given"
        )
    parsed = [_parse_term(t, f"operand term {k} of {equation!r}") for k, t in enumerate(terms)]
    n_ell = max((t.ndim - (len(p) - 1) for p, t in zip(parsed, operands) if None in p), default=0)
    labels = [_expand_ellipsis(p, t.ndim, n_ell, k) for k, (p, t) in enumerate(zip(parsed, operands))]
    ell = [f".{j}" for j in range(n_ell)]
    if arrow:
        out_p = _parse_term(rhs, f"the output of {equation!r}")
        out = []
        for lab in out_p:
            out += ell if lab is None else [lab]
        seen = set()
        for lab in out:
            if lab in seen:
                raise ValueError(f"einsum(): output subscript {lab!r} appears more than once in {equation!r}")
            seen.add(lab)
            if not lab.startswith(".") and not any(lab in ls for ls in labels):
                raise ValueError(
                    f"einsum(): output subscript {lab!r} does not appear in any operand of {equation!r}"
                )
    else:
        counts = {}
        for ls in labels:
            for lab in ls:
                counts[lab] = counts.get(lab, 0) + 1
        out = ell + sorted(lab for lab, c in counts.items() if c == 1 and not lab.startswith("."))

    size = {}
    for k, (ls, t) in enumerate(zip(labels, operands)):
        for lab, s in zip(ls, t.shape):
            prev = size.get(lab, 1)
            if s != 1 and prev != 1 and s != prev:
                shown = ", ".join(str(tuple(o.shape)) for o in operands)
                raise ShapeError(
                    f"einsum(): subscript {lab.lstrip('.') or '...'!r} has size {prev} in one operand and {s} in "
                    f"operand {k} of {equation!r} (operand shapes {shown})"
                )
            if s != 1 or lab not in size:
                size[lab] = s

    # per operand: diagonals for repeated labels, broadcast size-1 dims
    ops = []
    for ls, t in zip(labels, operands):
        ls = list(ls)
        while len(set(ls)) != len(ls):
            lab = next(lab for lab in ls if ls.count(lab) > 1)
            i = ls.index(lab)
            j = ls.index(lab, i + 1)
            if t.shape[i] != t.shape[j]:
                raise ShapeError(
                    f"einsum(): subscript {lab!r} is repeated in one operand with sizes {t.shape[i]} and "
                    f"{t.shape[j]} in {equation!r}"
                )
            t = diagonal(t, 0, i, j)
            ls = [x for k, x in enumerate(ls) if k not in (i, j)] + [lab]
        target = tuple(size[lab] for lab in ls)
        if tuple(t.shape) != target:
            t = movement.expand(t, target)
        ops.append((t, ls))

    keep_out = set(out)
    x, lx = ops[0]
    rest_labels = [set(ls) for _, ls in ops]
    for k in range(1, len(ops)):
        keep = keep_out.union(*rest_labels[k + 1 :])
        b, lb = ops[k]
        x, lx = _contract(x, lx, b, lb, keep, size)
    x, lx = _sum_labels(x, lx, {lab for lab in lx if lab not in keep_out})
    for lab in out:
        if lab not in lx:  # an ellipsis dim that no operand has (fewer broadcast dims than the output names)
            raise ValueError(
                f"einsum(): output subscript {lab!r} has no matching operand dim in {equation!r}"
            )
    perm = tuple(lx.index(lab) for lab in out)
    return movement.permute(x, perm) if perm != tuple(range(len(perm))) else x


__all__ = ["einsum"]

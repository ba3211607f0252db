"""Loss functions plast-core does not provide, written in plast ops with torch.nn.functional's signatures:
kl_div, huber_loss, margin_ranking_loss, triplet_margin_loss."""

import warnings

import plast
from plast.errors import ShapeError

from .distance import pairwise_distance


def _reduction(size_average, reduce, reduction):
    # torch's deprecated size_average / reduce flags mapped to `reduction` as torch maps them
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction, what):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(
        f"{what}: {reduction!r} is not a valid value for reduction (use 'none', 'mean' or 'sum')"
    )


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence of ``target`` from the log-probabilities ``input``:
    ``target * (log(target) - input)`` (0 where target is 0), or ``exp(target) * (target - input)`` with
    ``log_target``. ``reduction='batchmean'`` divides the sum by the batch size (the mathematically right KL);
    'mean' divides by the number of elements, as torch (which warns about it).

    >>> from plast.nn.functional import kl_div
    >>> round(kl_div(plast.tensor([[-1.0, -0.5]]), plast.tensor([[0.25, 0.75]]), reduction="batchmean").item(), 4)
    0.0627
    """
    reduction = _reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"kl_div: {reduction!r} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size. 'batchmean' "
            "divides only by the batch size, and aligns with the KL div math definition. 'mean' will be changed "
            "to behave the same as 'batchmean' in the next major release.",
            stacklevel=2,
        )
    if log_target:
        loss = plast.exp(target) * (target - input)
    else:
        pos = target > 0
        # NOTE: log of a safe value, so the branch where() drops has a finite gradient (xlogy's 0 * log 0 = 0)
        xlogy = plast.where(pos, target * plast.log(plast.where(pos, target, 1.0)), 0.0)
        loss = xlogy - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim != 0 else loss.sum()
    return _reduce(loss, reduction, "kl_div")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta), with d = input - target; an optional
    elementwise ``weight`` of the input's shape (torch.nn.functional.huber_loss).

    >>> from plast.nn.functional import huber_loss
    >>> huber_loss(plast.tensor([0.5, 3.0]), plast.tensor([0.0, 0.0]), reduction="none").tolist()
    [0.125, 2.5]
    """
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(
            f"Using a target size ({tuple(target.shape)}) that is different to the input size "
            f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. Please "
            "ensure they have the same size.",
            stacklevel=2,
        )
    d = input - target
    a = d.abs()
    loss = plast.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError(
                f"huber_loss: weights and input must have the same size, got weight {tuple(weight.shape)} and "
                f"input {tuple(input.shape)}"
            )
        loss = loss * weight
    return _reduce(loss, reduction, "huber_loss")


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}.

    >>> from plast.nn.functional import margin_ranking_loss
    >>> margin_ranking_loss(plast.tensor([1.0, 2.0]), plast.tensor([2.0, 1.0]), plast.tensor([1.0, 1.0])).item()
    0.5
    """
    reduction = _reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: "
            f"{tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)} "
        )
    loss = (-target * (input1 - input2) + margin).clamp_min(0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def triplet_margin_loss(
    anchor,
    positive,
    negative,
    margin=1.0,
    p=2,
    eps=1e-6,
    swap=False,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise_distance of norm ``p``; ``swap`` uses
    min(d(a, n), d(p, n)) as the negative distance (torch.nn.functional.triplet_margin_loss).

    >>> from plast.nn.functional import triplet_margin_loss
    >>> a, pos, neg = plast.tensor([[0.0, 0.0]]), plast.tensor([[0.0, 1.0]]), plast.tensor([[0.0, 3.0]])
    >>> triplet_margin_loss(a, pos, neg, eps=0.0).item()
    0.0
    """
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise ShapeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
            f"got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = plast.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = (margin + d_pos - d_neg).clamp_min(0)
    return _reduce(loss, reduction, "triplet_margin_loss")

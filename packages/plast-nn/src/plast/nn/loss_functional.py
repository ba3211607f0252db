"""Loss functions plast-core does not provide, written in plast ops with torch.nn.functional's signatures:
kl_div, huber_loss, margin_ranking_loss, triplet_margin_loss, ctc_loss."""

import warnings

import numpy as np

import plast
from plast.errors import ShapeError

from . import functional as F
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


def _as_int_list(v, what):
    if isinstance(v, plast.Tensor):
        if v.ndim > 1:
            raise ShapeError(
                f"ctc_loss: {what} must be a 1-D tensor or a sequence, got shape {tuple(v.shape)}"
            )
        return [int(x) for x in (v.tolist() if v.ndim else [v.item()])]
    return [int(x) for x in v]


# a finite stand-in for log(0): sums of impossible paths stay hugely negative, and their gradients finite
_LOG_ZERO = -1e30


def _logsumexp3(a, b, c):
    m = plast.maximum(plast.maximum(a, b), c).detach()
    return m + plast.log(plast.exp(a - m) + plast.exp(b - m) + plast.exp(c - m))


def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank=0,
    reduction="mean",
    zero_infinity=False,
):
    """Connectionist temporal classification loss (torch.nn.functional.ctc_loss): ``log_probs`` (T, N, C) (or
    (T, C) unbatched) of log-probabilities, ``targets`` (N, S) padded or 1-D concatenated, lengths per sample.
    'mean' divides each sample's loss by its target length, then averages; an impossible alignment gives inf
    (0 with ``zero_infinity``).

    The forward (alpha) recursion runs over time in plast ops, so the gradient comes from autograd and is the
    exact one with respect to ``log_probs``. torch's kernel returns ``exp(log_probs) - posterior`` instead,
    which is the right gradient of the logits when log_probs come from log_softmax (the usual case): through a
    log_softmax both give the same gradients. Lengths and targets are read on the host (eager only).

    >>> lp = plast.log_softmax(plast.zeros(3, 1, 2), dim=-1)
    >>> round(ctc_loss(lp, plast.tensor([[1]]), [3], [1], reduction="sum").item(), 4)
    0.2877
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"ctc_loss: {reduction!r} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ShapeError(
            f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), got {tuple(log_probs.shape)}"
        )
    T, N, C = lp.shape
    in_lens = _as_int_list(input_lengths, "input_lengths")
    tg_lens = _as_int_list(target_lengths, "target_lengths")
    if len(in_lens) != N or len(tg_lens) != N:
        raise ShapeError(
            f"ctc_loss: expected {N} input and target lengths (one per sample), got {len(in_lens)} and {len(tg_lens)}"
        )
    if max(in_lens) > T:
        raise ShapeError(
            f"ctc_loss: an input length ({max(in_lens)}) exceeds the time steps of log_probs ({T})"
        )
    tg = np.asarray(targets.tolist() if isinstance(targets, plast.Tensor) else targets, dtype=np.int64)
    S = max(max(tg_lens), 1)
    padded = np.full((N, S), blank, dtype=np.int64)
    if tg.ndim == 1 and not unbatched:
        offsets = np.concatenate([[0], np.cumsum(tg_lens)])
        for n in range(N):
            padded[n, : tg_lens[n]] = tg[offsets[n] : offsets[n + 1]]
    else:
        tg = tg.reshape(N, -1)
        for n in range(N):
            padded[n, : tg_lens[n]] = tg[n, : tg_lens[n]]
    L = 2 * S + 1
    ext = np.full((N, L), blank, dtype=np.int64)
    ext[:, 1::2] = padded
    skip = np.zeros((N, L), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    valid = np.arange(L)[None, :] < (2 * np.asarray(tg_lens) + 1)[:, None]
    dev, dt = lp.device, lp.dtype
    ext_t = plast.tensor(ext, device=dev)
    skip_t = plast.tensor(skip, device=dev)
    valid_t = plast.tensor(valid, device=dev)
    neg = plast.full((N, L), _LOG_ZERO, dtype=dt, device=dev)
    start = np.zeros((N, L), dtype=bool)
    start[:, 0] = True
    start[:, 1] = np.asarray(tg_lens) > 0
    emit = plast.gather(lp[0], 1, ext_t)
    alpha = plast.where(plast.tensor(start, device=dev), emit, neg)
    in_arr = np.asarray(in_lens)
    for t in range(1, T):
        a1 = F.pad(alpha[:, :-1], (1, 0), value=_LOG_ZERO)
        a2 = plast.where(skip_t, F.pad(alpha[:, :-2], (2, 0), value=_LOG_ZERO), neg)
        new = plast.where(valid_t, _logsumexp3(alpha, a1, a2) + plast.gather(lp[t], 1, ext_t), neg)
        running = in_arr > t
        if running.all():
            alpha = new
        elif running.any():
            alpha = plast.where(plast.tensor(running[:, None], device=dev), new, alpha)
        else:
            break
    last = 2 * np.asarray(tg_lens)
    end = plast.gather(alpha, 1, plast.tensor(last[:, None], device=dev)).squeeze(1)
    before = plast.gather(alpha, 1, plast.tensor(np.maximum(last - 1, 0)[:, None], device=dev)).squeeze(1)
    before = plast.where(
        plast.tensor(last > 0, device=dev), before, plast.full((N,), _LOG_ZERO, dtype=dt, device=dev)
    )
    m = plast.maximum(end, before).detach()
    loss = -(m + plast.log(plast.exp(end - m) + plast.exp(before - m)))
    impossible = loss > 1e29
    if zero_infinity:
        loss = plast.where(impossible, 0.0, loss)
    else:
        loss = plast.where(impossible, float("inf"), loss)
    if unbatched:
        loss = loss.squeeze(0)
    if reduction == "mean":
        denom = plast.tensor(np.maximum(np.asarray(tg_lens), 1).astype(dt.np), device=dev)
        return (loss / (denom if not unbatched else denom[0])).mean()
    return _reduce(loss, reduction, "ctc_loss")

"""Loss modules over plast-core's loss functions (torch's names, arguments and defaults)."""

import plast

from . import functional as F
from .module import Module


def _legacy_reduction(size_average, reduce, reduction):
    # torch's deprecated size_average / reduce flags, mapped to `reduction` as torch maps them
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        reduction = _legacy_reduction(size_average, reduce, reduction)
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(
                f"{type(self).__name__}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}"
            )
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error.

    >>> plast.nn.MSELoss()(plast.tensor([1.0, 3.0]), plast.tensor([0.0, 0.0])).item()
    5.0
    """

    def forward(self, input, target):
        return plast.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    >>> plast.nn.L1Loss()(plast.tensor([1.0, -3.0]), plast.tensor([0.0, 0.0])).item()
    2.0
    """

    def forward(self, input, target):
        return plast.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Huber-style loss: quadratic below `beta`, linear above.

    >>> plast.nn.SmoothL1Loss()(plast.tensor([0.5]), plast.tensor([0.0])).item()
    0.125
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return plast.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class CrossEntropyLoss(_WeightedLoss):
    """log_softmax + negative log likelihood in one fused op; class indices (with ``ignore_index``) or class
    probabilities as targets; ``label_smoothing``; per-class ``weight``.

    >>> round(plast.nn.CrossEntropyLoss()(plast.zeros(2, 4), plast.tensor([0, 3])).item(), 4)
    1.3863
    """

    def __init__(
        self,
        weight=None,
        size_average=None,
        ignore_index=-100,
        reduce=None,
        reduction="mean",
        label_smoothing=0.0,
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return plast.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities.

    >>> plast.nn.NLLLoss()(plast.tensor([[-1.0, -2.0]]), plast.tensor([1])).item()
    2.0
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return plast.nll_loss(
            input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities.

    >>> round(plast.nn.BCELoss()(plast.tensor([0.5]), plast.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return plast.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (sigmoid fused in, numerically stable), with optional ``pos_weight``.

    >>> round(plast.nn.BCEWithLogitsLoss()(plast.tensor([0.0]), plast.tensor([1.0])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return plast.binary_cross_entropy_with_logits(
            input, target, weight=self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of the target from log-probabilities (torch.nn.KLDivLoss): reduction
    'mean' (per element, as torch), 'batchmean' (the KL per sample), 'sum' or 'none'; ``log_target`` when the
    target is given as log-probabilities too.

    >>> round(plast.nn.KLDivLoss(reduction="sum")(plast.tensor([-0.5]), plast.tensor([0.5])).item(), 4)
    -0.0966
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        Module.__init__(self)
        reduction = _legacy_reduction(size_average, reduce, reduction)
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(
                f"KLDivLoss: reduction must be 'none', 'mean', 'batchmean' or 'sum', got {reduction!r}"
            )
        self.reduction = reduction
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class HuberLoss(_Loss):
    """Huber loss (torch.nn.HuberLoss): quadratic below ``delta``, linear (slope delta) above.

    >>> plast.nn.HuberLoss(delta=1.0)(plast.tensor([3.0]), plast.tensor([0.0])).item()
    2.5
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class MarginRankingLoss(_Loss):
    """max(0, -y * (x1 - x2) + margin) (torch.nn.MarginRankingLoss).

    >>> plast.nn.MarginRankingLoss(margin=1.0)(plast.tensor([1.0]), plast.tensor([1.0]), plast.tensor([1.0])).item()
    1.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """max(d(a, p) - d(a, n) + margin, 0) with the p-norm pairwise distance (torch.nn.TripletMarginLoss).

    >>> a = plast.zeros(1, 2)
    >>> plast.nn.TripletMarginLoss(margin=1.0, eps=0.0)(a, a, plast.tensor([[0.0, 0.5]])).item()
    0.5
    """

    def __init__(
        self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"
    ):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(
            anchor,
            positive,
            negative,
            margin=self.margin,
            p=self.p,
            eps=self.eps,
            swap=self.swap,
            reduction=self.reduction,
        )


class CTCLoss(_Loss):
    """Connectionist temporal classification (torch.nn.CTCLoss): ``forward(log_probs, targets, input_lengths,
    target_lengths)``; see ``plast.nn.functional.ctc_loss`` for the gradient convention.

    >>> lp = plast.log_softmax(plast.zeros(3, 1, 2), dim=-1)
    >>> round(plast.nn.CTCLoss(reduction="sum")(lp, plast.tensor([[1]]), [3], [1]).item(), 4)
    0.2877
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            self.blank,
            self.reduction,
            self.zero_infinity,
        )

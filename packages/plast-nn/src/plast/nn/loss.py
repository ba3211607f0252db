"""Loss modules over plast-core's loss functions (torch's names, arguments and defaults)."""

import plast

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

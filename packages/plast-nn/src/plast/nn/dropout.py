"""Dropout (torch.nn.Dropout): zero elements with probability p while training, scaling the rest by 1/(1-p)."""

from . import functional as F
from .module import Module


class Dropout(Module):
    """Identity in eval mode; in training each element is zeroed with probability ``p`` and the others scaled by
    ``1 / (1 - p)``. ``inplace`` is accepted and computed out of place (same result).

    >>> d = plast.nn.Dropout(0.5).eval()
    >>> d(plast.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

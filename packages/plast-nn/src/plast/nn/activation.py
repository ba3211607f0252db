"""Activation modules: each calls its plast.nn.functional twin (STYLE.md item 13).

``inplace=True`` is accepted for drop-in compatibility and computed out of place (same result; the input is
left unchanged).
"""

from . import functional as F
from .module import Module


class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0).

    >>> plast.nn.ReLU()(plast.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    def forward(self, input):
        return F.relu(input)


class SiLU(_Inplace):
    """x * sigmoid(x).

    >>> round(plast.nn.SiLU()(plast.tensor([1.0])).item(), 4)
    0.7311
    """

    def forward(self, input):
        return F.silu(input)


class GELU(Module):
    """GELU, exact (``approximate="none"``) or with the tanh approximation.

    >>> plast.nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """1 / (1 + exp(-x)).

    >>> plast.nn.Sigmoid()(plast.tensor([0.0])).tolist()
    [0.5]
    """

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x).

    >>> plast.nn.Tanh()(plast.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input):
        return F.tanh(input)


class LeakyReLU(Module):
    """x where x > 0, else negative_slope * x.

    >>> plast.nn.LeakyReLU(0.5)(plast.tensor([-2.0])).tolist()
    [-1.0]
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1).

    >>> plast.nn.ELU()(plast.tensor([1.0])).tolist()
    [1.0]
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta (x itself above the threshold).

    >>> plast.nn.Softplus()(plast.tensor([30.0])).tolist()
    [30.0]
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """softmax along `dim`.

    >>> plast.nn.Softmax(dim=0)(plast.tensor([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax) along `dim`.

    >>> round(plast.nn.LogSoftmax(dim=0)(plast.tensor([0.0, 0.0]))[0].item(), 4)
    -0.6931
    """

    def forward(self, input):
        return F.log_softmax(input, self.dim)

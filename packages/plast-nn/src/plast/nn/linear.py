"""Linear, Identity and Flatten."""

import math

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _factory_dtype(device, dtype):
    if device is not None and plast.device(device).type != "cpu":
        raise NotImplementedError(
            f"layers are built on the CPU: a CUDA device as a layer argument (device={str(device)!r}) is not "
            f"supported yet; make the layer, then move it with .to({str(device)!r})"
        )
    return plast.get_default_dtype() if dtype is None else plast.as_dtype(dtype)


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored, as in torch).

    >>> plast.nn.Identity()(plast.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with torch's layout (weight is [out_features, in_features]) and init:
    weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)).

    >>> fc = plast.nn.Linear(2, 8)
    >>> tuple(fc.weight.shape), fc(plast.ones(4, 2)).shape
    ((8, 2), plast.Size([4, 8]))
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(plast.empty(out_features, in_features, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # NOTE: kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), torch's default.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ShapeError(
                f"{self!r}: expected an input of shape (*, {self.in_features}), got {tuple(input.shape)}"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


class NonDynamicallyQuantizableLinear(Linear):
    """Linear under the name torch gives MultiheadAttention's ``out_proj`` (torch keeps its quantization tools
    off that layer by its class; plast has none). The name matters to whole-model files and to scripts that list
    it in ``torch.serialization.safe_globals``."""


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (default: all but the batch dim).

    >>> plast.nn.Flatten()(plast.ones(2, 3, 4)).shape
    plast.Size([2, 12])
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        fl = getattr(plast, "flatten", None)
        if fl is not None:
            return fl(input, self.start_dim, self.end_dim)
        shape = tuple(input.shape)
        nd = len(shape)
        if nd == 0:
            return input.reshape(1)
        s, e = self.start_dim, self.end_dim
        if not -nd <= s < nd or not -nd <= e < nd:
            raise IndexError(f"Flatten: dims ({s}, {e}) out of range for an input with {nd} dims")
        s, e = s % nd, e % nd
        if s > e:
            raise ValueError(
                f"Flatten: start_dim ({self.start_dim}) cannot come after end_dim ({self.end_dim})"
            )
        n = 1
        for d in shape[s : e + 1]:
            n *= d
        return input.reshape(shape[:s] + (n,) + shape[e + 1 :])

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]
    (torch.nn.functional.bilinear).

    >>> w = plast.ones(1, 2, 2)
    >>> plast.nn.functional.bilinear(plast.tensor([[1.0, 2.0]]), plast.tensor([[3.0, 4.0]]), w).tolist()
    [[21.0]]
    """
    if weight.ndim != 3:
        raise ShapeError(f"bilinear: weight must be (out, in1, in2), got {tuple(weight.shape)}")
    o, i, j = weight.shape
    if input1.shape[-1] != i or input2.shape[-1] != j or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError(
            f"bilinear: expected input1 (*, {i}) and input2 (*, {j}) with the same leading dims, got "
            f"{tuple(input1.shape)} and {tuple(input2.shape)}"
        )
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, i)
    x2 = input2.reshape(-1, j)
    # (B, i) @ (i, o * j) -> (B, o, j), then the contraction with input2 over j
    t = plast.matmul(x1, weight.permute(1, 0, 2).reshape(i, o * j)).reshape(-1, o, j)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, o)


class Bilinear(Module):
    """y = x1^T A x2 + b (torch.nn.Bilinear): weight (out_features, in1_features, in2_features) and bias
    (out_features), both ~ U(-1/sqrt(in1_features), 1/sqrt(in1_features)).

    >>> plast.nn.Bilinear(3, 4, 5)(plast.ones(2, 3), plast.ones(2, 4)).shape
    plast.Size([2, 5])
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(plast.empty(out_features, in1_features, in2_features, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )

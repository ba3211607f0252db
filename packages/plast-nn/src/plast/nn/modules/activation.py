"""torch.nn.modules.activation's names in plast (re-exports only; the classes live in plast.nn)."""

from ..activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from ..attention import MultiheadAttention

__all__ = [
    "ELU",
    "GELU",
    "LeakyReLU",
    "LogSoftmax",
    "ReLU",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "Softplus",
    "Tanh",
    "MultiheadAttention",
]

"""plast.nn.modules: the modules laid out as torch.nn.modules is (``plast.nn.modules.linear.Linear``,
``.conv``, ``.rnn``, ``.transformer``, ``.activation``, ``.loss``, ``.normalization``, ``.container``,
``.module`` ...), for code that imports from there. Every name is the plast.nn class itself.

>>> from plast.nn.modules.linear import Linear
>>> Linear is plast.nn.Linear
True
"""

import plast  # noqa: F401  (the docstring's example uses it)

from .activation import (
    ELU,
    GELU,
    LeakyReLU,
    LogSoftmax,
    MultiheadAttention,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout
from .flatten import Flatten
from .instancenorm import InstanceNorm1d, InstanceNorm2d
from .linear import Bilinear, Identity, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    CTCLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    TripletMarginLoss,
)
from .module import Module, RemovableHandle
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import AvgPool2d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "Module",
    "RemovableHandle",
    "Identity",
    "Linear",
    "Bilinear",
    "Flatten",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
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
    "L1Loss",
    "MSELoss",
    "SmoothL1Loss",
    "HuberLoss",
    "CrossEntropyLoss",
    "NLLLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "KLDivLoss",
    "MarginRankingLoss",
    "TripletMarginLoss",
    "CTCLoss",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Dropout",
    "MaxPool2d",
    "AvgPool2d",
    "Embedding",
    "PixelShuffle",
    "PixelUnshuffle",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "CosineSimilarity",
    "PairwiseDistance",
]

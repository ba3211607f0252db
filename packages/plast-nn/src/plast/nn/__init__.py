"""plast.nn: torch-style modules, layers, losses and initializers (distribution plast-nn).

>>> import plast.nn as nn
>>> model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
>>> model(plast.ones(4, 2)).shape
plast.Size([4, 1])
"""

from . import (
    functional,
    init,
    modules,  # noqa: E402  (re-exports of the classes above, laid out as torch.nn.modules)
    parallel,
    utils,
)
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .attention import MultiheadAttention
from .bert import BertConfig, BertModel, BertModelOutput
from .containers import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout
from .gpt import GPT, GPTConfig
from .instancenorm import InstanceNorm1d, InstanceNorm2d
from .linear import Bilinear, Flatten, Identity, Linear
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
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm
from .parameter import Buffer, Parameter
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .pooling import AvgPool2d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sentence_encoder import Pooling, SentenceEncoder
from .sparse import Embedding
from .torch_transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .transformer import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerBlock,
    TransformerBlockStack,
    TransformerLM,
    causal_mask,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "Module",
    "RemovableHandle",
    "Parameter",
    "Buffer",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Linear",
    "Identity",
    "Flatten",
    "Embedding",
    "LayerNorm",
    "RMSNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Bilinear",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "PixelShuffle",
    "PixelUnshuffle",
    "CosineSimilarity",
    "PairwiseDistance",
    "MaxPool2d",
    "AvgPool2d",
    "MultiheadAttention",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "TransformerBlock",
    "TransformerBlockStack",
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerLM",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "causal_mask",
    "GPT",
    "GPTConfig",
    "BertConfig",
    "BertModel",
    "BertModelOutput",
    "Pooling",
    "SentenceEncoder",
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "LeakyReLU",
    "ELU",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "CrossEntropyLoss",
    "NLLLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "KLDivLoss",
    "CTCLoss",
    "HuberLoss",
    "MarginRankingLoss",
    "TripletMarginLoss",
    "functional",
    "init",
    "utils",
    "modules",
]

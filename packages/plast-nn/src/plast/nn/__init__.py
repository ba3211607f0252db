"""plast.nn: torch-style modules, layers, losses and initializers (distribution plast-nn).

>>> import plast.nn as nn
>>> model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
>>> model(plast.ones(4, 2)).shape
plast.Size([4, 1])
"""

from . import functional, init, utils
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .attention import MultiheadAttention
from .bert import BertConfig, BertModel, BertModelOutput
from .containers import ModuleDict, ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .gpt import GPT, GPTConfig
from .linear import Flatten, Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .module import Module, RemovableHandle
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from .parameter import Buffer, Parameter
from .pooling import AvgPool2d, MaxPool2d
from .sentence_encoder import Pooling, SentenceEncoder
from .sparse import Embedding
from .transformer import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerBlock,
    TransformerEncoder,
    TransformerLM,
    causal_mask,
)

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
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "MultiheadAttention",
    "TransformerBlock",
    "TransformerEncoder",
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
    "functional",
    "init",
    "utils",
]

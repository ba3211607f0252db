"""plast.optim: optimizers and learning-rate schedulers (distribution plast-nn), torch.optim's interface over
plast-core's fused update ops.

>>> import plast.nn as nn
>>> model = nn.Linear(2, 1)
>>> opt = plast.optim.Adam(model.parameters(), lr=1e-3)
>>> type(opt).__name__
'Adam'
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .diloco import DiLoCo
from .lbfgs import LBFGS

# the seed's names: plast.optim.StepLR and the others are lr_scheduler's classes themselves
from .lr_scheduler import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LinearWarmupCosineDecay,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "DiLoCo",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adadelta",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "lr_scheduler",
    *lr_scheduler.__all__,
]

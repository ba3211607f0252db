"""plast.optim: optimizers and learning-rate schedulers (distribution plast-nn), torch.optim's interface over
plast-core's fused update ops.

>>> import plast.nn as nn
>>> model = nn.Linear(2, 1)
>>> opt = plast.optim.Adam(model.parameters(), lr=1e-3)
>>> type(opt).__name__
'Adam'
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]

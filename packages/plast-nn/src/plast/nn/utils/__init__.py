"""plast.nn.utils: gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).

>>> w = plast.nn.Parameter(plast.ones(2))
>>> w.grad = plast.tensor([3.0, 4.0])
>>> round(plast.nn.utils.clip_grad_norm_([w], 1.0).item(), 4), [round(v, 4) for v in w.grad.tolist()]
(5.0, [0.6, 0.8])
"""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "get_total_norm"]

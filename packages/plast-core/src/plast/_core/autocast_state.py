"""autocast's state: whether autocast regions are open for CPU or CUDA tensors, their 16-bit types, and the casts
of parameters cached for the outermost region. ``plast.amp.autocast`` sets it; the op layer reads it
(ops/autocast.py). The lowest layer holds it, as it holds grad mode: op functions of every family consult it.
"""

import sys

from . import dtypes

# module attributes: compiled readers look them up in __dict__ (_core/_state.pxd)
active = False  # some device type has autocast on (one test on every autocast-listed op call)
cpu = False
cuda = False
cpu_dtype = dtypes.bfloat16
cuda_dtype = dtypes.float16
cache_enabled = True
depth = 0  # open regions that enabled autocast; the cache is emptied when the outermost one closes
cache = {}  # id(leaf) -> (leaf, its cast): a parameter is cast once per region, as torch caches weight casts

_this = sys.modules[__name__]


def on_for(device_type):
    """The 16-bit type autocast computes in for tensors on `device_type` now, or None when it is off there."""
    if device_type == "cpu":
        return cpu_dtype if cpu else None
    return cuda_dtype if cuda else None


def _refresh():
    _this.active = bool(cpu or cuda)

"""CPU kernels for fused groups (graph/fusion.py). Signature: ``kernel(root_node, inputs, outputs, args)``.

addmm_act runs on the GEMM's fused epilogue (csrc/gemm.c).
"""

import numpy as np

from . import _matmul
from .kernels import gemm_into, np_view, row_bias


def _addmm_act_numpy(node, inputs, outputs, args):
    """addmm_act for the layouts and dtypes plast's GEMM does not take."""
    bias, a, b = inputs
    act = args[0] or "none"
    out = np_view(outputs[0])
    bv = row_bias(np_view(bias), out.shape[-1])
    if bv is not None:
        gemm_into(out, np_view(a), np_view(b), bias=bv, act=act)
    else:
        gemm_into(out, np_view(a), np_view(b))
        out += np_view(bias)
        if act == "relu":
            np.maximum(out, 0, out=out)


# out = act(a @ b + bias): the GEMM's epilogue adds the bias and applies the activation while the tile is in
# registers; no intermediate is written (compiled; numpy fallback)
addmm_act = _matmul.AddmmActKernel(_addmm_act_numpy)


class ArgsNode:
    """Stands in for a node when a fused group calls an op's kernel with other arguments."""

    __slots__ = ("args", "op")

    def __init__(self, args, op=None):
        self.args = args
        self.op = op

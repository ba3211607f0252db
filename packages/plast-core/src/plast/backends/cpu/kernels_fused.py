"""CPU kernels for fused groups (engine/fusion.py). Signature: ``kernel(root_node, inputs, outputs, args)``.

NOTE: numpy baselines; the GEMM with fused epilogues (csrc/gemm.c) takes over addmm_act once it is wired in.
"""

import numpy as np

from .kernels import np_view


def addmm_act(node, inputs, outputs, args):
    """out = act(a @ b + bias): one output buffer, no intermediate."""
    bias, a, b = inputs
    act = args[0]
    out = np_view(outputs[0])
    np.matmul(np_view(a), np_view(b), out=out)
    out += np_view(bias)
    if act == "relu":
        np.maximum(out, 0, out=out)


class ArgsNode:
    """Stands in for a node when a fused group calls an op's kernel with other arguments."""

    __slots__ = ("args", "op")

    def __init__(self, args, op=None):
        self.args = args
        self.op = op

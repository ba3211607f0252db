"""The fusion rules (DESIGN §2.4), as data: each is a pattern over op names and a replacement kernel.

    addmm_relu        relu(addmm(bias, a, b))              -> addmm_act(bias, a, b, "relu")
    matmul_bias_relu  relu(add(matmul(a, b), bias))        -> addmm_act(bias, a, b, "relu")
    matmul_bias       add(matmul(a, b), bias)              -> addmm_act(bias, a, b, None)
    log_softmax_nll   nll_loss(log_softmax(x, 1), target)  -> cross_entropy(x, target)

Softmax backward and layer_norm backward are single kernels by construction (their backward rules record one
`softmax_backward` / `layer_norm_backward` node), so they need no rule.
"""

from ..graph.fusion import Pat, Rule, register_rules
from ..kernels.cpu import kernels_fused as F
from . import nn as N


def _mm2d(node):
    a, b = node.inputs
    return a.ndim == 2 and b.ndim == 2


def _bias_fits(add_node, mm_pos):
    mm_out = add_node.inputs[mm_pos]
    return tuple(add_node.specs[0][0]) == tuple(mm_out.shape)


def _build_addmm(act, bias_name="bias"):
    def build(caps, root):
        return F.addmm_act, [caps[bias_name], caps["a"], caps["b"]], (act,)

    return build


def _addmm_plain(node):
    return node.args == (1, 1)


addmm_relu = Rule(
    "addmm_relu", Pat("relu", Pat("addmm", "bias", "a", "b", when=_addmm_plain)), _build_addmm("relu")
)
matmul_bias_relu = Rule(
    "matmul_bias_relu",
    Pat("relu", Pat("add", Pat("matmul", "a", "b", when=_mm2d), "bias", when=lambda n: _bias_fits(n, 0))),
    _build_addmm("relu"),
)
matmul_bias = Rule(
    "matmul_bias",
    Pat("add", Pat("matmul", "a", "b", when=_mm2d), "bias", when=lambda n: _bias_fits(n, 0)),
    _build_addmm(None),
)


def _build_xent(caps, root):
    ignore_index, reduction = root.args
    ins = [caps["x"], caps["t"]] + list(root.inputs[2:])

    def kernel(node, inputs, outputs, args):
        N.XENT.kernels["cpu"](F.ArgsNode(args, N.XENT), inputs, outputs)

    return kernel, ins, ("index", ignore_index, reduction, 0.0)


def _class_dim_log_softmax(node):
    x = node.inputs[0]
    return node.args == ((1,) if x.ndim >= 2 else (0,))


log_softmax_nll = Rule(
    "log_softmax_nll", Pat("nll_loss", Pat("log_softmax", "x", when=_class_dim_log_softmax), "t"), _build_xent
)
log_softmax_nll_w = Rule(
    "log_softmax_nll",
    Pat("nll_loss", Pat("log_softmax", "x", when=_class_dim_log_softmax), "t", "w"),
    _build_xent,
)

# Order matters: bigger patterns first.
register_rules(addmm_relu, matmul_bias_relu, matmul_bias, log_softmax_nll, log_softmax_nll_w)

__all__ = []

"""The fusion rules (DESIGN §2.4), as data: each is a pattern over op names and a replacement kernel.

    addmm_relu        relu(addmm(bias, a, b))              -> addmm_act(bias, a, b, "relu")
    matmul_bias_relu  relu(add(matmul(a, b), bias))        -> addmm_act(bias, a, b, "relu")
    matmul_bias       add(matmul(a, b), bias)              -> addmm_act(bias, a, b, None)
    addmm_gelu(_tanh), matmul_bias_gelu(_tanh): the same with gelu (erf or tanh form) as the epilogue; in
                      training gelu's backward reads its input, so these fire where no gradient is kept (inference)
    log_softmax_nll   nll_loss(log_softmax(x, 1), target)  -> cross_entropy(x, target)
    scatter_sum2/3    add(strided_scatter(g1), strided_scatter(g2)[, ...]) -> zeros, each g added into its window

Softmax backward and layer_norm backward are single kernels by construction (their backward rules record one
`softmax_backward` / `layer_norm_backward` node), so they need no rule.
"""

from ..graph.fusion import Pat, Rule, register_rules
from ..kernels.cpu import kernels_fused as F
from ..kernels.cpu import kernels_indexing as K_INDEX
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


def _gelu_rules(op, act):
    return (
        Rule(f"addmm_{act}", Pat(op, Pat("addmm", "bias", "a", "b", when=_addmm_plain)), _build_addmm(act)),
        Rule(
            f"matmul_bias_{act}",
            Pat(op, Pat("add", Pat("matmul", "a", "b", when=_mm2d), "bias", when=lambda n: _bias_fits(n, 0))),
            _build_addmm(act),
        ),
    )


# the GEMM epilogue's act names: "gelu" is torch's exact (erf) GELU
addmm_gelu, matmul_bias_gelu = _gelu_rules("gelu_erf", "gelu")
addmm_gelu_tanh, matmul_bias_gelu_tanh = _gelu_rules("gelu_tanh", "gelu_tanh")
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

# ---- the backward of split / chunk: autograd sums one full-size strided_scatter per piece (zeros with the
# piece's gradient in its window); fused, the sum is written once (torch's split backward is a cat)


def _scatter_nodes(root, depth):
    """The strided_scatter nodes under `root`, add(s, s) (depth 2) or add(add(s, s), s) (depth 3); None where the
    graph has another shape (a rule's `when` runs before its children are matched)."""
    if depth == 2:
        ns = [t._node for t in root.inputs]
    else:
        inner = root.inputs[0]._node
        if inner is None or inner.op.name != "add":
            return None
        ns = [inner.inputs[0]._node, inner.inputs[1]._node, root.inputs[1]._node]
    if any(n is None or n.op.name != "strided_scatter" for n in ns):
        return None
    return ns


def _scatters_fit(depth):
    def when(root):
        ss = _scatter_nodes(root, depth)
        if ss is None:
            return False
        out_shape, dtype = tuple(root.specs[0][0]), root.specs[0][1]
        return all(
            tuple(s.args[0]) == out_shape
            and s.args[3] == 0
            and s.specs[0][1] is dtype
            and s.inputs[0].dtype is dtype
            for s in ss
        )

    return when


def _tiles(out_shape, ss):
    """True when the scatters' windows are narrow views along one dim that tile it exactly (a split's pieces):
    then every output element is written once and no zeros are needed."""
    nd = len(out_shape)
    identity = tuple(((d, 1),) for d in range(nd))
    dim, spans = None, []
    for s in ss:
        shape, (dims_map, base) = tuple(s.inputs[0].shape), s.args[1:3]
        if tuple(dims_map) != identity or len(shape) != nd:
            return False
        diff = [d for d in range(nd) if shape[d] != out_shape[d] or base[d] != 0]
        if len(diff) != 1 or (dim is not None and diff[0] != dim):
            return False
        dim = diff[0]
        spans.append((base[dim], base[dim] + shape[dim]))
    spans.sort()
    return (
        spans[0][0] == 0
        and spans[-1][1] == out_shape[dim]
        and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    )


def _build_scatter_sum(depth):
    def build(caps, root):
        ss = _scatter_nodes(root, depth)
        windows = tuple((s.args[1], s.args[2]) for s in ss)
        return K_INDEX.scatter_sum, [s.inputs[0] for s in ss], (_tiles(tuple(root.specs[0][0]), ss), windows)

    return build


scatter_sum2 = Rule(
    "scatter_sum2",
    Pat("add", Pat("strided_scatter", "g1"), Pat("strided_scatter", "g2"), when=_scatters_fit(2)),
    _build_scatter_sum(2),
)
scatter_sum3 = Rule(
    "scatter_sum3",
    Pat(
        "add",
        Pat("add", Pat("strided_scatter", "g1"), Pat("strided_scatter", "g2")),
        Pat("strided_scatter", "g3"),
        when=_scatters_fit(3),
    ),
    _build_scatter_sum(3),
)

# Order matters: bigger patterns first.
register_rules(
    addmm_relu,
    matmul_bias_relu,
    addmm_gelu,
    matmul_bias_gelu,
    addmm_gelu_tanh,
    matmul_bias_gelu_tanh,
    matmul_bias,
    log_softmax_nll,
    log_softmax_nll_w,
    scatter_sum3,
    scatter_sum2,
)

__all__ = []

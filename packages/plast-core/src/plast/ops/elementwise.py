"""Elementwise ops: rows of the op table and their op-layer functions."""

from ..kernels.cpu import kernels as cpu
from . import _elementwise
from .registry import register

# ---- backward rules: one gradient per input; the engine sums broadcast gradients back to input shapes ----


def _add_bw(node, g):
    return g, g


# NOTE: a gradient for an input that does not require grad would be recorded and never used: rules skip them.


def _sub_bw(node, g):
    return g, neg(g) if node.inputs[1].requires_grad else None


def _mul_bw(node, g):
    a, b = node.inputs
    return mul(g, b) if a.requires_grad else None, mul(g, a) if b.requires_grad else None


def _div_bw(node, g):
    a, b = node.inputs
    ga = div(g, b)
    return ga if a.requires_grad else None, neg(mul(ga, div(a, b))) if b.requires_grad else None


OPS_BIN = {
    "add": register("add", cpu=cpu.binary, backward=_add_bw, chain="add", saves_inputs=False),
    "sub": register("sub", cpu=cpu.binary, backward=_sub_bw, chain="sub", saves_inputs=False),
    "mul": register("mul", cpu=cpu.binary, backward=_mul_bw, chain="mul"),
    "div": register("div", cpu=cpu.binary, backward=_div_bw, chain="div"),
}


_elementwise.bind(OPS_BIN)
# The op-layer functions are compiled (ops/_elementwise.pyx): they run on every step, many times.
add, sub, mul, div, neg = (
    _elementwise.add,
    _elementwise.sub,
    _elementwise.mul,
    _elementwise.div,
    _elementwise.neg,
)
_rsub, _rdiv = _elementwise.rsub, _elementwise.rdiv


__all__ = ["add", "sub", "mul", "div", "neg"]

"""Fused recurrent cells: the pointwise gate math of one LSTM or GRU step in one kernel, forward and backward.

The matrix products that make the gate pre-activations stay where they were (``x @ W_ih^T + b_ih`` over the
whole sequence, ``h @ W_hh^T + b_hh`` per step, both through addmm); these rows replace what follows them: as
sigmoid/tanh/mul/add ops, an LSTM step was about ten kernels forward and twice that in its backward, each a pass
over a small (N, H) tensor with the op's fixed cost (bench/bench_rnn.py). The signatures follow torch's private
``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` (without their bias arguments: the biases are in the
gates already). Gate order is torch's: i, f, g, o for the LSTM, r, z, n for the GRU.

The backward kernels recompute the gate activations from the saved inputs rather than keeping a workspace of
them. With ``create_graph`` the backward rules are written in plast ops instead, so double backward works.
"""

from __future__ import annotations

from .._core.errors import DTypeError, ShapeError
from .._core.grad_mode import is_grad_enabled
from .._core.hints import TensorBase
from ..graph._graph import record
from ..kernels.cpu import kernels_rnn as K
from . import _linalg
from .creation import zeros_like
from .elementwise import add, mul, sub
from .registry import register
from .shape import cat, chunk
from .unary import sigmoid, tanh

_tensor_check, _same_device = _linalg.tensor_check, _linalg.same_device  # compiled (ops/_linalg.pyx)


def _ok(gx, gh, state, gate_count):
    """The common case of _check in a few attribute reads (a layer calls the cell once per time step)."""
    if not (isinstance(gx, TensorBase) and isinstance(gh, TensorBase) and isinstance(state, TensorBase)):
        return False
    dt, dev, shape = state.dtype, state.device, state.shape
    if gx.dtype is not dt or gh.dtype is not dt or not dt.is_floating_point or len(shape) != 2:
        return False
    want = (shape[0], gate_count * shape[1])
    return gx.shape == want and gh.shape == want and gx.device == dev and gh.device == dev


def _check(op, gates, names, gate_count, state, state_name):
    """The shared checks: plast tensors on one device, one floating dtype, 2-d gates (N, G*H), state (N, H)."""
    if _ok(*gates, state, gate_count):
        return
    for t, name in zip(gates + (state,), names + (state_name,), strict=True):
        _tensor_check(t, op, name)
    _same_device(op, *gates, state)
    dt = state.dtype
    if not dt.is_floating_point or any(t.dtype is not dt for t in gates):
        raise DTypeError(
            f"{op}: expected {', '.join(names)} and {state_name} of one floating dtype, got "
            f"{', '.join(str(t.dtype) for t in gates + (state,))}"
        )
    if state.ndim != 2:
        raise ShapeError(f"{op}: {state_name} must be 2-d (N, hidden), got shape {tuple(state.shape)}")
    n, h = state.shape
    want = (n, gate_count * h)
    for t, name in zip(gates, names, strict=True):
        if tuple(t.shape) != want:
            raise ShapeError(
                f"{op}: {name} must have shape (N, {gate_count} * hidden) = {want} for {state_name} of shape "
                f"{tuple(state.shape)}, got {tuple(t.shape)}"
            )


# ---- LSTM ----


def _lstm_grads_ops(gx, gh, c0, dh, dc):
    """The LSTM cell's backward in plast ops (differentiable): (d gates, d c0)."""
    i, f, g, o = (sigmoid(a) if k != 2 else tanh(a) for k, a in enumerate(chunk(add(gx, gh), 4, 1)))
    tc = tanh(add(mul(f, c0), mul(i, g)))
    dct = dc if dc is not None else zeros_like(c0)
    if dh is not None:  # dc + dh * o * tanh'(c)
        dct = add(dct, mul(mul(dh, o), sub(1.0, mul(tc, tc))))
    d_o = mul(mul(dh, tc), mul(o, sub(1.0, o))) if dh is not None else zeros_like(c0)
    d_i = mul(mul(dct, g), mul(i, sub(1.0, i)))
    d_f = mul(mul(dct, c0), mul(f, sub(1.0, f)))
    d_g = mul(mul(dct, i), sub(1.0, mul(g, g)))
    return cat([d_i, d_f, d_g, d_o], 1), mul(dct, f)


def _lstm_bw(node, dh, dc=None):
    gx, gh, c0 = node.inputs
    if dh is None and dc is None:
        return None, None, None
    if is_grad_enabled() and any(t is not None and t.requires_grad for t in (gx, gh, c0, dh, dc)):
        dg, dc0 = _lstm_grads_ops(gx, gh, c0, dh, dc)
    else:
        ins = (gx, gh, c0) + tuple(t for t in (dh, dc) if t is not None)
        specs = [(gx.shape, gx.dtype), (c0.shape, c0.dtype)]
        dg, dc0 = record(LSTM_CELL_BW, ins, (dh is not None, dc is not None), specs, gx.device)
    # NOTE: gates = gx + gh, so both get d(gates): the same tensor, as add's backward would give them
    return dg, dg, dc0


def _no_double_backward(node, *grads):
    # Only reachable if a backward row was recorded with gradient mode on, which the rules above never do
    raise NotImplementedError(
        f"double backward through the {node.op.name} kernel is not implemented; backward with "
        "create_graph=True records the cell's gradients in plast ops instead"
    )


LSTM_CELL = register("fused_lstm_cell", cpu=K.lstm_cell, backward=_lstm_bw, n_outputs=2)
# args: (has dh, has dc); inputs gx, gh, c0, then the gradients present
LSTM_CELL_BW = register(
    "fused_lstm_cell_backward", cpu=K.lstm_cell_backward, backward=_no_double_backward, n_outputs=2
)


def fused_lstm_cell(
    input_gates: TensorBase, hidden_gates: TensorBase, cx: TensorBase
) -> tuple[TensorBase, TensorBase]:
    """One LSTM step's pointwise math in one kernel: ``(hy, cy)`` from the gate pre-activations.

    ``input_gates`` (N, 4H) = x @ W_ih^T + b_ih and ``hidden_gates`` (N, 4H) = h @ W_hh^T + b_hh, gates in torch's
    order i, f, g, o; ``cx`` (N, H). ``cy = sigmoid(f) * cx + sigmoid(i) * tanh(g)``,
    ``hy = sigmoid(o) * tanh(cy)`` with ``i, f, g, o`` the chunks of ``input_gates + hidden_gates``.

    >>> hy, cy = plast.fused_lstm_cell(plast.zeros(2, 8), plast.zeros(2, 8), plast.ones(2, 2))
    >>> cy.tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    _check("fused_lstm_cell", (input_gates, hidden_gates), ("input_gates", "hidden_gates"), 4, cx, "cx")
    specs = [(tuple(cx.shape), cx.dtype)] * 2
    hy, cy = record(LSTM_CELL, (input_gates, hidden_gates, cx), (), specs, cx.device)
    return hy, cy


# ---- GRU ----


def _gru_grads_ops(gx, gh, h0, dh):
    """The GRU cell's backward in plast ops (differentiable): (d gx, d gh, d h0)."""
    xr, xz, xn = chunk(gx, 3, 1)
    hr, hz, hn = chunk(gh, 3, 1)
    r = sigmoid(add(xr, hr))
    z = sigmoid(add(xz, hz))
    n = tanh(add(xn, mul(r, hn)))
    dn = mul(mul(dh, sub(1.0, z)), sub(1.0, mul(n, n)))
    dz = mul(mul(dh, sub(h0, n)), mul(z, sub(1.0, z)))
    dr = mul(mul(dn, hn), mul(r, sub(1.0, r)))
    return cat([dr, dz, dn], 1), cat([dr, dz, mul(dn, r)], 1), mul(dh, z)


def _gru_bw(node, dh):
    gx, gh, h0 = node.inputs
    if dh is None:
        return None, None, None
    if is_grad_enabled() and any(t.requires_grad for t in (gx, gh, h0, dh)):
        return _gru_grads_ops(gx, gh, h0, dh)
    specs = [(gx.shape, gx.dtype), (gh.shape, gh.dtype), (h0.shape, h0.dtype)]
    return tuple(record(GRU_CELL_BW, (gx, gh, h0, dh), (), specs, gx.device))


GRU_CELL = register("fused_gru_cell", cpu=K.gru_cell, backward=_gru_bw)
GRU_CELL_BW = register(
    "fused_gru_cell_backward", cpu=K.gru_cell_backward, backward=_no_double_backward, n_outputs=3
)


def fused_gru_cell(input_gates: TensorBase, hidden_gates: TensorBase, hx: TensorBase) -> TensorBase:
    """One GRU step's pointwise math in one kernel: ``hy`` from the gate pre-activations.

    ``input_gates`` (N, 3H) = x @ W_ih^T + b_ih and ``hidden_gates`` (N, 3H) = h @ W_hh^T + b_hh, gates in torch's
    order r, z, n; ``hx`` (N, H). ``r = sigmoid(x_r + h_r)``, ``z = sigmoid(x_z + h_z)``,
    ``n = tanh(x_n + r * h_n)``, ``hy = (1 - z) * n + z * hx``.

    >>> plast.fused_gru_cell(plast.zeros(1, 6), plast.zeros(1, 6), plast.ones(1, 2)).tolist()
    [[0.5, 0.5]]
    """
    _check("fused_gru_cell", (input_gates, hidden_gates), ("input_gates", "hidden_gates"), 3, hx, "hx")
    return record(GRU_CELL, (input_gates, hidden_gates, hx), (), [(tuple(hx.shape), hx.dtype)], hx.device)[0]


__all__ = ["fused_gru_cell", "fused_lstm_cell"]

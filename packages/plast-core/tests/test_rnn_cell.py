"""The fused LSTM / GRU cell rows (ops/rnn.py, csrc/rnn_cell.c) against torch: forward values and gradients on
random inputs, float32 and float64, on every SIMD path, at widths that take the vector loops and their tails;
strided and non-contiguous operands, absent gradients, two threads, double backward, central differences,
@plast.jit, and the argument checks.

torch's oracle is the cell written in its ops (torch's own fused cells are CUDA kernels), differentiated by its
autograd.
"""

import numpy as np
import pytest
import torch

import plast
from plast.errors import DTypeError, ShapeError
from plast.kernels.cpu import _runtime

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}
SIZES = [(1, 1), (3, 7), (2, 16), (5, 37)]  # (N, H): scalar code, full vectors, vectors and a tail


def torch_lstm(gx, gh, c0):
    i, f, g, o = (gx + gh).chunk(4, 1)
    c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def torch_gru(gx, gh, h0):
    xr, xz, xn = gx.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r = torch.sigmoid(xr + hr)
    z = torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return (1 - z) * n + z * h0


def _arrays(rng, dtype, n, h, gates):
    # pre-activations up to +-6: sigmoid and tanh well away from their flat ends, so gradients are not all 0
    return [rng.uniform(-6, 6, shape).astype(dtype) for shape in ((n, gates * h), (n, gates * h), (n, h))]


def _run_plast(kind, arrays, weights, prep=None):
    """Outputs and input gradients of the plast cell for upstream gradients `weights` (None: that output is
    not used)."""
    leaves = [plast.tensor(a, requires_grad=True) for a in arrays]
    ins = [prep(t, k) for k, t in enumerate(leaves)] if prep else leaves
    outs = plast.fused_lstm_cell(*ins) if kind == "lstm" else (plast.fused_gru_cell(*ins),)
    loss = sum((o * plast.tensor(w)).sum() for o, w in zip(outs, weights, strict=True) if w is not None)
    loss.backward()
    return [o.detach().numpy() for o in outs], [t.grad.numpy() for t in leaves]


def _run_torch(kind, arrays, weights, prep=None):
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    ins = [prep(t, k) for k, t in enumerate(leaves)] if prep else leaves
    outs = torch_lstm(*ins) if kind == "lstm" else (torch_gru(*ins),)
    loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, weights, strict=True) if w is not None)
    loss.backward()
    return [o.detach().numpy() for o in outs], [t.grad.numpy() for t in leaves]


def _compare(got, want, dtype):
    for g, w in zip(got[0] + got[1], want[0] + want[1], strict=True):
        np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_matches_torch_on_every_simd_path(simd_paths, rng, kind, dtype):
    gates = 4 if kind == "lstm" else 3
    for path in simd_paths:
        _runtime.set_simd(path)
        for n, h in SIZES:
            arrays = _arrays(rng, dtype, n, h, gates)
            weights = [rng.standard_normal((n, h)).astype(dtype) for _ in range(2 if kind == "lstm" else 1)]
            _compare(_run_plast(kind, arrays, weights), _run_torch(kind, arrays, weights), dtype)


@pytest.mark.parametrize("used", ["h", "c"])
def test_lstm_cell_with_one_output_unused(rng, used):
    # the backward kernel takes an absent gradient as zeros (the last step's c, or an h nobody reads)
    arrays = _arrays(rng, np.float64, 4, 9, 4)
    w = rng.standard_normal((4, 9))
    weights = [w, None] if used == "h" else [None, w]
    _compare(_run_plast("lstm", arrays, weights), _run_torch("lstm", arrays, weights), np.float64)


def _layout(lib, layout):
    """Operands viewed another way, in either library: column_slice gives rows with a stride wider than the gates
    (a narrow of a wider matrix; the kernel reads it in place), transposed gives columns with a stride (copied to
    rows first), broadcast_rows one row read N times (row stride 0: copied)."""

    def prep(t, k):
        if layout == "column_slice":
            return lib.cat([t, t[:, :2] * 0.0], 1)[:, : t.shape[1]]
        if layout == "transposed":
            return t.t().contiguous().t()
        return t[:1].expand(*t.shape)

    return prep


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layout", ["column_slice", "transposed", "broadcast_rows"])
def test_cell_with_strided_operands(rng, kind, layout):
    gates = 4 if kind == "lstm" else 3
    n, h = 3, 11
    arrays = _arrays(rng, np.float32, n, h, gates)
    weights = [rng.standard_normal((n, h)).astype(np.float32) for _ in range(2 if kind == "lstm" else 1)]
    got = _run_plast(kind, arrays, weights, _layout(plast, layout))
    want = _run_torch(kind, arrays, weights, _layout(torch, layout))
    _compare(got, want, np.float32)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_on_two_threads(simd_paths, rng, kind):
    # enough elements that the kernels split the rows over two threads
    gates = 4 if kind == "lstm" else 3
    n, h = 64, 300
    arrays = _arrays(rng, np.float32, n, h, gates)
    weights = [rng.standard_normal((n, h)).astype(np.float32) for _ in range(2 if kind == "lstm" else 1)]
    plast.set_num_threads(2)
    _compare(_run_plast(kind, arrays, weights), _run_torch(kind, arrays, weights), np.float32)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_gradients_match_central_differences(rng, kind):
    gates = 4 if kind == "lstm" else 3
    n, h = 2, 5
    arrays = _arrays(rng, np.float64, n, h, gates)
    arrays = [a / 3 for a in arrays]
    weights = [rng.standard_normal((n, h)) for _ in range(2 if kind == "lstm" else 1)]
    _, grads = _run_plast(kind, arrays, weights)

    def loss(arrs):
        with plast.no_grad():
            ins = [plast.tensor(a) for a in arrs]
            outs = plast.fused_lstm_cell(*ins) if kind == "lstm" else (plast.fused_gru_cell(*ins),)
            return sum(float((o.numpy() * w).sum()) for o, w in zip(outs, weights, strict=True))

    eps = 1e-6
    for k, a in enumerate(arrays):
        for idx in [(0, 0), (n - 1, a.shape[1] - 1), (1, a.shape[1] // 2)]:
            up = [x.copy() for x in arrays]
            dn = [x.copy() for x in arrays]
            up[k][idx] += eps
            dn[k][idx] -= eps
            fd = (loss(up) - loss(dn)) / (2 * eps)
            assert abs(fd - grads[k][idx]) <= 1e-7 + 1e-6 * abs(fd), (k, idx, fd, grads[k][idx])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_double_backward_matches_torch(rng, kind):
    # create_graph=True: the backward rules write the gradients in plast ops, so they differentiate again
    gates = 4 if kind == "lstm" else 3
    arrays = _arrays(rng, np.float64, 3, 4, gates)

    def second(lib, cell):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        outs = cell(*leaves)
        outs = outs if isinstance(outs, tuple) else (outs,)
        y = sum((o * o).sum() for o in outs)
        grads = lib.autograd.grad(y, leaves, create_graph=True)
        z = sum((g * g).sum() for g in grads)
        return [t.detach().numpy() for t in lib.autograd.grad(z, leaves)]

    got = second(plast, plast.fused_lstm_cell if kind == "lstm" else plast.fused_gru_cell)
    want = second(torch, torch_lstm if kind == "lstm" else torch_gru)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOL[np.float64])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cell_under_jit_matches_eager(rng, kind):
    gates = 4 if kind == "lstm" else 3
    arrays = _arrays(rng, np.float32, 4, 10, gates)
    leaves = [plast.tensor(a, requires_grad=True) for a in arrays]
    cell = plast.fused_lstm_cell if kind == "lstm" else plast.fused_gru_cell

    def step(scale):  # the cell's operands are leaves the step closes over, as a model's parameters
        out = cell(*leaves)
        h = out[0] if isinstance(out, tuple) else out
        loss = (h * h * scale).sum()
        loss.backward()
        return loss

    scale = plast.tensor(np.float32(1.5))
    eager = step(scale).item()
    want = [t.grad.numpy().copy() for t in leaves]
    jitted = plast.jit(step)
    for _ in range(3):  # the trace, then replays
        for t in leaves:
            t.grad = None
        got = jitted(scale).item()
        np.testing.assert_allclose(got, eager, rtol=1e-6)
        for t, w in zip(leaves, want, strict=True):
            np.testing.assert_allclose(t.grad.numpy(), w, **TOL[np.float32])
    assert jitted.replays == 2


def test_cell_argument_checks():
    z = plast.zeros
    with pytest.raises(ShapeError, match="input_gates"):
        plast.fused_lstm_cell(z(2, 7), z(2, 8), z(2, 2))
    with pytest.raises(ShapeError, match="hidden_gates"):
        plast.fused_gru_cell(z(2, 6), z(3, 6), z(2, 2))
    with pytest.raises(ShapeError, match="2-d"):
        plast.fused_gru_cell(z(6), z(6), z(2))
    with pytest.raises(DTypeError):
        plast.fused_lstm_cell(z(2, 8), z(2, 8, dtype=plast.float64), z(2, 2))
    with pytest.raises(DTypeError):
        plast.fused_gru_cell(
            z(2, 6, dtype=plast.int32), z(2, 6, dtype=plast.int32), z(2, 2, dtype=plast.int32)
        )
    with pytest.raises(TypeError):
        plast.fused_lstm_cell(np.zeros((2, 8)), z(2, 8), z(2, 2))


def test_cell_kernel_rejects_bad_strides():
    # the C entry points check what the Python layer could still get wrong: rows overlapping their gates
    from plast.kernels.cpu import _rnn_cell

    a = np.zeros((4, 8), np.float32)
    out = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="bad sizes"):
        _rnn_cell.lstm_cell(4, 2, a.ctypes.data, 4, a.ctypes.data, 8, out.ctypes.data, 2, out.ctypes.data,
                            out.ctypes.data)  # fmt: skip
    with pytest.raises(ValueError, match="dtype code"):
        _rnn_cell.gru_cell(1, 1, a.ctypes.data, 3, a.ctypes.data, 3, out.ctypes.data, 1, out.ctypes.data, 99)

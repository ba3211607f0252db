"""In-place writes through views of tensors in a graph, against torch: the write reaches the base, every other
view of the base shows it, values recorded before the write keep the old value, and gradients flow through
both the written window and the rest of the base (graph/inplace.py's write-back, ops/view_writes.py's rules).

Each case is one function run on torch and on plast with the same inputs; it returns the tensors to compare
and a loss whose input gradients are compared too.
"""

import numpy as np
import pytest
import torch

import plast


def _x(lib, shape=(3, 4), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(a, requires_grad=True)


def slice_mul(lib, x):
    y = x * 2
    y[0].mul_(3)
    return [y], (y * y).sum()


def sibling_sees_write(lib, x):
    y = x * 2
    a, b = y[1], y[:, 2]
    a.add_(10)
    return [y, a, b], y.sum() + (b * b).sum()


def view_of_base_sees_base_write(lib, x):
    y = x + 1
    z = y.view(12)
    w = y.t()
    y.mul_(3)
    return [y, z, w], (z * z).sum() + w[0].sum()


def transpose_then_slice(lib, x):
    y = x * 2
    y.t()[1:, :].add_(10)
    return [y], (y * y).sum()


def copy_from_graph_values(lib, x):
    y = x * 2
    y[:, :2].copy_(x[:, 2:] ** 2)
    return [y], (y * y).sum()


def realized_base(lib, x):
    y = x * 2
    y.sum().item()  # y has memory before the write
    y[0].mul_(3)
    return [y], (y * y).sum()


def repeated_writes_through_one_view(lib, x):
    y = x * 1.5
    v = y[1:]
    v.mul_(2)
    v.add_(1)
    v[0].zero_()
    return [y, v], (y * x).sum()


def view_of_view(lib, x):
    y = x - 0.5
    v = y[1]
    w = v[1:3]
    w.fill_(7.0)
    return [y, v, w], (y * y).sum()


def diagonal_fill(lib, x):
    y = (x[:, :3] * 1.5).contiguous()
    y.diagonal().fill_(0.0)
    return [y], (y * x[:, :3]).sum()


def unsqueeze_select(lib, x):
    y = x * 3
    y[:, None][2].mul_(-1)
    return [y], (y * y).sum()


def flat_view_window(lib, x):
    y = x + 2
    y.view(-1)[3:7].add_(5)
    return [y], (y * y).sum()


def permute_3d(lib, x):
    y = (x * 2).reshape(3, 2, 2)
    y.permute(2, 0, 1)[1].mul_(4)
    return [y], (y * y).sum()


def reads_recorded_before_keep_old_value(lib, x):
    y = x * 2
    s = y.sum()
    r = y[0] * 1
    y[0].mul_(3)
    return [y, s, r], s + r.sum() + y.sum()


def written_view_used_after(lib, x):
    y = x * 2
    v = y[1:, 1:]
    v.sub_(x[1:, :3])
    return [y, v], (v * v).sum() + y.sum()


def through_expand_one_copy(lib, x):
    a = (x[0] * 2)[None]  # (1, 4)
    e = a.expand(3, 4)
    e[1].add_(1)  # one copy: reaches a's memory, so every copy shows it
    return [a, e], (a * a).sum() + e.sum()


def integer_view_write(lib, x):
    y = lib.arange(12).reshape(3, 4) * 2
    y[1, 1:3].add_(5)
    return [y], None


def rebound_twice_with_views(lib, x):
    y = x * 1
    z = y.view(4, 3)
    y.add_(1)
    z[0].mul_(2)
    y.mul_(2)
    return [y, z], z.sum()


CASES = [
    slice_mul,
    sibling_sees_write,
    view_of_base_sees_base_write,
    transpose_then_slice,
    copy_from_graph_values,
    realized_base,
    repeated_writes_through_one_view,
    view_of_view,
    diagonal_fill,
    unsqueeze_select,
    flat_view_window,
    permute_3d,
    reads_recorded_before_keep_old_value,
    written_view_used_after,
    through_expand_one_copy,
    integer_view_write,
    rebound_twice_with_views,
]


def _run(lib, case):
    x = _x(lib)
    outs, loss = case(lib, x)
    grad = None
    if loss is not None:
        loss.backward()
        grad = x.grad.detach().numpy()
    return [o.detach().numpy() for o in outs], grad


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_view_write_like_torch(case):
    (p_outs, p_grad), (t_outs, t_grad) = _run(plast, case), _run(torch, case)
    for p, t in zip(p_outs, t_outs):
        assert p.shape == t.shape
        np.testing.assert_allclose(p, t, rtol=1e-5, atol=1e-5)
    if t_grad is not None:
        np.testing.assert_allclose(p_grad, t_grad, rtol=1e-5, atol=1e-5)


JIT_CASES = [c for c in CASES if c not in (integer_view_write, realized_base)]  # realized_base reads a value


@pytest.mark.parametrize("case", JIT_CASES, ids=lambda c: c.__name__)
def test_view_write_under_jit_like_torch(case):
    x = _x(plast)

    def step():
        x.grad = None
        outs, loss = case(plast, x)
        loss.backward()
        return [o.detach() * 1 for o in outs] + [x.grad * 1]

    fn = plast.jit(step)
    t_outs, t_grad = _run(torch, case)
    for _ in range(3):  # the trace, then its replays
        res = fn()
        for p, t in zip(res[:-1], t_outs):
            np.testing.assert_allclose(p.numpy(), t, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(res[-1].numpy(), t_grad, rtol=1e-5, atol=1e-5)
    assert fn.traces == 1


def test_write_to_every_copy_of_an_expanded_view_raises_like_torch():
    x = _x(plast)
    e = (x[0] * 2)[None].expand(3, 4)
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1)
    tx = _x(torch)
    with pytest.raises(RuntimeError, match="single memory location"):
        (tx[0] * 2)[None].expand(3, 4).add_(1)


def test_view_of_leaf_still_raises():
    x = _x(plast)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        x[0].mul_(2)

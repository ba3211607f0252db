"""The tensor-level GEMM entry (kernels/cpu/_matmul.pyx): every layout it accepts gives numpy's product, the
layouts it refuses fall back (and still give numpy's product), and through plast.matmul/addmm the results and
gradients match torch for transposed, sliced, broadcast and batched operands."""

import numpy as np
import pytest
import torch

import plast
from plast.kernels.cpu import _matmul

RNG = np.random.default_rng(0)


def _t(a):
    return plast.tensor(np.ascontiguousarray(a))


def _empty(shape, dtype=plast.float32):
    return plast.empty(*shape, dtype=dtype)


LAYOUTS = [
    # (a maker, b maker): each returns a plast tensor view
    ("plain", lambda x: x, lambda y: y),
    ("a.T", lambda x: x.mT.contiguous().mT, lambda y: y),
    ("b.T", lambda x: x, lambda y: y.mT.contiguous().mT),
    ("both.T", lambda x: x.mT.contiguous().mT, lambda y: y.mT.contiguous().mT),
]


@pytest.mark.parametrize("name,fa,fb", LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (4, 2, 8), (7, 13, 5), (64, 64, 64), (3, 1, 9)])
@pytest.mark.parametrize("dtype", [plast.float32, plast.float64])
def test_2d_layouts_take_the_gemm(name, fa, fb, m, k, n, dtype):
    a_np = RNG.standard_normal((m, k))
    b_np = RNG.standard_normal((k, n))
    a, b = fa(_t(a_np).to(dtype)), fb(_t(b_np).to(dtype))
    out = _empty((m, n), dtype)
    a._realized(), b._realized()
    assert _matmul.matmul(out, a, b) is True
    tol = 1e-5 if dtype is plast.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), a_np @ b_np, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "ashape,bshape,direct",
    [
        ((2, 3, 4, 5), (5, 6), True),
        ((1, 4, 5), (3, 5, 6), True),
        ((2, 3, 4, 5), (2, 3, 5, 6), True),
        ((2, 3, 4, 5), (1, 1, 5, 6), True),
        # b repeats along the inner batch dim but not the outer one: no single batch stride, so the kernel
        # loops over the first batch dim with one batched GEMM per step
        ((3, 4, 5), (2, 1, 5, 6), True),
        ((2, 3, 4, 5), (2, 1, 5, 6), True),
    ],
)
def test_batched_and_broadcast(ashape, bshape, direct):
    a_np = RNG.standard_normal(ashape).astype(np.float32)
    b_np = RNG.standard_normal(bshape).astype(np.float32)
    a, b = _t(a_np), _t(b_np)
    want = a_np @ b_np
    out = _empty(want.shape)
    assert _matmul.matmul(out, a, b) is direct
    got = out.numpy() if direct else plast.matmul(a, b).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_two_batch_dims_with_their_own_strides_take_the_gemm():
    """Attention's (batch, head) views of a fused qkv projection: the batch dims do not collapse into one stride,
    so the kernel loops over the first and runs one batched GEMM over the rest."""
    qkv = RNG.standard_normal((2, 7, 3 * 12)).astype(np.float32)  # (B, T, 3C), C = 3 heads x 4
    q_np = qkv[:, :, :12].reshape(2, 7, 3, 4).transpose(0, 2, 1, 3)  # (B, nh, T, hs)
    k_np = qkv[:, :, 12:24].reshape(2, 7, 3, 4).transpose(0, 2, 3, 1)  # (B, nh, hs, T)
    t = _t(qkv)
    q = t[:, :, :12].view(2, 7, 3, 4).transpose(1, 2)
    k = t[:, :, 12:24].view(2, 7, 3, 4).permute(0, 2, 3, 1)
    out = _empty((2, 3, 7, 7))
    q._realized(), k._realized()
    assert _matmul.matmul(out, q, k) is True
    np.testing.assert_allclose(out.numpy(), q_np @ k_np, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plast.matmul(q, k).numpy(), q_np @ k_np, rtol=1e-5, atol=1e-5)


def test_batch_dims_that_do_not_collapse_fall_back():
    a_np = RNG.standard_normal((4, 3, 2, 5, 6)).astype(np.float32)
    a = _t(a_np).permute(2, 1, 0, 3, 4)  # batch dims (2, 3, 4): dims 1 and 2 are not one range either
    b = _t(RNG.standard_normal((6, 2)).astype(np.float32))
    out = _empty((2, 3, 4, 5, 2))
    a._realized()
    assert _matmul.matmul(out, a, b) is False
    got = plast.matmul(a, b).numpy()  # the kernel's numpy fallback
    np.testing.assert_allclose(got, a_np.transpose(2, 1, 0, 3, 4) @ b.numpy(), rtol=1e-5, atol=1e-5)


def test_bias_and_activation_epilogue():
    a_np = RNG.standard_normal((5, 7)).astype(np.float32)
    b_np = RNG.standard_normal((7, 3)).astype(np.float32)
    bias_np = RNG.standard_normal(3).astype(np.float32)
    out = _empty((5, 3))
    assert _matmul.matmul(out, _t(a_np), _t(b_np), _t(bias_np), "relu", 2.0) is True
    np.testing.assert_allclose(out.numpy(), np.maximum(2 * a_np @ b_np + bias_np, 0), rtol=1e-5, atol=1e-5)
    out2 = _empty((5, 3))
    assert (
        _matmul.matmul(out2, _t(a_np), _t(b_np), _t(bias_np.reshape(3, 1)[:1]), "none") is False
    )  # (1,1) bias


def test_integer_operands_are_refused():
    a = plast.ones(2, 2, dtype=plast.int64)
    out = plast.empty(2, 2, dtype=plast.int64)
    assert _matmul.matmul(out, a, a) is False


@pytest.mark.parametrize(
    "ashape,bshape,ta,tb",
    [((6, 4), (4, 5), True, False), ((3, 6, 4), (4, 5), False, True), ((2, 3, 6, 4), (3, 4, 5), True, True)],
)
def test_matmul_values_and_grads_vs_torch(ashape, bshape, ta, tb, device):
    a_np = RNG.standard_normal(ashape[:-2] + ashape[-2:][::-1] if ta else ashape)
    b_np = RNG.standard_normal(bshape[:-2] + bshape[-2:][::-1] if tb else bshape)
    pa = plast.tensor(a_np, device=device, requires_grad=True)
    pb = plast.tensor(b_np, device=device, requires_grad=True)
    xa = torch.tensor(a_np, requires_grad=True)
    xb = torch.tensor(b_np, requires_grad=True)
    va, vb = (pa.mT if ta else pa), (pb.mT if tb else pb)
    wa, wb = (xa.mT if ta else xa), (xb.mT if tb else xb)
    out_p, out_t = va @ vb, wa @ wb
    g = RNG.standard_normal(tuple(out_t.shape))
    out_p.backward(plast.tensor(g, device=device))
    out_t.backward(torch.tensor(g))
    assert out_p.device.type == device
    np.testing.assert_allclose(out_p.detach().cpu().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pa.grad.cpu().numpy(), xa.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pb.grad.cpu().numpy(), xb.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_addmm_with_transposed_weight_vs_torch(device):
    x = RNG.standard_normal((9, 5)).astype(np.float32)
    w = RNG.standard_normal((7, 5)).astype(np.float32)
    b = RNG.standard_normal(7).astype(np.float32)
    pb, px, pw = (plast.tensor(a, device=device) for a in (b, x, w))
    got = plast.addmm(pb, px, pw.T, alpha=0.5).cpu().numpy()
    want = torch.addmm(torch.tensor(b), torch.tensor(x), torch.tensor(w).T, alpha=0.5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("T,hs", [(64, 32), (13, 7)])
def test_attention_head_products_and_grads_vs_torch(threads, T, hs):
    """The explicit attention's products on per-head views of a fused qkv projection (batch dims that do not
    collapse, transposed operands), and their backward (P^T @ dY, Q^T @ dS: A transposed), at 1 and 2 threads.
    T 64: enough work that 2 threads share the B x nh products in one parallel region (gemm_batched2)."""
    B, nh = 4, 4
    C = nh * hs
    qkv_np = RNG.standard_normal((B, T, 3 * C)).astype(np.float32)
    g_np = RNG.standard_normal((B, nh, T, hs)).astype(np.float32)
    old = plast.get_num_threads()
    plast.set_num_threads(threads)
    try:
        results = []
        for lib in (plast, torch):
            qkv = (plast.tensor if lib is plast else torch.tensor)(qkv_np, requires_grad=True)
            q, k, v = (qkv[:, :, i * C : (i + 1) * C].reshape(B, T, nh, hs).transpose(1, 2) for i in range(3))
            att = (q @ k.transpose(-2, -1)) * 0.1
            y = att @ v
            y.backward((plast.tensor if lib is plast else torch.tensor)(g_np))
            results.append((y.detach().numpy(), qkv.grad.numpy()))
    finally:
        plast.set_num_threads(old)
    (yp, gp), (yt, gt) = results
    np.testing.assert_allclose(yp, yt, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gp, gt, rtol=1e-4, atol=1e-4)

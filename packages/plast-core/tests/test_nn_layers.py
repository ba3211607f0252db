"""addmm, linear, embedding, one_hot, layer_norm, rms_norm, dropout, scaled_dot_product_attention vs torch."""

import numpy as np
import pytest
from test_nn_helpers import compare, double_backward

import plast

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _u(shape, dtype=np.float32, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


# ---- addmm / linear ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "bias_shape,m,k,n",
    [
        ((3,), 4, 5, 3),
        ((4, 3), 4, 5, 3),
        ((1, 1), 4, 5, 3),
        ((), 2, 2, 2),
        ((4, 1), 4, 5, 3),
        ((3,), 0, 5, 3),
        ((3,), 4, 0, 3),
        ((1,), 1, 1, 1),
    ],
)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm(dtype, bias_shape, m, k, n, beta, alpha, device):
    arrays = [_u(bias_shape, dtype), _u((m, k), dtype, seed=1), _u((k, n), dtype, seed=2)]
    compare(
        lambda b, x, y: plast.addmm(b, x, y, beta=beta, alpha=alpha),
        lambda b, x, y: torch.addmm(b, x, y, beta=beta, alpha=alpha),
        arrays,
        grad=(0, 1, 2),
        dtype=dtype,
        device=device,
    )


def test_addmm_non_contiguous_method_and_double_backward(device):
    arrays = [_u((3,)), _u((5, 4), seed=1), _u((3, 5), seed=2)]
    compare(
        lambda b, x, y: b.addmm(x.T, y.T),
        lambda b, x, y: b.addmm(x.T, y.T),
        arrays,
        grad=(0, 1, 2),
        device=device,
    )
    arrays64 = [a.astype(np.float64) for a in arrays]
    double_backward(
        lambda b, x, y: plast.addmm(b, x.T, y.T, alpha=1.5),
        lambda b, x, y: torch.addmm(b, x.T, y.T, alpha=1.5),
        arrays64,
        grad=(0, 1, 2),
        device=device,
    )
    # beta=0 ignores the input even where it holds nan, as torch does
    out = plast.addmm(
        plast.full((2, 2), float("nan"), device=device),
        plast.ones(2, 3, device=device),
        plast.ones(3, 2, device=device),
        beta=0,
    )
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_addmm_errors():
    with pytest.raises(plast.ShapeError, match=r"\(2, 3\).*\(4, 2\)"):
        plast.addmm(plast.ones(2), plast.ones(2, 3), plast.ones(4, 2))
    with pytest.raises(plast.ShapeError, match="2-D"):
        plast.addmm(plast.ones(2), plast.ones(2, 3, 1), plast.ones(3, 2))
    with pytest.raises(plast.ShapeError, match="broadcast"):
        plast.addmm(plast.ones(3), plast.ones(2, 3), plast.ones(3, 2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape", [(4, 3), (2, 5, 3), (3,), (0, 3), (1, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(dtype, xshape, bias, device):
    arrays = [_u(xshape, dtype), _u((6, 3), dtype, seed=1)] + ([_u((6,), dtype, seed=2)] if bias else [])
    compare(plast.linear, F.linear, arrays, grad=tuple(range(len(arrays))), dtype=dtype, device=device)


def test_linear_non_contiguous_and_uses_addmm(device):
    arrays = [_u((3, 4)), _u((3, 6), seed=1), _u((6,), seed=2)]
    compare(
        lambda x, w, b: plast.linear(x.T, w.T, b),
        lambda x, w, b: F.linear(x.T, w.T, b),
        arrays,
        grad=(0, 1, 2),
        device=device,
    )
    out = plast.linear(plast.ones(2, 3), plast.ones(4, 3), plast.ones(4))
    assert out._node.op.name == "addmm"
    with pytest.raises(plast.ShapeError, match="in_features=3"):
        plast.linear(plast.ones(2, 4), plast.ones(5, 3))


# ---- embedding / one_hot ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ids_shape", [(2, 3), (5,), (), (0,), (2, 0, 3)])
@pytest.mark.parametrize("padding_idx", [None, 1, -2])
@pytest.mark.parametrize("id_dtype", [np.int64, np.int32])
def test_embedding(dtype, ids_shape, padding_idx, id_dtype, device):
    ids = np.random.default_rng(3).integers(0, 7, ids_shape).astype(id_dtype)
    if ids.size:
        ids.reshape(-1)[0] = 1  # the padding row appears at least once, and ids repeat
        ids.reshape(-1)[-1] = 1
    ids_t = ids.astype(np.int64)  # torch wants int64 or int32; keep the same values
    w = _u((7, 4), dtype)
    out_p = plast.embedding(
        plast.tensor(ids, device=device),
        wp := plast.tensor(w, device=device, requires_grad=True),
        padding_idx=padding_idx,
    )
    wt = torch.tensor(w, requires_grad=True)
    out_t = F.embedding(torch.tensor(ids_t), wt, padding_idx=padding_idx)
    assert out_p.device.type == device
    np.testing.assert_allclose(out_p.detach().cpu().numpy(), out_t.detach().numpy())
    up = _u(tuple(out_t.shape), dtype, 0.5, 1.5, seed=4)
    out_p.backward(plast.tensor(up, device=device))
    out_t.backward(torch.tensor(up))
    np.testing.assert_allclose(wp.grad.cpu().numpy(), wt.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_non_contiguous_and_double_backward(device):
    ids = np.array([[0, 2, 2], [4, 1, 0]])
    w = _u((3, 5), np.float64)  # used as w.T: (5, 3)
    compare(
        lambda i, v: plast.embedding(i.T, v.T),
        lambda i, v: F.embedding(i.T, v.T),
        [ids, w],
        grad=(1,),
        dtype=np.float64,
        device=device,
    )
    double_backward(
        lambda i, v: plast.embedding(i, v, padding_idx=2) * v.sum(),
        lambda i, v: F.embedding(i, v, padding_idx=2) * v.sum(),
        [ids, _u((5, 3), np.float64)],
        grad=(1,),
        device=device,
    )


def test_embedding_errors():
    w = plast.randn(5, 3)
    with pytest.raises(IndexError, match="id 5 is out of range for 5 rows"):
        plast.embedding(plast.tensor([0, 5]), w)
    with pytest.raises(IndexError, match="id -1"):
        plast.embedding(plast.tensor([-1, 2]), w)
    lazy = plast.embedding(plast.tensor([1, 2]) * 4, w)  # ids computed by the graph: the kernel checks them
    with pytest.raises(IndexError, match="id 8"):
        lazy.numpy()
    with pytest.raises(plast.DTypeError):
        plast.embedding(plast.tensor([0.0, 1.0]), w)
    with pytest.raises(plast.ShapeError):
        plast.embedding(plast.tensor([0]), plast.randn(5))
    with pytest.raises(IndexError, match="padding_idx"):
        plast.embedding(plast.tensor([0]), w, padding_idx=5)


def test_one_hot(device):
    ids = np.array([[0, 3], [2, 1]])
    for k in (-1, 4, 6):
        p = plast.one_hot(plast.tensor(ids, device=device), k)
        t = F.one_hot(torch.tensor(ids), k)
        assert p.dtype is plast.int64 and p.device.type == device
        np.testing.assert_array_equal(p.cpu().numpy(), t.numpy())
    assert plast.one_hot(plast.tensor(np.zeros(0, np.int64), device=device), 3).shape == (0, 3)
    np.testing.assert_array_equal(
        plast.one_hot(plast.tensor(2, dtype=plast.int32, device=device), 3).cpu().numpy(), [0, 0, 1]
    )
    with pytest.raises(IndexError, match="class index 4"):
        plast.one_hot(plast.tensor([0, 4]), 4)
    with pytest.raises(IndexError, match="class index -1"):
        plast.one_hot(plast.tensor([0, -1]), 4)
    with pytest.raises(IndexError):
        plast.one_hot(plast.tensor([0, 2]) * 3, 4).numpy()
    with pytest.raises(ValueError, match="empty"):
        plast.one_hot(plast.tensor(np.zeros(0, np.int64)))
    with pytest.raises(plast.DTypeError):
        plast.one_hot(plast.tensor([0.0]))


# ---- layer_norm / rms_norm ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "xshape,ns",
    [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((0, 5), (5,)), ((3, 1), (1,)), ((5,), 5), ((2, 3, 4), (2, 3, 4))],
)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm(dtype, xshape, ns, affine, device):
    nss = (ns,) if isinstance(ns, int) else ns
    arrays = [_u(xshape, dtype)]
    if affine != "none":
        arrays.append(_u(nss, dtype, 0.5, 1.5, seed=1))
    if affine == "both":
        arrays.append(_u(nss, dtype, seed=2))

    def fn(f):
        return lambda x, *p: f(x, ns if f is plast.layer_norm else nss, *p)  # plast also takes a bare int

    # one-element rows: the exact gradient is 0, torch's float32 rounding times rstd = eps^-1/2 leaves ~3e-5
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 and xshape == (3, 1) else None
    compare(
        fn(plast.layer_norm),
        fn(F.layer_norm),
        arrays,
        grad=tuple(range(len(arrays))),
        dtype=dtype,
        tol=tol,
        device=device,
    )


def test_layer_norm_bias_only_non_contiguous_eps(device):
    x = _u((6, 4))
    b = _u((6,), seed=2)
    compare(
        lambda a, c: plast.layer_norm(a.T, (6,), None, c, eps=1e-2),
        lambda a, c: F.layer_norm(a.T, (6,), None, c, eps=1e-2),
        [x, b],
        grad=(0, 1),
        device=device,
    )


def test_layer_norm_errors():
    with pytest.raises(plast.ShapeError, match=r"\(4,\)"):
        plast.layer_norm(plast.ones(2, 3), (4,))
    with pytest.raises(plast.ShapeError, match="weight"):
        plast.layer_norm(plast.ones(2, 3), (3,), weight=plast.ones(2))
    x = plast.randn(2, 3, dtype=plast.float64, requires_grad=True)
    (g,) = plast.autograd.grad(plast.layer_norm(x, (3,)).sum(), [x], create_graph=True)
    (g * g).sum().backward()  # double backward works now; tests/test_op_corners.py checks its values
    assert x.grad is not None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape,ns", [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((0, 5), (5,))])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(dtype, xshape, ns, weight, eps, device):
    arrays = [_u(xshape, dtype)] + ([_u(ns, dtype, 0.5, 1.5, seed=1)] if weight else [])
    compare(
        lambda x, *w: plast.rms_norm(x, ns, *w, eps=eps),
        lambda x, *w: F.rms_norm(x, ns, *w, eps=eps),
        arrays,
        grad=tuple(range(len(arrays))),
        dtype=dtype,
        device=device,
    )


def test_rms_norm_double_backward(device):
    double_backward(
        lambda x, w: plast.rms_norm(x, (4,), w),
        lambda x, w: F.rms_norm(x, (4,), w),
        [_u((3, 4), np.float64), _u((4,), np.float64, 0.5, 1.5, seed=1)],
        grad=(0, 1),
        device=device,
    )


# ---- dropout ----


def test_dropout_identity_cases():
    x = plast.randn(4, 5, requires_grad=True)
    assert plast.dropout(x, 0.0) is x
    assert plast.dropout(x, 0.7, training=False) is x
    z = plast.dropout(x, 1.0)
    assert z.numpy(force=True).tolist() == [[0.0] * 5] * 4
    z.sum().backward()
    assert x.grad.numpy().tolist() == [[0.0] * 5] * 4
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            plast.dropout(x, p)


@pytest.mark.parametrize("dtype", [plast.float32, plast.float64])
def test_dropout_mask_scale_and_grad(dtype, device):
    p = 0.3
    x = plast.randn(200, 100, dtype=dtype, device=device, requires_grad=True)
    g = plast.Generator().manual_seed(7)
    y = plast.dropout(x, p, generator=g)
    assert y.dtype is dtype and y.device.type == device
    xv, yv = x.detach().cpu().numpy(), y.detach().cpu().numpy()
    kept = yv != 0
    assert abs(1 - kept.mean() - p) < 0.01
    np.testing.assert_allclose(yv[kept], xv[kept] / (1 - p), rtol=1e-6)
    up = np.random.default_rng(0).uniform(size=(200, 100))
    y.backward(plast.tensor(up, dtype=dtype, device=device))
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.where(kept, up / (1 - p), 0), rtol=1e-6)
    # the same seed gives the same mask; the generator's stream moves on otherwise
    y2 = plast.dropout(x.detach(), p, generator=plast.Generator().manual_seed(7))
    np.testing.assert_array_equal(y2.cpu().numpy() != 0, kept)
    y3 = plast.dropout(x.detach(), p, generator=g)
    assert (y3.cpu().numpy() != 0).tolist() != kept.tolist()


def test_dropout_inplace_and_global_generator():
    plast.manual_seed(1)
    a = plast.dropout(plast.ones(50), 0.5).numpy()
    plast.manual_seed(1)
    x = plast.ones(50)
    out = plast.dropout(x, 0.5, inplace=True)
    assert out is x
    np.testing.assert_array_equal(x.numpy(), a)
    assert set(np.unique(a)) <= {0.0, 2.0}


# ---- scaled_dot_product_attention ----


def _qkv(dtype, L=5, S=7, E=8, Ev=6, batch=(2, 3)):
    return [
        _u(batch + (L, E), dtype, seed=1),
        _u(batch + (S, E), dtype, seed=2),
        _u(batch + (S, Ev), dtype, seed=3),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_sdpa(dtype, causal, scale, device):
    sd = F.scaled_dot_product_attention
    compare(
        lambda q, k, v: plast.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
        lambda q, k, v: sd(q, k, v, is_causal=causal, scale=scale),
        _qkv(dtype),
        grad=(0, 1, 2),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_masks(dtype, device):
    sd = F.scaled_dot_product_attention
    qkv = _qkv(dtype)
    bmask = np.random.default_rng(5).uniform(size=(5, 7)) > 0.4
    bmask[2] = False  # a row with nothing to attend gives zeros, as in torch
    compare(
        lambda q, k, v, m: plast.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: sd(q, k, v, attn_mask=m),
        qkv + [bmask],
        grad=(0, 1, 2),
        dtype=dtype,
        device=device,
    )
    fmask = _u((3, 1, 7), dtype, -1, 1, seed=9)
    compare(
        lambda q, k, v, m: plast.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: sd(q, k, v, attn_mask=m),
        qkv + [fmask],
        grad=(0, 1, 2, 3),
        dtype=dtype,
        device=device,
    )


def test_sdpa_shapes_noncontiguous_gqa(device):
    sd = F.scaled_dot_product_attention
    # (B, L, H, E) inputs transposed to (B, H, L, E), as attention layers do
    arrays = [_u((2, 5, 4, 8), seed=1), _u((2, 5, 4, 8), seed=2), _u((2, 5, 4, 8), seed=3)]
    compare(
        lambda q, k, v: plast.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        ),
        lambda q, k, v: sd(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True),
        arrays,
        grad=(0, 1, 2),
        device=device,
    )
    compare(
        plast.scaled_dot_product_attention,
        sd,
        [_u((5, 8)), _u((7, 8), seed=2), _u((7, 3), seed=3)],
        grad=(0, 1, 2),
        device=device,
    )
    compare(
        plast.scaled_dot_product_attention,
        sd,
        [_u((1, 1, 1)), _u((1, 1, 1), seed=2), _u((1, 1, 1), seed=3)],
        grad=(0, 1, 2),
        device=device,
    )
    gqa = [_u((2, 4, 5, 8), seed=1), _u((2, 2, 7, 8), seed=2), _u((2, 2, 7, 8), seed=3)]
    compare(
        lambda q, k, v: plast.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        lambda q, k, v: sd(q, k, v, enable_gqa=True),
        gqa,
        grad=(0, 1, 2),
        device=device,
    )


def test_sdpa_double_backward_and_errors(device):
    sd = F.scaled_dot_product_attention
    qkv = _qkv(np.float64, L=3, S=4, E=2, Ev=2, batch=(2,))
    double_backward(
        lambda q, k, v: plast.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: sd(q, k, v, is_causal=True),
        qkv,
        grad=(0, 1, 2),
        device=device,
    )
    q = plast.ones(2, 5, 8)
    with pytest.raises(plast.ShapeError, match="last dim"):
        plast.scaled_dot_product_attention(q, plast.ones(2, 5, 4), plast.ones(2, 5, 4))
    with pytest.raises(plast.ShapeError, match="same length"):
        plast.scaled_dot_product_attention(q, q, plast.ones(2, 6, 8))
    with pytest.raises(ValueError, match="not both"):
        plast.scaled_dot_product_attention(q, q, q, attn_mask=plast.ones(5, 5), is_causal=True)
    with pytest.raises(plast.ShapeError, match="attn_mask"):
        plast.scaled_dot_product_attention(q, q, q, attn_mask=plast.ones(4, 5))

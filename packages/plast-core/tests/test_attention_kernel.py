"""The blocked attention kernel (ops/attention.py, csrc/attention.c) against torch's scaled_dot_product_attention:
forward, lse and dq/dk/dv, causal or not, L != S, odd sizes, batch dims, non-contiguous inputs, every SIMD path,
the split backward, jit, and double backward through create_graph."""

import numpy as np
import pytest
from test_nn_helpers import double_backward

import plast
from plast.kernels.cpu import _attention, _runtime

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def _op_name(t):
    return t._node.op.name if t._node is not None else None


def _run(arrays, dtype, fused=True, transform=None, grad=True, seed=0, device="cpu", **kw):
    """sdpa on plast (its inputs on `device`) and torch from the same arrays (q, k, v); compares the output and,
    with a random (signed, non-uniform) upstream gradient, the gradients of q, k, v. `fused`: the blocked kernel
    runs; it is the CPU's (on CUDA sdpa takes the composite, ops/attention.py _flash_fits). Returns plast's
    output."""
    tol = TOL[dtype]
    pt = [plast.tensor(a, device=device, requires_grad=grad) for a in arrays]
    tt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    pin, tin = pt, tt
    if transform is not None:
        pin, tin = transform(pt), transform(tt)
    out_p = plast.scaled_dot_product_attention(*pin, **kw)
    out_t = F.scaled_dot_product_attention(*tin, **kw)
    assert (_op_name(out_p) == "flash_attention") == (fused and device == "cpu"), _op_name(out_p)
    assert tuple(out_p.shape) == tuple(out_t.shape)
    assert out_p.device.type == device
    np.testing.assert_allclose(out_p.detach().cpu().numpy(), out_t.detach().numpy(), **tol, err_msg="forward")
    if grad:
        up = np.random.default_rng(seed + 1).standard_normal(tuple(out_t.shape)).astype(dtype)
        out_p.backward(plast.tensor(up, device=device))
        out_t.backward(torch.tensor(up))
        for name, a, b in zip("qkv", pt, tt):
            assert a.grad is not None, f"d{name} missing"
            np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), **tol, err_msg=f"d{name}")
    return out_p


def _qkv(batch, L, S, D, Dv, dtype, seed=0, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, batch + (n, d)).astype(dtype) for n, d in ((L, D), (S, D), (S, Dv))]


CASES = [  # batch dims, L, S, D, Dv
    ((2, 3), 7, 7, 8, 8),
    ((1, 2), 1, 1, 1, 1),
    ((2,), 33, 33, 17, 17),
    ((1, 2), 130, 130, 64, 64),
    ((2, 1), 33, 130, 8, 8),  # L < S
    ((3,), 130, 7, 17, 5),  # L > S, Dv != D
    ((2, 2, 2), 7, 33, 1, 1),  # 5-d
    ((1, 1), 1, 130, 64, 64),  # one query row (decoding without a cache)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch,L,S,D,Dv", CASES)
def test_matches_torch(batch, L, S, D, Dv, causal, dtype, device):
    _run(_qkv(batch, L, S, D, Dv, dtype), dtype, is_causal=causal, device=device)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_and_lse(dtype):
    q, k, v = _qkv((2, 3), 33, 70, 17, 9, dtype, seed=3)
    for causal in (False, True):
        out = _run([q, k, v], dtype, is_causal=causal, scale=0.37)
        lse = out._node.outputs[1]()  # kept alive for backward while the forward node lives
        s = torch.tensor(q) @ torch.tensor(k).transpose(-1, -2) * 0.37
        if causal:
            s = s.masked_fill(~torch.ones(33, 70, dtype=torch.bool).tril(), float("-inf"))
        np.testing.assert_allclose(lse.detach().numpy(), torch.logsumexp(s, -1).numpy(), **TOL[dtype])


def test_gpt_layout_noncontiguous(device):
    """q, k, v split from one (B, T, 3C) projection and transposed to (B, H, T, hs), as the GPT does; the
    upstream gradient arrives transposed too."""
    B, T, H, hs = 2, 37, 3, 16
    x = np.random.default_rng(4).standard_normal((B, T, 3 * H * hs)).astype(np.float32)

    def heads(ts):
        (xx,) = ts
        return [t.reshape(B, T, H, hs).transpose(1, 2) for t in xx.split(H * hs, dim=2)]

    for causal in (False, True):
        xp = plast.tensor(x, device=device, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        yp = plast.scaled_dot_product_attention(*heads([xp]), is_causal=causal)
        yt = F.scaled_dot_product_attention(*heads([xt]), is_causal=causal)
        assert (_op_name(yp) == "flash_attention") == (device == "cpu")  # the blocked kernel is the CPU's
        w = np.random.default_rng(5).standard_normal((B, T, H * hs)).astype(np.float32)
        (yp.transpose(1, 2).reshape(B, T, H * hs) * plast.tensor(w, device=device)).sum().backward()
        (yt.transpose(1, 2).reshape(B, T, H * hs) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(yp.detach().cpu().numpy(), yt.detach().numpy(), **TOL[np.float32])
        np.testing.assert_allclose(xp.grad.cpu().numpy(), xt.grad.numpy(), **TOL[np.float32])


def test_unmergeable_batch_dims_and_expanded_gradient(device):
    # leading dims permuted so they share no single stride: the kernel function copies them
    q, k, v = _qkv((3, 2, 4), 9, 11, 8, 8, np.float64, seed=6)
    perm = lambda ts: [t.permute(1, 0, 2, 3, 4) for t in ts]
    _run([q, k, v], np.float64, transform=perm, is_causal=True, device=device)
    # out.sum(): the upstream gradient is an expanded scalar (all strides 0)
    pt = [plast.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    plast.scaled_dot_product_attention(*pt).sum().backward()
    F.scaled_dot_product_attention(*tt).sum().backward()
    for a, b in zip(pt, tt):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), **TOL[np.float64])


def test_empty_sequences(device):
    for L, S in ((0, 5), (5, 0), (0, 0)):
        _run(_qkv((2,), L, S, 4, 3, np.float32), np.float32, device=device)


def test_every_simd_path_and_thread_count(simd_paths):
    # B*H = 1 with 2 threads takes the split backward (dk/dv by key block, then dq by query block)
    cases = [((1, 1), 150, 150, 24, 24), ((2, 3), 70, 45, 17, 33)]
    for path in simd_paths:
        _runtime.set_simd(path)
        for threads in (1, 2):
            _runtime.set_num_threads(threads)
            for i, (batch, L, S, D, Dv) in enumerate(cases):
                for dtype in (np.float32, np.float64):
                    _run(_qkv(batch, L, S, D, Dv, dtype, seed=i), dtype, is_causal=i == 0)


def test_routing():
    # a mask, dropout or 2-d operands keep the composite
    q, k, v = _qkv((2, 3), 5, 7, 8, 8, np.float32)
    mask = np.random.default_rng(0).uniform(size=(5, 7)) > 0.3
    pq, pk, pv = (plast.tensor(a) for a in (q, k, v))
    sdpa = plast.scaled_dot_product_attention
    assert _op_name(sdpa(pq, pk, pv, attn_mask=plast.tensor(mask))) != "flash_attention"
    assert _op_name(sdpa(pq, pk, pv, dropout_p=0.5)) != "flash_attention"
    assert _op_name(sdpa(pq[0, 0], pk[0, 0], pv[0, 0])) != "flash_attention"
    # GQA: the kernel runs after the key/value heads are repeated
    gq, gk, gv = _qkv((2,), 5, 7, 8, 8, np.float32, seed=1)
    gq = np.random.default_rng(2).uniform(-2, 2, (2, 4, 5, 8)).astype(np.float32)
    gk, gv = np.stack([gk, gk * 0.5], 1), np.stack([gv, -gv], 1)
    _run([gq, gk, gv], np.float32, is_causal=True, enable_gqa=True)


@pytest.mark.parametrize("causal", [False, True])
def test_double_backward_through_create_graph(causal, device):
    q, k, v = _qkv((2, 2), 6, 9, 5, 4, np.float64, seed=8)
    double_backward(
        lambda a, b, c: plast.scaled_dot_product_attention(a, b, c, is_causal=causal, scale=0.6),
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal, scale=0.6),
        [q, k, v],
        grad=(0, 1, 2),
        device=device,
    )


def test_backward_reads_the_saved_lse_and_releases_it():
    import gc

    from plast.ops import attention as A

    calls = []
    fwd = A.FLASH.kernels["cpu"]
    A.FLASH.kernels["cpu"] = lambda *a: (calls.append(1), fwd(*a))
    try:
        n0 = len(A._SAVED_LSE)
        q, k, v = (plast.tensor(a, requires_grad=True) for a in _qkv((2, 2), 9, 9, 4, 4, np.float32))
        for _ in range(3):
            out = plast.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(plast.ones(2, 2, 9, 4))
        assert len(calls) == 3  # one forward per call: backward did not recompute it
        del out
        gc.collect()
        assert len(A._SAVED_LSE) <= n0  # nothing kept once the outputs are gone
    finally:
        A.FLASH.kernels["cpu"] = fwd


@pytest.mark.parametrize("realized", [False, True])
def test_inplace_on_the_output_keeps_gradients_right(realized, device):
    # backward reads the forward's output (D_i = rowsum(dout * out)): an in-place change after the forward
    # must not leak into it
    arrays = _qkv((2, 3), 5, 6, 4, 4, np.float64, seed=11)
    pt = [plast.tensor(a, device=device, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = plast.scaled_dot_product_attention(*pt, is_causal=True)
    if realized:
        plast.forward(out)
    out.mul_(3.0)
    ref = F.scaled_dot_product_attention(*tt, is_causal=True) * 3.0
    g = np.random.default_rng(12).standard_normal(tuple(ref.shape))
    out.backward(plast.tensor(g, device=device))
    ref.backward(torch.tensor(g))
    for a, b in zip(pt, tt):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), **TOL[np.float64])


def test_jit_step_matches_eager():
    q, k, v = _qkv((2, 2), 20, 20, 8, 8, np.float32, seed=9)
    w = np.random.default_rng(10).standard_normal((2, 2, 20, 8)).astype(np.float32)

    def make():
        ps = [plast.tensor(a, requires_grad=True) for a in (q, k, v)]

        def step(wt):
            for p in ps:
                p.grad = None
            out = plast.scaled_dot_product_attention(*ps, is_causal=True)
            loss = (out * wt).sum()
            loss.backward()
            with plast.no_grad():
                for p in ps:
                    p.sub_(p.grad * 0.1)
            return loss

        return ps, step

    pe, se = make()
    eager = [se(plast.tensor(w)).item() for _ in range(3)]
    pj, sj = make()
    sj = plast.jit(sj)
    jitted = [sj(plast.tensor(w)) for _ in range(3)]
    np.testing.assert_allclose([x.item() for x in jitted], eager, rtol=1e-6)
    for a, b in zip(pe, pj):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_raw_kernel_rejects_bad_arguments():
    z = np.zeros((1, 1, 2, 4), np.float32)
    st = (8, 8, 4, 1)
    lse = np.zeros(2, np.float32)
    a = z.ctypes.data
    with pytest.raises(ValueError, match="unsupported case"):  # head dim 0
        _attention.forward(
            _attention.F32,
            (1, 1, 2, 2, 0, 4),
            1.0,
            False,
            a,
            st,
            a,
            st,
            a,
            st,
            a,
            st,
            lse.ctypes.data,
            (2, 2, 1),
        )
    with pytest.raises(ValueError, match="unsupported case"):  # not a float dtype
        _attention.forward(
            7, (1, 1, 2, 2, 4, 4), 1.0, False, a, st, a, st, a, st, a, st, lse.ctypes.data, (2, 2, 1)
        )
    with pytest.raises(ValueError, match="unsupported case"):  # scale must be finite
        _attention.forward(
            _attention.F32,
            (1, 1, 2, 2, 4, 4),
            float("nan"),
            False,
            a,
            st,
            a,
            st,
            a,
            st,
            a,
            st,
            lse.ctypes.data,
            (2, 2, 1),
        )
    with pytest.raises(ValueError, match="strides"):
        _attention.forward(
            _attention.F32,
            (1, 1, 2, 2, 4, 4),
            1.0,
            False,
            a,
            (1,),
            a,
            st,
            a,
            st,
            a,
            st,
            lse.ctypes.data,
            (2, 2, 1),
        )


# ---- key (padding) masks: the masked kernel ----------------------------------------------------------------------
def _padding_mask(B, S, lengths):
    m = np.zeros((B, S), dtype=bool)
    for b, n in enumerate(lengths):
        m[b, :n] = True
    return m


MASKS = {  # name -> (batch dims, L, S, D, Dv, mask of the broadcast shape torch takes)
    # BERT's layout: (B, 1, 1, S), leading ones (right padding), one row fully masked
    "bert_prefix": ((3, 2), 9, 9, 8, 8, _padding_mask(3, 9, [9, 4, 0])[:, None, None, :]),
    # longer than a key block, ragged lengths around the block edge
    "prefix_blocks": ((3, 2), 20, 150, 16, 8, _padding_mask(3, 150, [150, 64, 65])[:, None, None, :]),
    # left padding and holes: the gather packing
    "holes": (
        (2, 3),
        7,
        70,
        17,
        5,
        np.random.default_rng(7).uniform(size=(2, 3, 1, 70)) > 0.4,
    ),
    "left_pad": ((2, 2), 5, 5, 4, 4, _padding_mask(2, 5, [5, 3])[:, ::-1][:, None, None, :].copy()),
    # a mask over keys alone and one per head
    "keys_only": ((2, 2), 6, 11, 8, 8, (np.arange(11) % 3 != 1)[None]),
    "per_head": ((2, 3), 4, 9, 8, 8, np.random.default_rng(8).uniform(size=(3, 1, 9)) > 0.5),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(MASKS))
def test_key_mask_takes_the_masked_kernel_and_matches_torch(name, dtype):
    batch, L, S, D, Dv, mask = MASKS[name]
    arrays = _qkv(batch, L, S, D, Dv, dtype, seed=len(name))
    tol = TOL[dtype]
    pt = [plast.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_p = plast.scaled_dot_product_attention(*pt, attn_mask=plast.tensor(mask))
    out_t = F.scaled_dot_product_attention(*tt, attn_mask=torch.tensor(mask))
    assert _op_name(out_p) == "flash_attention_masked"
    # torch gives NaN for a row that sees no key; plast gives zeros (as its composite does)
    dead = ~np.broadcast_to(mask, batch + (L, S)).any(-1)
    want = np.where(dead[..., None], 0.0, out_t.detach().numpy())
    np.testing.assert_allclose(out_p.detach().numpy(), want, **tol, err_msg="forward")
    # the composite (float additive mask) gives the same, dead rows included
    add = np.where(mask, 0.0, -np.inf).astype(dtype)
    ref_p = plast.scaled_dot_product_attention(
        *[plast.tensor(a) for a in arrays], attn_mask=plast.tensor(add)
    )
    assert _op_name(ref_p) != "flash_attention_masked"
    np.testing.assert_allclose(out_p.detach().numpy(), ref_p.numpy(), **tol, err_msg="composite")
    # gradients (through the composite backward), dead rows' upstream gradient zeroed so torch's NaN stays out
    up = np.random.default_rng(1).standard_normal(tuple(out_t.shape)).astype(dtype) * ~dead[..., None]
    out_p.backward(plast.tensor(up))
    torch.nan_to_num(out_t).backward(torch.tensor(up))
    for n, a, b in zip("qkv", pt, tt):
        np.testing.assert_allclose(a.grad.numpy(), np.nan_to_num(b.grad.numpy()), **tol, err_msg=f"d{n}")


def test_key_mask_every_simd_path_and_thread_count(simd_paths):
    # B*H = 2 < threads splits a head's query blocks into parts, each packing the visible keys itself
    mask = _padding_mask(2, 150, [150, 77])[:, None, None, :]
    holes = np.random.default_rng(3).uniform(size=(2, 1, 1, 150)) > 0.3
    for path in simd_paths:
        _runtime.set_simd(path)
        for threads in (1, 2):
            _runtime.set_num_threads(threads)
            for m in (mask, holes):
                for dtype in (np.float32, np.float64):
                    q, k, v = _qkv((2, 1), 100, 150, 24, 20, dtype, seed=threads)
                    got = plast.scaled_dot_product_attention(
                        *(plast.tensor(a) for a in (q, k, v)), attn_mask=plast.tensor(m)
                    )
                    assert _op_name(got) == "flash_attention_masked"
                    want = F.scaled_dot_product_attention(
                        *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(m)
                    )
                    np.testing.assert_allclose(got.numpy(), want.numpy(), **TOL[dtype])


def test_key_mask_routing():
    q, k, v = (plast.tensor(a) for a in _qkv((2, 3), 5, 7, 8, 8, np.float32))
    sdpa = plast.scaled_dot_product_attention
    rng = np.random.default_rng(0)
    # masks that vary along queries, float masks and dropout keep the composite
    assert (
        _op_name(sdpa(q, k, v, attn_mask=plast.tensor(rng.uniform(size=(5, 7)) > 0.3)))
        != "flash_attention_masked"
    )
    assert _op_name(sdpa(q, k, v, attn_mask=plast.zeros(2, 1, 1, 7))) != "flash_attention_masked"
    key = plast.tensor(rng.uniform(size=(2, 1, 1, 7)) > 0.3)
    assert _op_name(sdpa(q, k, v, attn_mask=key, dropout_p=0.5)) != "flash_attention_masked"
    # broadcast shapes that mask keys: (S,), (1, S), (H, 1, S), (B, H, 1, S), a size-1 key dim
    for shape in ((7,), (1, 7), (3, 1, 7), (2, 3, 1, 7), (2, 1, 1, 1)):
        m = rng.uniform(size=shape) > 0.3
        got = sdpa(q, k, v, attn_mask=plast.tensor(m))
        assert _op_name(got) == "flash_attention_masked", shape
        want = F.scaled_dot_product_attention(
            *(torch.tensor(t.numpy()) for t in (q, k, v)),
            attn_mask=torch.tensor(np.atleast_2d(m)),  # torch: no 1-d mask
        )
        np.testing.assert_allclose(
            got.numpy(), np.nan_to_num(want.numpy()), **TOL[np.float32], err_msg=str(shape)
        )
    with pytest.raises(plast.ShapeError):
        sdpa(q, k, v, attn_mask=plast.tensor(np.ones((4, 1, 1, 7), dtype=bool)))


def test_key_mask_under_jit_and_double_backward():
    q, k, v = _qkv((2, 2), 6, 9, 5, 4, np.float64, seed=8)
    mask = _padding_mask(2, 9, [9, 5])[:, None, None, :]
    double_backward(
        lambda a, b, c: plast.scaled_dot_product_attention(a, b, c, attn_mask=plast.tensor(mask), scale=0.6),
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=torch.tensor(mask), scale=0.6),
        [q, k, v],
        grad=(0, 1, 2),
    )
    f = plast.jit(lambda a, b, c, m: plast.scaled_dot_product_attention(a, b, c, attn_mask=m))
    args = [plast.tensor(a) for a in (q, k, v)]
    for lengths in ([9, 5], [3, 9], [9, 9]):
        m = _padding_mask(2, 9, lengths)[:, None, None, :]
        want = F.scaled_dot_product_attention(
            *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(m)
        )
        np.testing.assert_allclose(f(*args, plast.tensor(m)).numpy(), want.numpy(), **TOL[np.float64])


def test_raw_masked_kernel_runs_and_rejects_a_null_mask():
    z = np.zeros((1, 1, 2, 4), np.float32)
    st = (8, 8, 4, 1)
    lse = np.zeros(2, np.float32)
    m = np.ones(2, np.uint8)
    a = z.ctypes.data
    args = [a, st, a, st, a, st, m.ctypes.data, (2, 2, 1), a, st, lse.ctypes.data, (2, 2, 1)]
    _attention.forward_masked(_attention.F32, (1, 1, 2, 2, 4, 4), 1.0, *args)
    with pytest.raises(ValueError, match="NULL"):
        _attention.forward_masked(_attention.F32, (1, 1, 2, 2, 4, 4), 1.0, *args[:6], 0, (2, 2, 1), *args[8:])


def test_key_mask_three_dim_operands_and_unmergeable_mask_dims():
    rng = np.random.default_rng(13)
    sdpa = plast.scaled_dot_product_attention
    # (B, L, D) operands: the kernel's head dim is B
    q, k, v = (rng.standard_normal((3, 5, 8)).astype(np.float32) for _ in range(3))
    m = rng.uniform(size=(3, 1, 5)) > 0.3
    # a mask whose leading dims are permuted (no single batch stride): the kernel function copies it
    q5, k5, v5 = (rng.standard_normal((2, 3, 4, 6, 8)).astype(np.float32) for _ in range(3))
    m5 = rng.uniform(size=(3, 2, 1, 1, 6)) > 0.3
    for (a, b, c), mask, perm in (((q, k, v), m, None), ((q5, k5, v5), m5, (1, 0, 2, 3, 4))):
        pm, tm = plast.tensor(mask), torch.tensor(mask)
        if perm is not None:
            pm, tm = pm.permute(*perm), tm.permute(*perm)
        got = sdpa(*(plast.tensor(x) for x in (a, b, c)), attn_mask=pm)
        assert _op_name(got) == "flash_attention_masked"
        want = F.scaled_dot_product_attention(*(torch.tensor(x) for x in (a, b, c)), attn_mask=tm)
        np.testing.assert_allclose(got.numpy(), np.nan_to_num(want.numpy()), **TOL[np.float32])

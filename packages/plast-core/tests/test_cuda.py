"""CUDA kernels on a real GPU, compared with the CPU backend (and numpy where the CPU has no twin).

Every test is marked ``cuda`` and skips with the reason when ``plast._core.cuda_driver.is_available()`` is False
(no pycuda, no driver, no device, or compute capability below 8.0). The bulk of the checking is generic: the
harness records the CPU kernel calls of a representative workload (inputs with their real strides and offsets,
node arguments, results) and replays each on the GPU (cuda_harness).
"""

import math

import numpy as np
import pytest

import plast._core.cuda_driver as cuda

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not cuda.is_available(), reason=f"CUDA backend not available: {cuda.unavailable_reason()}"
    ),
]


def _harness():
    import cuda_harness as harness

    return harness


def _segments():
    return [name for name, _ in _harness()._segments()]


@pytest.fixture(scope="module")
def dev():
    import cuda_harness as harness

    from plast._core import cuda_driver
    from plast.kernels.cuda import kernels
    from plast.memory import cuda as memory

    cuda_driver.context()

    class Dev:
        arena = memory.transient_arena()

        @staticmethod
        def put(a):
            a = np.ascontiguousarray(a)
            code = {
                np.dtype(np.bool_): 0,
                np.dtype(np.int32): 1,
                np.dtype(np.int64): 2,
                np.dtype(np.float32): 3,
                np.dtype(np.float64): 4,
            }[a.dtype]
            import plast._core.dtypes as D

            dt = next(d for d in D.ALL if d.code == code)
            st = Dev.arena.new(max(a.nbytes, 1))
            memory.from_host(st, a.view(np.uint8).reshape(-1))
            return harness.DevTensor(st, a.shape, kernels.contiguous_strides(a.shape), 0, dt)

        @staticmethod
        def empty(shape, np_dtype):
            return Dev.put(np.zeros(shape, dtype=np_dtype))

        @staticmethod
        def get(t):
            return memory.to_host(t._storage, t._shape, t.dtype.np, t._offset * t.dtype.itemsize)

    return Dev


def test_every_module_builds_for_this_gpu():
    from plast.kernels.cuda import loader

    assert loader.build_all() == loader.module_names()


@pytest.mark.parametrize("segment", _segments())
def test_workload_matches_cpu(segment):
    harness = _harness()
    seg = dict(harness._segments())[segment]
    import plast

    calls = harness.capture(lambda: plast.forward(*[o for o in seg() if isinstance(o, plast.Tensor)]))
    problems = []
    for c in calls:
        try:
            msg = harness.replay(c)
        except NotImplementedError:
            continue
        if msg:
            problems.append(f"{c!r}: {msg}")
    assert not problems, "\n".join(problems[:40])


@pytest.mark.parametrize(
    "kind,code", [("u32", 3), ("uniform", 3), ("uniform", 4), ("normal", 3), ("normal", 4)]
)
def test_philox_matches_cpu(dev, kind, code):
    from plast.kernels.cpu import _kernels
    from plast.kernels.cuda import kernels_nn
    from plast.memory import cuda as memory

    n, seed, offset = 100_003, 2**40 + 17, 12345
    dt = np.uint32 if kind == "u32" else (np.float32 if code == 3 else np.float64)
    want = np.zeros(n, dtype=dt)
    _kernels.philox_fill(kind, code, seed, offset, want.ctypes.data, n, 0.25, 2.0)
    st = dev.arena.new(want.nbytes)
    blocks = kernels_nn.philox_fill(kind, code, seed, offset, st.address, n, 0.25, 2.0)
    got = memory.to_host(st, (n,), dt)
    assert blocks == ((n + 3) // 4 if kind == "u32" or (kind == "uniform" and code == 3) else (n + 1) // 2)
    if kind == "normal":
        # Box-Muller through the GPU's libm: within an ulp or two of the host's
        np.testing.assert_allclose(
            got, want, rtol=4e-7 if code == 3 else 1e-14, atol=1e-7 if code == 3 else 1e-14
        )
    else:
        assert np.array_equal(got, want)


def test_bad_ids_raise_index_error(dev):
    from plast.kernels.cuda import kernels_nn
    from plast.ops.registry import OPS

    harness = _harness()
    w = dev.put(np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32))
    ids = dev.put(np.array([1, 99, 2], dtype=np.int64))
    out = dev.empty((3, 4), np.float32)
    with pytest.raises(IndexError, match="id 99 is out of range for 10 rows"):
        kernels_nn.embedding(harness._ArgsNode(OPS["embedding"], (None, False)), [ids, w], [out])
    # the flag is cleared for the next call
    ok = dev.put(np.array([1, 9], dtype=np.int64))
    out2 = dev.empty((2, 4), np.float32)
    kernels_nn.embedding(harness._ArgsNode(OPS["embedding"], (None, False)), [ok, w], [out2])
    np.testing.assert_array_equal(dev.get(out2), dev.get(w)[[1, 9]])


def test_integer_division_by_zero_raises(dev):
    from plast.kernels.cuda import kernels
    from plast.ops.registry import OPS

    a = dev.put(np.array([4, 5, 6], dtype=np.int64))
    b = dev.put(np.array([1, 0, 2], dtype=np.int64))
    out = dev.empty((3,), np.int64)
    with pytest.raises(ZeroDivisionError):
        kernels.binary(_harness()._ArgsNode(OPS["floor_divide"], ()), [a, b], [out])


def test_cross_entropy_bad_target_raises(dev):
    from plast.kernels.cuda import kernels_nn
    from plast.ops.registry import OPS

    x = dev.put(np.zeros((2, 5), dtype=np.float32))
    t = dev.put(np.array([1, 7], dtype=np.int64))
    out = dev.empty((), np.float32)
    node = _harness()._ArgsNode(OPS["cross_entropy"], ("index", -100, "mean", 0.0))
    with pytest.raises(IndexError, match="target 7 is out of bounds for 5 classes"):
        kernels_nn.cross_entropy(node, [x, t], [out])


@pytest.mark.parametrize(
    "shape_a,shape_b",
    [((257, 130), (130, 129)), ((3, 1, 70, 33), (2, 33, 150)), ((1000,), (1000, 3)), ((5, 64), (64,))],
)
def test_matmul_shapes_and_broadcasting(dev, shape_a, shape_b):
    from plast.kernels.cuda import kernels_nn

    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = dev.empty(want.shape, np.float32)
    da, db = dev.put(a), dev.put(b)
    kernels_nn.gemm(kernels_nn.operand(da), kernels_nn.operand(db), out)
    np.testing.assert_allclose(dev.get(out), want, rtol=1e-4, atol=1e-4)


def test_matmul_transposed_views_and_epilogue(dev):
    from plast.kernels.cuda import kernels, kernels_nn

    rng = np.random.default_rng(2)
    a = rng.standard_normal((96, 200)).astype(np.float32)  # used as a.T: (200, 96) with strides (1, 200)
    b = rng.standard_normal((96, 77)).astype(np.float32)
    bias = rng.standard_normal(77).astype(np.float32)
    da, db, dbias = dev.put(a), dev.put(b), dev.put(bias)
    at = kernels.Operand(kernels.addr(da), (200, 96), (1, 200), 3)
    for act, f in (
        (1, lambda v: np.maximum(v, 0)),
        (3, lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))),
    ):
        out = dev.empty((200, 77), np.float32)
        kernels_nn.gemm(at, kernels.operand(db), out, bias=kernels.operand(dbias), act=act)
        want = f(a.T.astype(np.float64) @ b + bias)
        np.testing.assert_allclose(dev.get(out), want, rtol=1e-4, atol=1e-4)


def test_tf32_matmul_only_when_allowed(dev):
    from plast.kernels.cuda import kernels, kernels_nn

    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 512)).astype(np.float32)
    b = rng.standard_normal((512, 200)).astype(np.float32)
    want = a.astype(np.float64) @ b
    da, db = dev.put(a), dev.put(b)
    old = cuda.matmul.allow_tf32
    try:
        cuda.matmul.allow_tf32 = True
        out = dev.empty((300, 200), np.float32)
        kernels_nn.gemm(kernels.operand(da), kernels.operand(db), out)
        got = dev.get(out)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=5e-2)  # TF32: 10 mantissa bits per input
        assert np.abs(got - want).max() > 1e-3, "the TF32 path gave FP32-exact results: was it used?"
    finally:
        cuda.matmul.allow_tf32 = old


def _attention_ref(q, k, v, causal, scale, g):
    s = np.einsum("bhld,bhsd->bhls", q, k) * scale
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    lse = (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]
    dv = np.einsum("bhls,bhld->bhsd", p, g)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.einsum("bhls,bhld->bhsd", ds, q) * scale
    return o, lse, dq, dk, dv


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [16, 40, 128])
def test_flash_attention_forward_and_backward(dev, causal, D):
    from plast.kernels.cuda import kernels, kernels_nn

    rng = np.random.default_rng(4)
    B, H, L, S = 2, 3, 70, 70 if causal else 45
    q, k, v, g = (
        rng.standard_normal(s).astype(np.float32)
        for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D), (B, H, L, D))
    )
    scale = 1 / math.sqrt(D)
    o_ref, lse_ref, dq_ref, dk_ref, dv_ref = _attention_ref(
        *(x.astype(np.float64) for x in (q, k, v)), causal, scale, g.astype(np.float64)
    )
    dq_, dk_, dv_, dg = dev.put(q), dev.put(k), dev.put(v), dev.put(g)
    o, lse = dev.empty((B, H, L, D), np.float32), dev.empty((B, H, L), np.float32)
    ops = [kernels.operand(t) for t in (dq_, dk_, dv_)]
    kernels_nn.flash_attention_forward(*ops, kernels.addr(o), kernels.addr(lse), causal=causal)
    np.testing.assert_allclose(dev.get(o), o_ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(dev.get(lse), lse_ref, rtol=1e-4, atol=2e-5)
    gq, gk, gv = (
        dev.empty(q.shape, np.float32),
        dev.empty(k.shape, np.float32),
        dev.empty(v.shape, np.float32),
    )
    kernels_nn.flash_attention_backward(
        *ops,
        kernels.addr(o),
        kernels.addr(lse),
        kernels.operand(dg),
        kernels.addr(gq),
        kernels.addr(gk),
        kernels.addr(gv),
        causal=causal,
    )
    for got, want in ((gq, dq_ref), (gk, dk_ref), (gv, dv_ref)):
        np.testing.assert_allclose(dev.get(got), want, rtol=1e-3, atol=1e-4)


def test_long_rows_sort_globally(dev):
    from plast.kernels.cuda import kernels

    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5000)).astype(np.float32)
    x[0, 10:20] = 0.5  # ties keep their order
    x[1, 7] = np.nan  # NaN sorts last ascending
    dx = dev.put(x)
    out = dev.empty((3, 5000), np.int64)
    kernels.sort_raw(kernels.operand(dx), 1, False, 5000, out)
    np.testing.assert_array_equal(dev.get(out), np.argsort(x, axis=1, kind="stable"))


def test_device_arena_roundtrip(dev):
    from plast.memory import cuda as memory

    a = memory.DeviceArena("persistent", False, capacity=1 << 20, grow=False)
    s = a.new(1000)
    data = np.arange(250, dtype=np.float32)
    memory.from_host(s, data)
    np.testing.assert_array_equal(memory.to_host(s, (250,), np.float32), data)
    with pytest.raises(MemoryError):
        a.new(2 << 20)


# ---- RMSprop, binary cross-entropy, tie weights and prod backward through the engine, against the CPU ---------

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(
    "has_mom,centered,maximize,hyper",
    [
        (False, False, False, [1e-2, 0.99, 1e-8, 0.0, 0.0]),
        (True, True, False, [1e-2, 0.9, 1e-8, 0.1, 0.5]),
        (False, True, True, [1e-2, 0.3, 1e-3, 0.0, 0.0]),
        (True, False, False, [1e-1, 0.5, 1e-8, 0.01, 0.0]),
    ],
)
def test_rmsprop_update_matches_cpu(dt, has_mom, centered, maximize, hyper):
    import plast

    rng = np.random.default_rng(7)
    shapes = [(40000,), (0,), (3, 5), ()]  # several chunks, an empty parameter, a matrix, a scalar
    init = [[np.asarray(rng.standard_normal(s), dtype=dt) for s in shapes] for _ in range(5)]
    init[2] = [np.asarray(np.abs(a), dtype=dt) for a in init[2]]  # square averages are non-negative

    def run(device):
        p, g, sq, buf, ga = ([plast.tensor(a, device=device) for a in arrs] for arrs in init)
        steps = [plast.zeros((), dtype=plast.float64, device=device) for _ in shapes]
        h = plast.tensor(hyper, dtype=plast.float32 if dt is np.float32 else plast.float64, device=device)
        for _ in range(3):
            plast.rmsprop_update_(
                p, g, sq, steps, h,
                momentum_buffers=buf if has_mom else None, grad_avgs=ga if centered else None, maximize=maximize,
            )  # fmt: skip
        return [[t.cpu().numpy() for t in ts] for ts in (p, sq, buf, ga, steps)]

    got, want = run("cuda"), run("cpu")
    for name, gs, ws in zip(("param", "square_avg", "momentum_buffer", "grad_avg", "step"), got, want):
        for a, b in zip(gs, ws):
            np.testing.assert_allclose(a, b, err_msg=name, **TOL[dt])
    assert [float(s) for s in got[4]] == [3.0] * len(shapes)


ADAPTIVE = [
    ("adadelta", False, False, [1.0, 0.9, 1e-6, 0.1]),
    ("adagrad", True, False, [0.05, 0.01, 0.1, 1e-10]),
    ("adamax", False, False, [0.01, 0.3, 0.9, 1e-8, 0.1]),
    ("nadam", True, False, [0.01, 0.9, 0.999, 1e-8, 0.1, 4e-3]),
    ("nadam", False, True, [0.01, 0.3, 0.9, 1e-8, 0.1, 0.1]),
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("kind,maximize,decoupled,hyper", ADAPTIVE)
def test_adaptive_updates_match_cpu(dt, kind, maximize, decoupled, hyper):
    """adadelta_update_, adagrad_update_, adamax_update_, nadam_update_ on the device against the CPU."""
    import plast

    rng = np.random.default_rng(11)
    shapes = [(40000,), (0,), (3, 5), ()]  # several chunks, an empty parameter, a matrix, a scalar
    init = [[np.asarray(rng.standard_normal(s), dtype=dt) for s in shapes] for _ in range(4)]
    init[2] = [np.asarray(np.abs(a), dtype=dt) for a in init[2]]  # accumulators are non-negative
    init[3] = [np.asarray(np.abs(a), dtype=dt) for a in init[3]]

    def run(device):
        p, g, s1, s2 = ([plast.tensor(a, device=device) for a in arrs] for arrs in init)
        steps = [plast.zeros((), dtype=plast.float64, device=device) for _ in shapes]
        mus = [plast.ones((), device=device) for _ in shapes]
        h = plast.tensor(hyper, dtype=plast.float64, device=device)
        for _ in range(3):
            if kind == "adadelta":
                plast.adadelta_update_(p, g, s1, s2, steps, h, maximize=maximize)
            elif kind == "adagrad":
                plast.adagrad_update_(p, g, s1, steps, h, maximize=maximize)
            elif kind == "adamax":
                plast.adamax_update_(p, g, s1, s2, steps, h, maximize=maximize)
            else:
                plast.nadam_update_(
                    p, g, s1, s2, steps, mus, h, decoupled_weight_decay=decoupled, maximize=maximize
                )
        return [[t.cpu().numpy() for t in ts] for ts in (p, s1, s2, steps, mus)]

    got, want = run("cuda"), run("cpu")
    for name, gs, ws in zip(("param", "state0", "state1", "step", "mu_product"), got, want):
        for a, b in zip(gs, ws):
            np.testing.assert_allclose(a, b, err_msg=name, **TOL[dt])
    assert [float(s) for s in got[3]] == [3.0] * len(shapes)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_binary_cross_entropy_matches_torch(dt):
    import torch

    import plast

    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((6, 4)).astype(dt)
    t0 = rng.random((6, 4)).astype(dt)
    w0 = (rng.random(4) + 0.5).astype(dt)
    g0 = rng.standard_normal((6, 4)).astype(dt)
    for reduction in ("mean", "sum", "none"):
        for logits in (False, True):
            x = plast.tensor(x0, device="cuda", requires_grad=True)
            tx = torch.tensor(x0, requires_grad=True)
            xin, txin = (x, tx) if logits else (plast.sigmoid(x), torch.sigmoid(tx))
            t, tt = plast.tensor(t0, device="cuda").T.T, torch.tensor(t0)  # a view of the target
            w, tw = plast.tensor(w0, device="cuda"), torch.tensor(w0)
            if logits:
                out = plast.binary_cross_entropy_with_logits(xin, t, w, reduction=reduction, pos_weight=w * 2)
                tout = torch.nn.functional.binary_cross_entropy_with_logits(
                    txin, tt, tw, reduction=reduction, pos_weight=tw * 2
                )
            else:
                out = plast.binary_cross_entropy(xin, t, w, reduction=reduction)
                tout = torch.nn.functional.binary_cross_entropy(txin, tt, tw, reduction=reduction)
            up = g0 if reduction == "none" else np.array(g0[0, 0])
            out.backward(plast.tensor(up, device="cuda"))
            tout.backward(torch.tensor(up))
            np.testing.assert_allclose(out.detach().cpu().numpy(), tout.detach().numpy(), **TOL[dt])
            np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), **TOL[dt])
    with pytest.raises(ValueError, match=r"between 0 and 1, got \S*1\.5"):
        plast.binary_cross_entropy(
            plast.tensor([0.5, 1.5], device="cuda"), plast.tensor([1.0, 0.0], device="cuda")
        ).tolist()


def test_max_ties_and_prod_gradients_match_torch():
    import torch

    import plast

    a = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 2.0, 2.0], [0.0, 4.0, 0.0, 5.0]], np.float32)
    g = np.random.default_rng(5).standard_normal(4).astype(np.float32)
    x = plast.tensor(a, device="cuda", requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    out = (
        x.amax() * 2
        + (x.amax(0) * plast.tensor(g, device="cuda")).sum()
        + x.prod(1).sum()
        + x.T.prod(1).sum()
    )
    tout = tx.amax() * 2 + (tx.amax(0) * torch.tensor(g)).sum() + tx.prod(1).sum() + tx.T.prod(1).sum()
    (gx,) = plast.autograd.grad(out, x, create_graph=True)
    (tgx,) = torch.autograd.grad(tout, tx, create_graph=True)
    np.testing.assert_allclose(gx.detach().cpu().numpy(), tgx.detach().numpy(), rtol=1e-4, atol=1e-5)
    w = np.random.default_rng(6).standard_normal(a.shape).astype(np.float32)
    (gx * plast.tensor(w, device="cuda")).sum().backward()  # prod's second derivative (reduce_prod_others_bw)
    (tgx * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


# ---- the last rows of the op table: scatter_reduce, multinomial, SVD (matrix norms), prod's higher derivatives ----
# Each check takes the device, so its logic also runs on the CPU (test_cuda_kernels_extra.py checks the kernels'
# math on the host); here it runs on the GPU against the CPU backend and torch.


def _dev(a, device, **kw):
    import plast

    return plast.tensor(a, device=device, **kw)


def check_scatter_reduce(device, dt, reduce, include_self):
    import plast

    rng = np.random.default_rng(1)
    if dt == np.bool_:
        x0, src0 = rng.random((6, 5)) > 0.5, rng.random((9, 4)) > 0.5
    elif np.issubdtype(dt, np.integer):
        x0, src0 = rng.integers(-30, 30, (6, 5)).astype(dt), rng.integers(-30, 30, (9, 4)).astype(dt)
    else:
        x0, src0 = rng.standard_normal((6, 5)).astype(dt), rng.standard_normal((9, 4)).astype(dt)
    idx0 = rng.integers(0, 6, (9, 4))
    want = plast.tensor(x0).scatter_reduce(
        0, plast.tensor(idx0), plast.tensor(src0), reduce, include_self=include_self
    )
    # non-contiguous operands: the input transposed back and forth, src every other column of a wider tensor
    x = _dev(np.ascontiguousarray(x0.T), device).T
    src = _dev(np.repeat(src0, 2, axis=1), device)[:, ::2]
    got = x.scatter_reduce(0, _dev(idx0, device), src, reduce, include_self=include_self)
    # sorted runs folded in source order: the CPU's values bit for bit, the same on every run
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    again = x.scatter_reduce(0, _dev(idx0, device), src, reduce, include_self=include_self)
    assert again.cpu().numpy().tobytes() == got.cpu().numpy().tobytes()


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_cpu(dt, reduce, include_self):
    if dt == np.bool_ and reduce == "mean":
        pytest.skip("mean is refused for bool")
    check_scatter_reduce("cuda", dt, reduce, include_self)


def check_scatter_reduce_grad(device, reduce):
    import torch

    rng = np.random.default_rng(2)
    x0, src0 = rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    src0[3, 1] = x0[1, 1] = 10.0  # an amax tie between self and src
    idx0 = rng.integers(0, 5, (7, 4))
    idx0[3, 1] = 1
    up = rng.standard_normal((5, 4))
    x, src = _dev(x0, device, requires_grad=True), _dev(src0, device, requires_grad=True)
    tx, tsrc = torch.tensor(x0, requires_grad=True), torch.tensor(src0, requires_grad=True)
    for inc in (True, False):
        out = x.scatter_reduce(0, _dev(idx0, device), src, reduce, include_self=inc)
        tout = tx.scatter_reduce(0, torch.tensor(idx0), tsrc, reduce, include_self=inc)
        (out * _dev(up, device)).sum().backward()
        (tout * torch.tensor(up)).sum().backward()
        np.testing.assert_allclose(out.detach().cpu().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(src.grad.cpu().numpy(), tsrc.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_values_and_gradients_match_torch(reduce):
    check_scatter_reduce_grad("cuda", reduce)


def test_scatter_reduce_long_runs_and_bad_index():
    import plast

    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(7)
    idx0 = rng.integers(0, 7, 20000)  # ~3000 values per position, and the global-memory sort
    src0 = rng.standard_normal(20000) * 1e3
    for reduce in ("sum", "mean", "amax"):
        want = plast.tensor(x0).scatter_reduce(0, plast.tensor(idx0), plast.tensor(src0), reduce)
        got = _dev(x0, "cuda").scatter_reduce(0, _dev(idx0, "cuda"), _dev(src0, "cuda"), reduce)
        assert got.cpu().numpy().tobytes() == want.numpy().tobytes(), reduce
    bad = np.array([0, 9, 1])
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 7"):
        _dev(x0, "cuda").scatter_reduce(0, _dev(bad, "cuda"), _dev(src0[:3], "cuda"), "sum").tolist()


def check_multinomial(device, dt, replacement, rows, cats, ns):
    import plast

    rng = np.random.default_rng(rows + cats)
    w0 = rng.random((rows, cats)).astype(dt)
    w0[:, ::4] = 0.0
    for seed in (0, 12345):
        want = plast.multinomial(
            plast.tensor(w0), ns, replacement, generator=plast.Generator().manual_seed(seed)
        ).numpy()
        got = plast.multinomial(
            _dev(w0, device), ns, replacement, generator=plast.Generator().manual_seed(seed)
        )
        assert got.device == device
        np.testing.assert_array_equal(got.cpu().numpy(), want)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("rows,cats,ns", [(1, 5, 3), (4, 50, 20), (3, 5000, 100)])
def test_multinomial_same_seed_same_samples_as_cpu(dt, replacement, rows, cats, ns):
    check_multinomial("cuda", dt, replacement, rows, cats, ns)


def test_multinomial_bad_weights_raise():
    import plast

    for w in ([[0.5, -0.1]], [[0.0, 0.0]], [[np.nan, 1.0]]):
        with pytest.raises(RuntimeError, match="multinomial"):
            plast.multinomial(_dev(np.array(w), "cuda"), 1, True).tolist()


def check_matrix_norms(device, dt, shape):
    import torch

    import plast

    rng = np.random.default_rng(sum(shape))
    a0 = rng.standard_normal(shape).astype(dt)
    up = rng.standard_normal(shape[:-2]).astype(dt)
    tol = dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for ord_ in ("nuc", 2, -2):
        a = _dev(a0, device, requires_grad=True)
        ta = torch.tensor(a0, requires_grad=True)
        out = plast.linalg.matrix_norm(a, ord_)
        tout = torch.linalg.matrix_norm(ta, ord_)
        (out * _dev(up, device)).sum().backward()
        (tout * torch.tensor(up)).sum().backward()
        np.testing.assert_allclose(out.detach().cpu().numpy(), tout.detach().numpy(), **tol)
        np.testing.assert_allclose(a.grad.cpu().numpy(), ta.grad.numpy(), **tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 3), (4, 3, 6), (2, 2, 1, 7), (40, 40)])
def test_matrix_norms_through_the_svd_match_torch(dt, shape):
    check_matrix_norms("cuda", dt, shape)


def test_svd_limits_and_nonfinite_input():
    import plast

    with pytest.raises(NotImplementedError, match=r"up to 54 x 54.*got 60 x 60"):
        plast.linalg.matrix_norm(plast.ones(60, 60, dtype=plast.float64, device="cuda"), "nuc").tolist()
    a = np.stack([np.eye(3), np.eye(3) * 2])
    a[1, 1, 1] = np.inf
    # NaN where the matrix holds inf, as on the CPU backend (numpy's SVD); the other matrix is unaffected
    for ord_ in ("nuc", 2):
        want = plast.linalg.matrix_norm(plast.tensor(a), ord_).tolist()
        got = plast.linalg.matrix_norm(_dev(a, "cuda"), ord_).tolist()
        assert math.isnan(want[1]) and math.isnan(got[1]) and got[0] == pytest.approx(want[0])


def check_prod_derivatives(device, dt):
    import torch

    import plast

    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((3, 5)).astype(dt)
    x0[1, 2] = 0.0  # exact with zeros: no division
    ws = [rng.standard_normal((3, 5)).astype(dt) for _ in range(3)]
    x, tx = _dev(x0, device, requires_grad=True), torch.tensor(x0, requires_grad=True)
    g, tg = x.prod(1).sum(), tx.prod(1).sum()
    for w in ws:  # third and fourth derivatives: reduce_prod_excl with two and three vectors
        (g,) = plast.autograd.grad(g, x, create_graph=True)
        (tg,) = torch.autograd.grad(tg, tx, create_graph=True)
        g, tg = (g * _dev(w, device)).sum(), (tg * torch.tensor(w)).sum()
    (gx,) = plast.autograd.grad(g, x)
    (tgx,) = torch.autograd.grad(tg, tx)
    tol = dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gx.cpu().numpy(), tgx.numpy(), **tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_prod_higher_derivatives_match_torch(dt):
    check_prod_derivatives("cuda", dt)

"""The C optimizer updates (kernels/cpu/csrc/optim.c) against torch.optim's single-tensor CPU path.

torch's CPU sqrt is not correctly rounded in the installed build (measured: one ulp off for about 1 in 6 float32
inputs; the vendor vector-math library it calls trades that for speed), while plast's IEEE sqrt is. With torch's
sqrt replaced by a correctly rounded one (`exact_sqrt`), every other operation of SGD, Adam/AdamW and RMSprop must
agree bit for bit over 50 steps; against stock torch the results must agree within a few ulp per step.
"""

import itertools

import numpy as np
import pytest
import torch

import plast
from plast.kernels.cpu import _optim, _runtime
from plast.kernels.cpu import kernels_optim as KO
from plast.kernels.cpu import kernels_optim_rmsprop as KR

SHAPES = [(1,), (7,), (33,), (1000,), (17, 31)]
DTYPES = [np.float32, np.float64]


@pytest.fixture
def exact_sqrt(monkeypatch):
    def sqrt(t):
        return torch.from_numpy(np.sqrt(t.detach().numpy()))

    def sqrt_(t):
        return t.copy_(sqrt(t))

    monkeypatch.setattr(torch.Tensor, "sqrt", sqrt)
    monkeypatch.setattr(torch.Tensor, "sqrt_", sqrt_)


@pytest.fixture
def fma_path():
    """Bit-exact agreement with torch holds on the FMA paths (AVX2, AVX-512), whose rounding is torch's: run on
    the best one even when PLAST_SIMD forces another, and skip where the CPU has none (test_every_simd_path checks
    the scalar path within a few ulp)."""
    best = [s for s in ("avx512", "avx2") if s in _runtime.simd_available()]
    if not best:
        pytest.skip("this CPU has no FMA path (AVX2/AVX-512); the scalar path is checked within tolerance")
    old = _runtime.get_simd()
    _runtime.set_simd(best[0])
    yield best[0]
    _runtime.set_simd(old)


@pytest.fixture
def restore_runtime():
    old_simd, old_threads = _runtime.get_simd(), _runtime.get_num_threads()
    yield
    _runtime.set_simd(old_simd)
    _runtime.set_num_threads(old_threads)


def _f64(*vals):
    return plast.tensor(list(vals), dtype=plast.float64)


def _lr(step, base):
    return base * (0.97**step) * (1 + 0.5 * (step % 3))  # changes every step, as a scheduler would


def _ids(case):
    return ",".join(f"{k}={v}" for k, v in case.items()) or "plain"


class Run:
    """The same `kind` optimizer in torch (foreach=False) and through plast's fused op, on the same parameters
    and gradients; `step()` advances both."""

    def __init__(self, kind, dtype, case, shapes=SHAPES, seed=0, grad_dtype=None, layout=None):
        self.kind, self.case, self.shapes = kind, dict(case), shapes
        self.rng = np.random.default_rng(seed)
        self.dtype, self.grad_dtype = dtype, grad_dtype or dtype
        init = [self.rng.standard_normal(s).astype(dtype) for s in shapes]
        self.tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
        self.layout = layout or (lambda a: plast.tensor(a))
        self.pp = [self.layout(a) for a in init]
        self.n = len(shapes)
        self.count = 0
        c = self.case
        if kind == "sgd":
            self.base_lr = 0.05
            kw = {
                k: c[k] for k in ("momentum", "dampening", "nesterov", "weight_decay", "maximize") if k in c
            }
            self.opt = torch.optim.SGD(self.tp, lr=self.base_lr, foreach=False, **kw)
            self.bufs = self._zeros() if c.get("momentum") else None
            self.fresh = [plast.ones((), dtype=plast.float64) for _ in shapes] if c.get("momentum") else None
        elif kind == "adam":
            self.base_lr = 0.01
            kw = {k: c[k] for k in ("betas", "eps", "weight_decay", "amsgrad", "maximize") if k in c}
            cls = torch.optim.AdamW if c.get("decoupled") else torch.optim.Adam
            self.opt = cls(self.tp, lr=self.base_lr, foreach=False, **kw)
            self.m, self.v = self._zeros(), self._zeros()
            self.vmax = self._zeros() if c.get("amsgrad") else None
            sdt = c.get("step_dtype", plast.float64)
            self.steps = [plast.zeros((), dtype=sdt) for _ in shapes]
        else:
            self.base_lr = 0.01
            kw = {
                k: c[k]
                for k in ("alpha", "eps", "weight_decay", "momentum", "centered", "maximize")
                if k in c
            }
            self.opt = torch.optim.RMSprop(self.tp, lr=self.base_lr, foreach=False, **kw)
            self.sq = self._zeros()
            self.bufs = self._zeros() if c.get("momentum") else None
            self.gavg = self._zeros() if c.get("centered") else None
            self.steps = [plast.zeros((), dtype=plast.float64) for _ in shapes]

    def grad(self, shape):
        return self.rng.standard_normal(shape)

    def _zeros(self):
        return [self.layout(np.zeros(s, self.dtype)) for s in self.shapes]

    def hyper(self, lr):
        c = self.case
        if self.kind == "sgd":
            return _f64(lr, c.get("momentum", 0.0), c.get("dampening", 0.0), c.get("weight_decay", 0.0))
        if self.kind == "adam":
            b1, b2 = c.get("betas", (0.9, 0.999))
            wd = c.get("weight_decay", 0.01 if c.get("decoupled") else 0.0)
            return _f64(lr, b1, b2, c.get("eps", 1e-8), wd)
        return _f64(
            lr, c.get("alpha", 0.99), c.get("eps", 1e-8), c.get("weight_decay", 0.0), c.get("momentum", 0.0)
        )

    def step(self, steps=1):
        for _ in range(steps):
            lr = _lr(self.count, self.base_lr)
            self.count += 1
            gs = [self.grad(s).astype(self.dtype) for s in self.shapes]
            for t, g in zip(self.tp, gs):
                t.grad = torch.tensor(g)
            for group in self.opt.param_groups:
                group["lr"] = lr
            self.opt.step()
            grads = [self.layout(g.astype(self.grad_dtype)) for g in gs]
            self.plast_step(grads, self.hyper(lr))

    def plast_step(self, grads, hyper):
        c = self.case
        if self.kind == "sgd":
            plast.sgd_update_(
                self.pp,
                grads,
                self.bufs,
                hyper,
                fresh=self.fresh,
                nesterov=c.get("nesterov", False),
                maximize=c.get("maximize", False),
            )
        elif self.kind == "adam":
            plast.adam_update_(
                self.pp,
                grads,
                self.m,
                self.v,
                self.steps,
                hyper,
                amsgrad=c.get("amsgrad", False),
                decoupled_weight_decay=c.get("decoupled", False),
                max_exp_avg_sqs=self.vmax,
                maximize=c.get("maximize", False),
            )
        else:
            plast.rmsprop_update_(
                self.pp,
                grads,
                self.sq,
                self.steps,
                hyper,
                momentum_buffers=self.bufs,
                grad_avgs=self.gavg,
                maximize=c.get("maximize", False),
            )

    def pairs(self):
        """(name, plast array, torch array) for parameters and every state buffer."""
        out = []
        for i, t in enumerate(self.tp):
            st = self.opt.state[t]
            out.append((f"param{i}", self.pp[i], t.detach()))
            if self.kind == "sgd" and self.bufs is not None:
                out.append((f"momentum_buffer{i}", self.bufs[i], st["momentum_buffer"]))
            if self.kind == "adam":
                out += [
                    (f"exp_avg{i}", self.m[i], st["exp_avg"]),
                    (f"exp_avg_sq{i}", self.v[i], st["exp_avg_sq"]),
                ]
                if self.vmax is not None:
                    out.append((f"max_exp_avg_sq{i}", self.vmax[i], st["max_exp_avg_sq"]))
            if self.kind == "rmsprop":
                out.append((f"square_avg{i}", self.sq[i], st["square_avg"]))
                if self.bufs is not None:
                    out.append((f"momentum_buffer{i}", self.bufs[i], st["momentum_buffer"]))
                if self.gavg is not None:
                    out.append((f"grad_avg{i}", self.gavg[i], st["grad_avg"]))
        return [(name, a.numpy(), b.numpy()) for name, a, b in out]

    def assert_exact(self):
        for name, a, b in self.pairs():
            np.testing.assert_array_equal(a, b, err_msg=f"{self.kind} {self.case} {name}")
        if self.kind != "sgd":
            for s, t in zip(self.steps, self.tp):
                assert s.item() == self.opt.state[t]["step"].item() == self.count
        elif self.fresh is not None:
            assert all(f.item() == 0.0 for f in self.fresh)

    def assert_close(self, rtol, atol_scale):
        for name, a, b in self.pairs():
            atol = atol_scale * max(float(np.abs(b).max(initial=0.0)), 1e-30)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{self.kind} {self.case} {name}")


def _sgd_cases():
    cases = []
    for momentum, wd, maximize in itertools.product((0.0, 0.9), (0.0, 0.01), (False, True)):
        variants = [dict(dampening=0.0, nesterov=False)]
        if momentum:
            variants += [dict(dampening=0.3, nesterov=False), dict(dampening=0.0, nesterov=True)]
        for v in variants:
            case = dict(momentum=momentum, weight_decay=wd, maximize=maximize, **v)
            cases.append({k: val for k, val in case.items() if val})
    return cases


SGD_CASES = _sgd_cases()
ADAM_CASES = [
    dict(amsgrad=a, maximize=m, weight_decay=wd, decoupled=d)
    for a, m, (wd, d) in itertools.product(
        (False, True), (False, True), ((0.0, False), (0.05, False), (0.05, True))
    )
] + [dict(betas=(0.3, 0.9), eps=1e-6), dict(betas=(0.3, 0.9), decoupled=True, weight_decay=0.1, amsgrad=True)]
RMSPROP_CASES = [
    dict(centered=c, momentum=mo, weight_decay=wd, maximize=m)
    for c, mo, wd, m in itertools.product((False, True), (0.0, 0.9), (0.0, 0.1), (False, True))
] + [dict(alpha=0.3, centered=True), dict(alpha=0.3, momentum=0.5, eps=1e-4)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SGD_CASES, ids=_ids)
def test_sgd_bit_exact(exact_sqrt, fma_path, dtype, case):
    run = Run("sgd", dtype, case)
    run.step(50)
    run.assert_exact()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ADAM_CASES, ids=_ids)
def test_adam_bit_exact(exact_sqrt, fma_path, dtype, case):
    run = Run("adam", dtype, case)
    run.step(50)
    run.assert_exact()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", RMSPROP_CASES, ids=_ids)
def test_rmsprop_bit_exact(exact_sqrt, fma_path, dtype, case):
    run = Run("rmsprop", dtype, case)
    run.step(50)
    run.assert_exact()


STOCK = [
    ("sgd", dict(momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", dict()),
    ("adam", dict(amsgrad=True, weight_decay=0.05, decoupled=True, maximize=True)),
    ("rmsprop", dict(momentum=0.9, weight_decay=0.1)),
    ("rmsprop", dict(centered=True, momentum=0.9)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,case", STOCK, ids=[f"{k}-{_ids(c)}" for k, c in STOCK])
def test_close_to_stock_torch(fma_path, dtype, kind, case):
    run = Run(kind, dtype, case)
    run.step(50)
    if kind == "sgd":  # no sqrt: exact even against stock torch
        run.assert_exact()
    elif dtype == np.float32:
        # a 1-ulp sqrt difference a step; centered RMSprop divides by sqrt(E[g^2] - E[g]^2), which amplifies it
        run.assert_close(rtol=1e-6, atol_scale=1e-5 if case.get("centered") else 1e-6)
    else:
        run.assert_close(rtol=1e-13, atol_scale=1e-13)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize(
    "kind,case",
    [
        ("sgd", dict(momentum=0.9, weight_decay=0.01, nesterov=True, maximize=True)),
        ("adam", dict(amsgrad=True, weight_decay=0.05)),
        ("adam", dict(betas=(0.3, 0.9), decoupled=True, weight_decay=0.1)),
        ("rmsprop", dict(centered=True, momentum=0.5, weight_decay=0.1)),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_simd_path(exact_sqrt, restore_runtime, simd, kind, case, dtype):
    if simd not in _runtime.simd_available():
        pytest.skip(f"this CPU has no {simd} path")
    _runtime.set_simd(simd)
    run = Run(kind, dtype, case)
    run.step(50)
    if simd == "scalar":
        # plain multiply-add, as torch's kernels built without FMA: within a few ulp of the FMA paths
        run.assert_close(
            rtol=1e-5 if dtype == np.float32 else 1e-12, atol_scale=1e-5 if dtype == np.float32 else 1e-12
        )
    else:
        run.assert_exact()


@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop"])
def test_threads_split_large_updates_identically(exact_sqrt, fma_path, restore_runtime, kind):
    if not _runtime.have_openmp():
        pytest.skip("built without OpenMP")
    case = {"sgd": dict(momentum=0.9), "adam": dict(amsgrad=True), "rmsprop": dict(centered=True)}[kind]
    shapes = [(150_001,), (3,), (70_000,), (0,), (257, 129)]
    results = []
    for threads in (1, 2):
        _runtime.set_num_threads(threads)
        run = Run(kind, np.float32, case, shapes=shapes, seed=3)
        run.step(5)
        run.assert_exact()
        results.append([a for _, a, _ in run.pairs()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kind,case", [("adam", dict(amsgrad=True)), ("rmsprop", dict(centered=True)), ("sgd", {})]
)
def test_nan_and_inf_gradients_propagate_as_in_torch(exact_sqrt, fma_path, kind, case):
    run = Run(kind, np.float32, case)
    real = run.grad

    def poisoned(shape):
        a = real(shape)
        if run.count == 10 and shape == (33,):
            a[[3, 20]] = np.nan, np.inf
        return a

    run.grad = poisoned
    run.step(20)
    assert np.isnan(run.pp[2].numpy()[3])
    run.assert_exact()


def test_empty_parameters_still_count_steps(exact_sqrt, fma_path):
    run = Run("adam", np.float32, dict(), shapes=[(0,), (3, 0), (5,)])
    run.step(7)
    run.assert_exact()


def test_float32_step_counters(exact_sqrt, fma_path):
    run = Run("adam", np.float64, dict(step_dtype=plast.float32))
    run.step(20)
    run.assert_exact()


def test_groups_with_their_own_hyperparameters(exact_sqrt, fma_path):
    rng = np.random.default_rng(5)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
    pp = [plast.tensor(a) for a in init]
    groups = [dict(params=tp[:2], lr=1e-2), dict(params=tp[2:], lr=1e-3, betas=(0.5, 0.9), weight_decay=0.1)]
    opt = torch.optim.Adam(groups, foreach=False)
    h1, h2 = _f64(1e-2, 0.9, 0.999, 1e-8, 0.0), _f64(1e-3, 0.5, 0.9, 1e-8, 0.1)
    m, v = [plast.zeros_like(p) for p in pp], [plast.zeros_like(p) for p in pp]
    steps = [plast.zeros((), dtype=plast.float64) for _ in pp]
    for _ in range(30):
        gs = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        for t, g in zip(tp, gs):
            t.grad = torch.tensor(g)
        opt.step()
        plast.adam_update_(pp, [plast.tensor(g) for g in gs], m, v, steps, [h1, h1, h2, h2, h2])
    for p, t in zip(pp, tp):
        np.testing.assert_array_equal(p.numpy(), t.detach().numpy())


def _transposed(a):
    """A dense tensor whose memory order is not row-major (a transposed view of a contiguous one)."""
    a = np.asarray(a)
    return plast.tensor(np.ascontiguousarray(a.T)).T if a.ndim == 2 else plast.tensor(a)


def _strided(a):
    """A non-dense view: every other column of a wider tensor."""
    a = np.asarray(a)
    if a.ndim != 2:
        return plast.tensor(a)
    wide = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
    wide[:, ::2] = a
    return plast.tensor(wide)[:, ::2]


def _spy(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def spy(node, inputs, which):
        calls.append(tuple(which))
        return real(node, inputs, which)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_dense_transposed_layouts_take_the_c_path(exact_sqrt, fma_path, monkeypatch):
    calls = _spy(monkeypatch, KO, "_adam_numpy")
    run = Run("adam", np.float32, dict(amsgrad=True), layout=_transposed)
    assert run.pp[4].is_contiguous() is False
    run.step(20)
    run.assert_exact()
    assert calls == []


@pytest.mark.parametrize("kind", ["sgd", "adam", "rmsprop"])
def test_strided_parameters_fall_back_to_numpy(monkeypatch, kind):
    module, name = (KR, "_rmsprop_numpy") if kind == "rmsprop" else (KO, f"_{kind}_numpy")
    calls = _spy(monkeypatch, module, name)
    case = {"sgd": dict(momentum=0.9), "adam": dict(), "rmsprop": dict(momentum=0.5)}[kind]
    run = Run(kind, np.float32, case, layout=_strided)
    run.step(20)
    assert calls and all(c == (4,) for c in calls)  # only the 2-D parameter is strided
    run.assert_close(rtol=1e-5, atol_scale=1e-6)


def test_gradient_of_another_dtype_falls_back_to_numpy(monkeypatch):
    calls = _spy(monkeypatch, KO, "_sgd_numpy")
    run = Run("sgd", np.float32, dict(momentum=0.9, weight_decay=0.01), grad_dtype=np.float64)
    run.step(20)
    assert calls and all(c == tuple(range(len(SHAPES))) for c in calls)
    run.assert_close(rtol=1e-5, atol_scale=1e-6)


# ---- @plast.jit: the plan packed while tracing is reused by every replay ----


def _jit_setup(seed=0):
    plast.manual_seed(seed)
    w = (plast.randn(6, 16) * 0.3).requires_grad_()
    b = plast.zeros(16, requires_grad=True)
    params = [w, b]
    state = dict(
        m=[plast.zeros_like(p) for p in params],
        v=[plast.zeros_like(p) for p in params],
        steps=[plast.zeros((), dtype=plast.float64) for _ in params],
        hyper=_f64(0.01, 0.9, 0.999, 1e-8, 0.0),
    )
    return params, state


def _jit_step(params, state, lr_box):
    from plast import compiler as J

    w, b = params

    def step(x, y):
        loss = (((x @ w + b).tanh() - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        J.runtime_input(lambda: state["hyper"].copy_(_f64(lr_box[0], 0.9, 0.999, 1e-8, 0.0)))
        with plast.no_grad():
            plast.adam_update_(
                params, [p.grad for p in params], state["m"], state["v"], state["steps"], state["hyper"]
            )
        return loss

    return step


def test_jit_replays_reuse_the_packed_plan_and_see_the_current_lr():
    x, y = plast.randn(8, 6), plast.randn(8, 16)
    lr = [0.01]
    p_eager, s_eager = _jit_setup()
    eager = _jit_step(p_eager, s_eager, lr)
    p_jit, s_jit = _jit_setup()
    step = plast.jit(_jit_step(p_jit, s_jit, lr))
    built = None
    for i in range(12):
        lr[0] = 0.01 * (0.9**i)
        a = eager(x, y).item()
        b = step(x, y).item()
        assert a == b
        if i == 1:
            built = _optim.stats()["plans_built"]
    assert step.traces == 1 and step.replays == 11
    # eager calls pack a fresh table (a new node each time); replays after the first reuse the traced one
    assert _optim.stats()["plans_built"] - built == 10
    for a, b in zip(p_eager + s_eager["m"] + s_eager["steps"], p_jit + s_jit["m"] + s_jit["steps"]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_jit_replay_repacks_when_an_argument_moves():
    """Gradients passed as arguments live in new memory on every call: the packed plan must notice."""
    p_eager, p_jit = plast.ones(5), plast.ones(5)
    hyper = _f64(0.1, 0.0, 0.0, 0.0)

    def step(p, g):
        with plast.no_grad():
            plast.sgd_update_([p], [g], None, hyper)

    jstep = plast.jit(lambda g: step(p_jit, g))
    for i in range(6):
        g = plast.tensor(np.arange(5, dtype=np.float32) * (i + 1))
        step(p_eager, g)
        jstep(g)
    np.testing.assert_array_equal(p_eager.numpy(), p_jit.numpy())

"""The fused Adadelta, Adagrad, Adamax and NAdam updates (plast.adadelta_update_, adagrad_update_, adamax_update_,
nadam_update_; C path csrc/optim.c, numpy fallback kernels_optim_<name>.py) against torch.optim's single-tensor
CPU path (foreach=False) over many steps, with the learning rate changing every step.

As in test_optim_c.py: with torch's sqrt replaced by a correctly rounded one (`exact_sqrt`) the C path on an FMA
level agrees bit for bit; against stock torch within a few ulp per step; the scalar level and the numpy fallback
(which round a multiply-add twice) within a few ulp.
"""

import itertools

import numpy as np
import pytest
import torch
from test_optim_c import _ids, _lr, _spy, _strided, _transposed, exact_sqrt, fma_path, restore_runtime  # noqa: F401

import plast
from plast.errors import DTypeError, ShapeError
from plast.kernels.cpu import _runtime
from plast.kernels.cpu import kernels_optim_adadelta as KD
from plast.kernels.cpu import kernels_optim_adagrad as KG
from plast.kernels.cpu import kernels_optim_adamax as KM
from plast.kernels.cpu import kernels_optim_nadam as KN

SHAPES = [(1,), (7,), (33,), (1000,), (17, 31)]
DTYPES = [np.float32, np.float64]
KINDS = ["adadelta", "adagrad", "adamax", "nadam"]
FALLBACK = {"adadelta": (KD, "_adadelta_numpy"), "adagrad": (KG, "_adagrad_numpy")}
FALLBACK |= {"adamax": (KM, "_adamax_numpy"), "nadam": (KN, "_nadam_numpy")}
# what each kind keeps per parameter, under torch's state names
STATE = {
    "adadelta": ("square_avg", "acc_delta"),
    "adagrad": ("sum",),
    "adamax": ("exp_avg", "exp_inf"),
    "nadam": ("exp_avg", "exp_avg_sq", "mu_product"),
}
BASE_LR = {"adadelta": 0.5, "adagrad": 0.05, "adamax": 0.01, "nadam": 0.01}


def _f64(*vals):
    return plast.tensor(list(vals), dtype=plast.float64)


class Run:
    """The same `kind` optimizer in torch (foreach=False) and through plast's fused op on the same parameters and
    gradients, one hyperparameter row per torch param group; `step()` advances both."""

    def __init__(self, kind, dtype, case, shapes=SHAPES, seed=0, layout=None, groups=None):
        self.kind, self.case, self.shapes = kind, dict(case), shapes
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        init = [self.rng.standard_normal(s).astype(dtype) for s in shapes]
        self.tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
        self.layout = layout or plast.tensor
        self.pp = [self.layout(a) for a in init]
        self.count = 0
        # groups: [(first parameter index, {option: value})]: each group's options override the case's
        self.groups = groups or [(0, {})]
        bounds = [i for i, _ in self.groups] + [len(shapes)]
        tgroups = [
            dict(params=self.tp[a:b], **opts) for (a, opts), b in zip(self.groups, bounds[1:], strict=True)
        ]
        self.group_of = [k for k, (a, b) in enumerate(zip(bounds, bounds[1:])) for _ in range(a, b)]
        c = {k: v for k, v in self.case.items() if k not in ("mu_f64",)}
        cls = {"adadelta": torch.optim.Adadelta, "adagrad": torch.optim.Adagrad}
        cls |= {"adamax": torch.optim.Adamax, "nadam": torch.optim.NAdam}
        self.opt = cls[kind](tgroups, lr=BASE_LR[kind], foreach=False, **c)
        acc0 = float(c.get("initial_accumulator_value", 0.0))
        self.state = [[self.layout(np.full(s, acc0 if kind == "adagrad" else 0.0, dtype)) for s in shapes]]
        if kind in ("adadelta", "adamax", "nadam"):
            self.state.append([self.layout(np.zeros(s, dtype)) for s in shapes])
        self.steps = [plast.zeros((), dtype=plast.float64) for _ in shapes]
        # torch keeps mu_product in the default dtype (float32 unless set), whatever the parameter's dtype
        mu_dt = plast.float64 if self.case.get("mu_f64") else plast.float32
        self.mu = [plast.ones((), dtype=mu_dt) for _ in shapes]

    def grad(self, shape):
        return self.rng.standard_normal(shape)

    def hyper(self, group, lr):
        g = self.opt.param_groups[group]
        if self.kind == "adadelta":
            return _f64(lr, g["rho"], g["eps"], g["weight_decay"])
        if self.kind == "adagrad":
            return _f64(lr, g["lr_decay"], g["weight_decay"], g["eps"])
        b1, b2 = g["betas"]
        if self.kind == "adamax":
            return _f64(lr, b1, b2, g["eps"], g["weight_decay"])
        return _f64(lr, b1, b2, g["eps"], g["weight_decay"], g["momentum_decay"])

    def step(self, steps=1):
        for _ in range(steps):
            lr = _lr(self.count, BASE_LR[self.kind])
            self.count += 1
            gs = [self.grad(s).astype(self.dtype) for s in self.shapes]
            for t, g in zip(self.tp, gs):
                t.grad = torch.tensor(g)
            lrs = []
            for k, group in enumerate(self.opt.param_groups):
                group["lr"] = lr * (k + 1)  # each group its own learning rate
                lrs.append(group["lr"])
            old = torch.get_default_dtype()
            if self.case.get("mu_f64"):
                torch.set_default_dtype(torch.float64)
            try:
                self.opt.step()
            finally:
                torch.set_default_dtype(old)
            rows = [self.hyper(k, lrs[k]) for k in range(len(lrs))]
            self.plast_step([self.layout(g) for g in gs], [rows[k] for k in self.group_of])

    def plast_step(self, grads, hyper):
        mx = self.case.get("maximize", False)
        if self.kind == "adadelta":
            plast.adadelta_update_(self.pp, grads, *self.state, self.steps, hyper, maximize=mx)
        elif self.kind == "adagrad":
            plast.adagrad_update_(self.pp, grads, *self.state, self.steps, hyper, maximize=mx)
        elif self.kind == "adamax":
            plast.adamax_update_(self.pp, grads, *self.state, self.steps, hyper, maximize=mx)
        else:
            dec = self.case.get("decoupled_weight_decay", False)
            plast.nadam_update_(
                self.pp,
                grads,
                *self.state,
                self.steps,
                self.mu,
                hyper,
                decoupled_weight_decay=dec,
                maximize=mx,
            )

    def pairs(self):
        """(name, plast array, torch array) for parameters and every state tensor."""
        out = []
        for i, t in enumerate(self.tp):
            st = self.opt.state[t]
            out.append((f"param{i}", self.pp[i], t.detach()))
            mine = [s[i] for s in self.state] + ([self.mu[i]] if self.kind == "nadam" else [])
            out += [(f"{name}{i}", a, st[name]) for name, a in zip(STATE[self.kind], mine, strict=True)]
        return [(name, a.numpy(), b.numpy()) for name, a, b in out]

    def assert_exact(self):
        for name, a, b in self.pairs():
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=f"{self.kind} {self.case} {name}")
        for s, t in zip(self.steps, self.tp):
            assert s.item() == self.opt.state[t]["step"].item() == self.count

    def assert_close(self, rtol, atol_scale):
        for name, a, b in self.pairs():
            atol = atol_scale * max(float(np.abs(b).max(initial=0.0)), 1e-30)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{self.kind} {self.case} {name}")


CASES = {
    "adadelta": [
        dict(weight_decay=wd, maximize=m, rho=rho)
        for wd, m, rho in itertools.product((0.0, 0.1), (False, True), (0.9, 0.3))
    ]
    + [dict(eps=1e-3)],
    "adagrad": [
        dict(lr_decay=d, weight_decay=wd, maximize=m, initial_accumulator_value=a)
        for d, wd, m, a in itertools.product((0.0, 0.05), (0.0, 0.1), (False, True), (0.0, 0.3))
    ]
    + [dict(eps=1e-4)],
    "adamax": [
        dict(weight_decay=wd, maximize=m, betas=b)
        for wd, m, b in itertools.product((0.0, 0.1), (False, True), ((0.9, 0.999), (0.3, 0.9)))
    ]
    + [dict(eps=1e-3)],
    "nadam": [
        dict(weight_decay=wd, decoupled_weight_decay=d, maximize=m)
        for (wd, d), m in itertools.product(((0.0, False), (0.05, False), (0.05, True)), (False, True))
    ]
    + [dict(betas=(0.3, 0.9), momentum_decay=0.1), dict(momentum_decay=0.02, eps=1e-4, mu_f64=True)],
}
ALL_CASES = [(k, c) for k in KINDS for c in CASES[k]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,case", ALL_CASES, ids=[f"{k}-{_ids(c)}" for k, c in ALL_CASES])
@pytest.mark.usefixtures("exact_sqrt", "fma_path")
def test_bit_exact(dtype, kind, case):
    run = Run(kind, dtype, case)
    run.step(40)
    run.assert_exact()


STOCK = [(k, CASES[k][0]) for k in KINDS] + [(k, CASES[k][-2]) for k in KINDS]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,case", STOCK, ids=[f"{k}-{_ids(c)}" for k, c in STOCK])
@pytest.mark.usefixtures("fma_path")
def test_close_to_stock_torch(dtype, kind, case):
    run = Run(kind, dtype, case)
    run.step(40)
    if kind == "adamax":  # no sqrt: exact even against stock torch
        run.assert_exact()
    elif dtype == np.float32:
        run.assert_close(rtol=1e-5, atol_scale=1e-6)
    else:
        run.assert_close(rtol=1e-12, atol_scale=1e-13)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"])
@pytest.mark.parametrize("kind,case", STOCK[4:], ids=[f"{k}-{_ids(c)}" for k, c in STOCK[4:]])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("exact_sqrt", "restore_runtime")
def test_every_simd_path(simd, kind, case, dtype):
    if simd not in _runtime.simd_available():
        pytest.skip(f"this CPU has no {simd} path")
    _runtime.set_simd(simd)
    run = Run(kind, dtype, case)
    run.step(30)
    if simd == "scalar":
        # plain multiply-add, as torch's kernels built without FMA: within a few ulp of the FMA paths
        tol = 1e-5 if dtype == np.float32 else 1e-12
        run.assert_close(rtol=tol, atol_scale=tol)
    else:
        run.assert_exact()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("exact_sqrt", "fma_path")
def test_several_groups_with_their_own_lr_in_one_call(kind):
    other = {
        "adadelta": dict(rho=0.5),
        "adagrad": dict(lr_decay=0.1, eps=1e-6),
        "adamax": dict(betas=(0.5, 0.9)),
    }
    other["nadam"] = dict(betas=(0.5, 0.9), momentum_decay=0.01, weight_decay=0.1)
    run = Run(kind, np.float32, dict(), groups=[(0, {}), (2, other[kind]), (4, dict(weight_decay=0.05))])
    run.step(25)
    run.assert_exact()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("exact_sqrt", "fma_path", "restore_runtime")
def test_threads_split_large_updates_identically(kind):
    if not _runtime.have_openmp():
        pytest.skip("built without OpenMP")
    shapes = [(150_001,), (3,), (70_000,), (0,), (257, 129)]
    results = []
    for threads in (1, 2):
        _runtime.set_num_threads(threads)
        run = Run(kind, np.float32, CASES[kind][-2], shapes=shapes, seed=3)
        run.step(4)
        run.assert_exact()
        results.append([a for _, a, _ in run.pairs()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("exact_sqrt", "fma_path")
def test_dense_transposed_layouts_take_the_c_path(monkeypatch, kind):
    calls = _spy(monkeypatch, *FALLBACK[kind])
    run = Run(kind, np.float64, dict(weight_decay=0.1), layout=_transposed)
    assert run.pp[4].is_contiguous() is False
    run.step(15)
    run.assert_exact()
    assert calls == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_strided_parameters_fall_back_to_numpy(monkeypatch, kind, dtype):
    calls = _spy(monkeypatch, *FALLBACK[kind])
    case = dict(CASES[kind][-2], maximize=True)
    run = Run(kind, dtype, case, layout=_strided)
    run.step(20)
    assert calls and all(c == (4,) for c in calls)  # only the 2-D parameter is strided
    if dtype == np.float32:
        run.assert_close(rtol=1e-5, atol_scale=1e-6)
    else:
        run.assert_close(rtol=1e-12, atol_scale=1e-13)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.usefixtures("exact_sqrt", "fma_path")
def test_empty_parameters_still_count_steps(kind):
    run = Run(kind, np.float32, dict(), shapes=[(0,), (3, 0), (5,)])
    run.step(7)
    run.assert_exact()


@pytest.mark.usefixtures("exact_sqrt", "fma_path")
def test_adamax_nan_and_inf_gradients_propagate_as_in_torch():
    run = Run("adamax", np.float32, dict())
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


def test_hyper_is_read_when_the_kernel_runs():
    p, g, s = plast.ones(3), plast.ones(3), plast.zeros(3)
    step = plast.zeros((), dtype=plast.float64)
    h = _f64(0.1, 0.0, 0.0, 1e-10)
    plast.adagrad_update_([p], [g], [s], [step], h)
    h.copy_(_f64(0.0, 0.0, 0.0, 1e-10))  # lr 0: the next step leaves p alone
    plast.adagrad_update_([p], [g], [s], [step], h)
    np.testing.assert_allclose(p.numpy(), 0.9, rtol=1e-6)
    assert step.item() == 2.0 and s.tolist() == [2.0, 2.0, 2.0]


def _call(kind, params, grads, n_state=None, **kw):
    """One call of `kind`'s op with fresh state shaped like `params` (n_state of each, default one per param)."""
    n = len(params) if n_state is None else n_state
    state = [[plast.zeros_like(params[min(i, len(params) - 1)]) for i in range(n)] for _ in STATE[kind]]
    steps = kw.pop("steps", [plast.zeros((), dtype=plast.float64) for _ in range(n)])
    width = {"adadelta": 4, "adagrad": 4, "adamax": 5, "nadam": 6}[kind]
    hyper = kw.pop("hyper", plast.tensor([0.1] + [0.5] * (width - 1), dtype=plast.float64))
    if kind == "adadelta":
        plast.adadelta_update_(params, grads, state[0], state[1], steps, hyper, **kw)
    elif kind == "adagrad":
        plast.adagrad_update_(params, grads, state[0], steps, hyper, **kw)
    elif kind == "adamax":
        plast.adamax_update_(params, grads, state[0], state[1], steps, hyper, **kw)
    else:
        mu = kw.pop("mu", [plast.ones(()) for _ in range(n)])
        plast.nadam_update_(params, grads, state[0], state[1], steps, mu, hyper, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_inputs(kind):
    p = [plast.ones(3), plast.ones(2, 2)]
    g = [plast.ones(3), plast.ones(2, 2)]
    op = f"{kind}_update_"
    with pytest.raises(
        ShapeError, match=rf"{op}: grads\[1\] has shape \(4,\) but its parameter has shape \(2, 2\)"
    ):
        _call(kind, p, [plast.ones(3), plast.ones(4)])
    with pytest.raises(ValueError, match=rf"{op}: grads has 1 tensors but there are 2 parameters"):
        _call(kind, p, g[:1])
    with pytest.raises(ValueError, match=rf"{op}: .* has 3 tensors but there are 2 parameters"):
        _call(kind, p, g, n_state=3)
    with pytest.raises(ShapeError, match=rf"{op}: step\[0\] must hold one number"):
        _call(kind, p, g, steps=[plast.zeros(2, dtype=plast.float64), plast.zeros(())])
    with pytest.raises(ShapeError, match=rf"{op}: hyper must hold \d numbers"):
        _call(kind, p, g, hyper=_f64(0.1, 0.9))
    with pytest.raises(DTypeError, match=rf"{op}: grads\[0\] must be floating point"):
        _call(kind, p, [plast.ones(3, dtype=plast.int64), g[1]])
    with pytest.raises(TypeError, match=rf"{op}: params must be a list of tensors"):
        _call(kind, p[0], g)
    with pytest.raises(ValueError, match=rf"{op}: params\[1\] appears twice"):
        _call(kind, [p[0], p[0]], [g[0], g[0]])
    with pytest.raises(TypeError, match="unexpected keyword"):
        _call(kind, p, g, nesterov=True)


def test_nadam_mu_products_must_be_one_number_each():
    p, g = [plast.ones(3)], [plast.ones(3)]
    with pytest.raises(ShapeError, match=r"nadam_update_: mu_products\[0\] must hold one number"):
        _call("nadam", p, g, mu=[plast.ones(2)])
    with pytest.raises(
        ValueError, match=r"nadam_update_: mu_products has 2 tensors but there are 1 parameters"
    ):
        _call("nadam", p, g, mu=[plast.ones(()), plast.ones(())])


@pytest.mark.parametrize("kind", KINDS)
def test_update_of_a_saved_input_is_caught_by_backward(kind):
    w = plast.ones(3, requires_grad=True)
    loss = (w * w).sum()
    _call(kind, [w], [plast.ones(3)])
    with pytest.raises(RuntimeError):
        loss.backward()
    with pytest.raises(RuntimeError, match="realized leaf"):
        _call(kind, [w * 2], [plast.ones(3)])


# ---- @plast.jit: hyperparameters and counters are runtime inputs of the traced plan ----


@pytest.mark.parametrize("kind", KINDS)
def test_jit_replays_follow_the_current_lr(kind):
    def setup():
        plast.manual_seed(0)
        w = (plast.randn(6, 16) * 0.3).requires_grad_()
        b = plast.zeros(16, requires_grad=True)
        params = [w, b]
        state = [[plast.zeros_like(p) for p in params] for _ in STATE[kind][:2]]
        if kind == "adagrad":
            state = state[:1]
        steps = [plast.zeros((), dtype=plast.float64) for _ in params]
        mu = [plast.ones(()) for _ in params]
        return params, state, steps, mu

    # the hyperparameters after lr
    rest = {"adadelta": [0.9, 1e-6, 0.01], "adagrad": [0.01, 0.01, 1e-10]}.get(
        kind, [0.9, 0.999, 1e-8, 0.01] + ([4e-3] if kind == "nadam" else [])
    )

    def make(params, state, steps, mu, lr_box, hyper):
        from plast import compiler as J

        w, b = params

        def step(x, y):
            loss = (((x @ w + b).tanh() - y) ** 2).mean()
            for p in params:
                p.grad = None
            loss.backward()
            J.runtime_input(lambda: hyper.copy_(_f64(lr_box[0], *rest)))
            grads = [p.grad for p in params]
            with plast.no_grad():
                if kind == "nadam":
                    plast.nadam_update_(params, grads, *state, steps, mu, hyper)
                else:
                    getattr(plast, f"{kind}_update_")(params, grads, *state, steps, hyper)
            return loss

        return step

    x, y = plast.randn(8, 6), plast.randn(8, 16)
    lr = [0.01]
    eager_s, jit_s = setup(), setup()
    h_e, h_j = _f64(0.01, *rest), _f64(0.01, *rest)
    eager = make(*eager_s, lr, h_e)
    step = plast.jit(make(*jit_s, lr, h_j))
    for i in range(10):
        lr[0] = 0.05 * (0.8**i)
        assert eager(x, y).item() == step(x, y).item()
    assert step.traces == 1 and step.replays == 9
    flat = [t for part in eager_s for t in (part if isinstance(part[0], plast.Tensor) else sum(part, []))]
    flat_j = [t for part in jit_s for t in (part if isinstance(part[0], plast.Tensor) else sum(part, []))]
    for a, b in zip(flat, flat_j, strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert eager_s[2][0].item() == 10.0

"""Activations at -inf, +inf, nan and the extremes of their formulas, forward and backward, against torch (issue 23:
no silent wrong results): on every SIMD path of the CPU kernels, at lengths that take the vector loops and their
scalar tails, eagerly and inside a fused elementwise chain.

torch 2.13 is the oracle where it is consistent with itself. Where its own paths disagree, the test says which
answer plast gives:
* gelu (erf) at +inf: torch's vectorized float32 kernel gives nan, its float64 and tanh-approximation kernels
  inf; plast gives inf (the limit). Both give nan at -inf (0.5 * x * (1 + erf(x / sqrt(2))) is -inf * 0 there).
* elu's gradient at nan is 1 or nan depending on torch's path; plast's is 0 (not compared).
* hardtanh's gradient at nan: torch's vector loop gives 0 and its scalar tail 1 (so the answer depends on the
  element's position); plast gives 0 everywhere, as torch's vector loop and clamp's gradient do. The test
  compares it with 0.
* abs's gradient at nan is torch's (0) on every path.
* relu's gradient at nan (torch 1, plast nan) is not compared: torch's rule needs a comparison, which is no op of
  the fused elementwise chain, and it cost the eager xor step 13% more instructions (ops/unary.py).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import plast
from plast.kernels.cpu import _runtime

SPECIALS = [-np.inf, np.inf, np.nan, -1e30, 1e30, -710.0, 710.0, -89.0, 89.0, -88.0, 88.0, -20.5, 20.5]
SPECIALS += [-20.0, 20.0, -5.0, 5.0, -1.0, 1.0, -1e-30, 1e-30, 0.0, -0.0]

ACTS = {
    "sigmoid": (lambda x: plast.sigmoid(x), lambda x: torch.sigmoid(x)),
    "tanh": (lambda x: plast.tanh(x), lambda x: torch.tanh(x)),
    "silu": (lambda x: plast.silu(x), TF.silu),
    "softplus": (lambda x: plast.softplus(x), TF.softplus),
    "softplus_beta": (
        lambda x: plast.softplus(x, beta=2.0, threshold=10.0),
        lambda x: TF.softplus(x, beta=2.0, threshold=10.0),
    ),
    "elu": (lambda x: plast.elu(x), TF.elu),
    "gelu": (lambda x: plast.gelu(x), TF.gelu),
    "gelu_tanh": (lambda x: plast.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    "relu": (lambda x: plast.relu(x), TF.relu),
    "leaky_relu": (lambda x: plast.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1)),
    "hardtanh": (lambda x: plast.hardtanh(x), TF.hardtanh),
    "exp": (lambda x: plast.exp(x), torch.exp),
    "erf": (lambda x: plast.erf(x), torch.erf),
    "abs": (lambda x: plast.abs(x), torch.abs),
}
NAN_GRAD_UNCOMPARED = {"elu", "relu"}


def _run(lib, name, x, fused):
    fn = ACTS[name][0 if lib is plast else 1]
    t = lib.tensor(x, requires_grad=True)
    inp = t * 1.0 + 0.0 if fused else t  # fused: the activation is the middle of one elementwise chain
    out = fn(inp)
    if fused:
        out = out * 1.0
    out.backward(lib.ones_like(out))
    return out.detach().numpy().copy(), t.grad.numpy().copy()


def _inputs(rng, dtype, n):
    """`n` values: the specials first, then random ones in [-30, 30] (a different order each length)."""
    vals = np.array(SPECIALS + list(rng.uniform(-30, 30, max(0, n - len(SPECIALS)))), dtype=dtype)[:n]
    return rng.permutation(vals)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTS))
def test_activations_at_infinities_and_nan_match_torch(simd_paths, rng, dtype, name):
    tol = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}[dtype]
    cases = [np.array([v], dtype=dtype) for v in SPECIALS]  # one element: the scalar code
    cases += [_inputs(rng, dtype, n) for n in (31, 67)]  # vector loops and their tails
    for path in simd_paths:
        _runtime.set_simd(path)
        for fused in (False, True):
            for x in cases:
                with np.errstate(all="ignore"):
                    got, got_g = _run(plast, name, x, fused)
                    want, want_g = _run(torch, name, x, fused)
                if name == "gelu":
                    want = np.where(x == np.inf, np.inf, want)  # torch's float32 vector path says nan
                if name == "hardtanh":
                    want_g = np.where(np.isnan(x), 0.0, want_g)  # torch's vector loop (its tail says 1)
                if name in NAN_GRAD_UNCOMPARED:
                    got_g, want_g = got_g[~np.isnan(x)], want_g[~np.isnan(x)]
                where = (
                    f"{name} {np.dtype(dtype).name} on {path}{' in a chain' if fused else ''}, x={x.tolist()}"
                )
                np.testing.assert_allclose(got, want, **tol, err_msg=f"forward of {where}")
                np.testing.assert_allclose(got_g, want_g, **tol, err_msg=f"gradient of {where}")


def test_gelu_and_softplus_limits():
    x = plast.tensor([-np.inf, np.inf, np.nan], requires_grad=True)
    assert np.array_equal(plast.gelu(x).detach().numpy(), [np.nan, np.inf, np.nan], equal_nan=True)
    plast.softplus(x).sum().backward()
    # softplus: 0 and 1 at the infinities; a nan input's gradient stays nan (it was 0: clamp's mask hid it)
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, np.nan])


INF_ROWS = [
    [np.inf, 0.0, 1.0],
    [0.0, np.inf, 1.0],
    [np.inf, np.inf, 0.0],
    [np.inf, -np.inf, 0.0],
    [-np.inf, 0.0, 1.0],
    [-np.inf, -np.inf, -np.inf],
    [np.nan, 0.0, 1.0],
    [1000.0, -1000.0, 0.0],
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_with_infinite_logits_matches_torch(simd_paths, dtype):
    # a +inf logit makes torch's log_softmax nan over its row (inf - inf): the loss and the whole row's gradient
    # are nan; plast's fused kernel gave a finite or infinite loss and finite gradients beside the inf (issue 23).
    # Every row above and an ordinary one in one batch, rows of 3 (the scalar tail) and 37 classes (the vector
    # loop), each target per row, the reductions, smoothing and weights.
    for path in simd_paths:
        _runtime.set_simd(path)
        for k in (3, 37):
            x = np.array([r + [0.5] * (k - 3) for r in INF_ROWS] + [[0.25] * k], dtype)
            w = np.linspace(0.5, 1.5, k).astype(dtype)
            for shift in (0, 1, 2):
                target = (np.arange(len(x)) + shift) % 3
                for kw in (
                    dict(reduction="none"),
                    dict(reduction="mean", label_smoothing=0.1),
                    dict(reduction="sum", weight=w),
                ):
                    got, want = [], []
                    for lib, fn, out in ((plast, plast.cross_entropy, got), (torch, TF.cross_entropy, want)):
                        t = lib.tensor(x, requires_grad=True)
                        args = {n: lib.tensor(v) if isinstance(v, np.ndarray) else v for n, v in kw.items()}
                        loss = fn(t, lib.tensor(target), **args)
                        loss.sum().backward()
                        out += [loss.detach().numpy(), t.grad.numpy()]
                    where = f"{np.dtype(dtype).name} on {path}: {k} classes, targets {target.tolist()}, {kw}"
                    for g, e, what in zip(got, want, ("loss", "gradient")):
                        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"{what} of {where}")


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_logit_value_and_gradient_everywhere_match_torch(eps):
    # outside [0, 1] without eps: value and gradient nan (issue 23: the gradient was finite); at 0 and 1: +-inf
    x = np.array([-0.5, 0.0, 1e-4, 0.3, 0.5, 0.9999, 1.0, 1.5, np.nan, np.inf, -np.inf], dtype=np.float32)
    p = plast.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    yp, yt = plast.logit(p, eps=eps), torch.logit(t, eps=eps)
    (yp * plast.arange(1, 12, dtype=plast.float32)).sum().backward()
    (yt * torch.arange(1, 12, dtype=torch.float32)).sum().backward()
    np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_is_one_pass_and_its_double_backward_matches_torch(rng, approximate):
    """gelu's backward is grad * gelu'(x), one elementwise kernel (gelu_*_grad, fused with the multiply), not the
    five to seven kernels autograd made of a mul/add/tanh composite; first and second derivatives equal torch's,
    on a non-contiguous view."""
    a = rng.standard_normal((6, 40)) * 3
    g = rng.standard_normal((40, 6))
    x = plast.tensor(a, dtype=plast.float64, requires_grad=True)
    tx = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    y = plast.gelu(x.t(), approximate=approximate)
    ty = TF.gelu(tx.t(), approximate=approximate)
    (gx,) = plast.autograd.grad(y, x, plast.tensor(g, dtype=plast.float64), create_graph=True)
    (tgx,) = torch.autograd.grad(ty, tx, torch.tensor(g, dtype=torch.float64), create_graph=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-10, atol=1e-12)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)

    x32 = plast.tensor(a.astype(np.float32), requires_grad=True)
    y32 = plast.gelu(x32, approximate=approximate)
    y32.detach().numpy()
    with plast.profiler.profile() as prof:
        y32.backward(plast.ones_like(y32))
        x32.grad.numpy()
    keys = [e.key for e in prof.key_averages()]
    assert len(keys) == 1 and f"gelu_{'tanh' if approximate == 'tanh' else 'erf'}_grad" in keys[0], keys

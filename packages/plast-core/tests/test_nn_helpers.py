"""Helpers for the NN-primitive tests: run one function on plast and torch with the same inputs (some of them
integer data, some differentiable) and compare values and gradients; and a double-backward check. `device`: where
plast's inputs (and upstream gradients) live; torch, the oracle, runs on the CPU."""

import numpy as np

import plast

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def _pair(a, grad, device="cpu"):
    import torch

    p = plast.tensor(a, device=device, requires_grad=grad)
    t = torch.tensor(a, requires_grad=grad)
    return p, t


def compare(fn_p, fn_t, arrays, grad=(), *, dtype=np.float32, seed=0, tol=None, transform=None, device="cpu"):
    """arrays: numpy inputs; grad: indices of the inputs to differentiate. Returns (plast_out, torch_out)."""
    import torch

    tol = tol or TOL[dtype]
    pairs = [_pair(a, i in grad, device) for i, a in enumerate(arrays)]
    pin = [p for p, _ in pairs]
    tin = [t for _, t in pairs]
    if transform is not None:
        pin = [transform(i, x) for i, x in enumerate(pin)]
        tin = [transform(i, x) for i, x in enumerate(tin)]
    out_p, out_t = fn_p(*pin), fn_t(*tin)
    assert tuple(out_p.shape) == tuple(out_t.shape), f"shape {tuple(out_p.shape)} != {tuple(out_t.shape)}"
    assert out_p.dtype.name == str(out_t.dtype).replace("torch.", ""), (out_p.dtype, out_t.dtype)
    assert out_p.device.type == device, f"the result is on {out_p.device}, the inputs on {device}"
    np.testing.assert_allclose(out_p.detach().cpu().numpy(), out_t.detach().numpy(), **tol, err_msg="forward")
    if grad:
        rng = np.random.default_rng(seed + 1)
        up = rng.uniform(0.5, 1.5, tuple(out_t.shape)).astype(dtype)
        out_p.backward(plast.tensor(up, device=device))
        out_t.backward(torch.tensor(up))
        for i in grad:
            p, t = pairs[i]
            assert p.grad is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(
                p.grad.cpu().numpy(), t.grad.numpy(), **tol, err_msg=f"gradient of input {i}"
            )
    return out_p, out_t


def double_backward(fn_p, fn_t, arrays, grad, *, seed=0, tol=None, device="cpu"):
    """float64: first gradients with create_graph=True, then the gradient of <first grads, v> w.r.t. the inputs,
    compared with torch (that is, second derivatives)."""
    import torch

    tol = tol or dict(rtol=1e-8, atol=1e-9)
    rng = np.random.default_rng(seed + 7)
    pairs = [_pair(a, i in grad, device) for i, a in enumerate(arrays)]
    pin = [p for p, _ in pairs]
    tin = [t for _, t in pairs]
    out_p, out_t = fn_p(*pin), fn_t(*tin)
    assert out_p.device.type == device, f"the result is on {out_p.device}, the inputs on {device}"
    up = rng.uniform(0.5, 1.5, tuple(out_t.shape))
    up_p = plast.tensor(up, device=device, requires_grad=True)
    up_t = torch.tensor(up, requires_grad=True)
    gp = plast.autograd.grad(out_p, [pin[i] for i in grad], grad_outputs=up_p, create_graph=True)
    gt = torch.autograd.grad(out_t, [tin[i] for i in grad], grad_outputs=up_t, create_graph=True)
    for a, b in zip(gp, gt):
        np.testing.assert_allclose(
            a.detach().cpu().numpy(), b.detach().numpy(), **tol, err_msg="first gradient"
        )
    vs = [rng.uniform(-1, 1, tuple(b.shape)) for b in gt]
    sp = sum(
        ((a * plast.tensor(v, device=device)).sum() for a, v in zip(gp, vs)),
        start=plast.tensor(0.0, dtype=plast.float64, device=device),
    )
    st = sum((b * torch.tensor(v)).sum() for b, v in zip(gt, vs))
    wrt_p = [pin[i] for i in grad] + [up_p]
    wrt_t = [tin[i] for i in grad] + [up_t]
    hp = plast.autograd.grad(sp, wrt_p, allow_unused=True)
    ht = torch.autograd.grad(st, wrt_t, allow_unused=True)
    for j, (a, b) in enumerate(zip(hp, ht)):
        if b is None:
            assert a is None or np.allclose(a.detach().cpu().numpy(), 0), (
                f"second gradient {j}: torch has none"
            )
            continue
        if a is None:  # plast leaves out a gradient that is identically zero (linear ops); torch gives zeros
            assert np.allclose(b.detach().numpy(), 0), (
                f"second gradient {j}: plast has none, torch's is nonzero"
            )
            continue
        np.testing.assert_allclose(
            a.detach().cpu().numpy(), b.detach().numpy(), **tol, err_msg=f"second gradient {j}"
        )

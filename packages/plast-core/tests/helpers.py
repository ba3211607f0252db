"""helper_test_op in the style of tinygrad's test_ops: run one function on plast and on torch (the oracle) with
the same random inputs, compare forward values, then backward with a non-uniform upstream gradient and compare
every input's gradient."""

import numpy as np

import plast

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def helper_test_op(
    shapes,
    plast_fn,
    torch_fn=None,
    *,
    dtype=np.float32,
    low=-2.0,
    high=2.0,
    seed=0,
    grad=True,
    inputs=None,
    transform=None,
    tol=None,
    device="cpu",
):
    """shapes: input shapes. device: where plast's inputs (and the upstream gradient) live; torch runs on the
    CPU, the oracle. transform(name, t): optional view applied to both frameworks' inputs after creation
    (e.g. a transpose, to test non-contiguous inputs). Returns the plast output."""
    import torch

    torch_fn = torch_fn or plast_fn
    rng = np.random.default_rng(seed)
    arrays = inputs if inputs is not None else [rng.uniform(low, high, s).astype(dtype) for s in shapes]
    pt = [plast.tensor(a, device=device, requires_grad=grad) for a in arrays]
    tt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    pin, tin = pt, tt
    if transform is not None:
        pin = [transform(x) for x in pt]
        tin = [transform(x) for x in tt]
    out_p = plast_fn(*pin)
    out_t = torch_fn(*tin)
    tol = tol or TOL[dtype]
    assert out_p.device.type == device, f"the result is on {out_p.device}, the inputs on {device}"
    np.testing.assert_allclose(out_p.detach().cpu().numpy(), out_t.detach().numpy(), **tol, err_msg="forward")
    assert tuple(out_p.shape) == tuple(out_t.shape), f"shape {tuple(out_p.shape)} != {tuple(out_t.shape)}"
    if grad:
        up = rng.uniform(0.5, 1.5, tuple(out_t.shape)).astype(dtype)  # non-uniform upstream gradient
        out_p.backward(plast.tensor(up, device=device))
        out_t.backward(torch.tensor(up))
        for i, (a, b) in enumerate(zip(pt, tt)):
            ga = a.grad.cpu().numpy() if a.grad is not None else np.zeros(a.shape, dtype)
            gb = b.grad.numpy() if b.grad is not None else np.zeros(a.shape, dtype)
            np.testing.assert_allclose(ga, gb, **tol, err_msg=f"gradient of input {i}")
    return out_p

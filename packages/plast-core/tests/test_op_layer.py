"""The compiled op layer (ops/elementwise, _movement, _linalg, _reduce, _optim_args) and the engine paths it
feeds: results against torch, and the engine's promises that the compiled paths must keep (gradients written
straight into persistent memory, shared scalar constants, plan-cache hits)."""

import numpy as np
import pytest
import torch
from helpers import helper_test_op

import plast
from plast.autograd import engine as autograd  # backward the ordinary way: where .grad is written
from plast.errors import DeviceMismatchError, ShapeError
from plast.graph import realize


def test_signed_zero_constants_are_distinct():
    x = plast.tensor([1.0, 2.0])
    assert np.signbit((x * 0.0).numpy()).tolist() == [False, False]
    assert np.signbit((x * -0.0).numpy()).tolist() == [True, True]  # not the +0.0 constant cached just before
    assert np.signbit((x + -0.0).numpy()).tolist() == [False, False]


@pytest.mark.parametrize("scalar", [2, 2.5, True, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
def test_scalar_promotion_matches_torch(scalar, dtype):
    a = np.array([[1, 0, 3]], dtype=np.int64)
    p = plast.tensor(a).to(getattr(plast, dtype))
    t = torch.tensor(a).to(getattr(torch, dtype))
    for pf, tf in (
        (lambda x: x + scalar, lambda x: x + scalar),
        (lambda x: scalar * x, lambda x: scalar * x),
    ):
        if dtype == "bool" and isinstance(scalar, bool):
            continue  # bool + bool is logical in plast (torch returns bool too, but via a different rule)
        out_p, out_t = pf(p), tf(t)
        assert str(out_p.dtype).split(".")[-1] == str(out_t.dtype).split(".")[-1], (dtype, scalar)
        np.testing.assert_allclose(out_p.numpy(), out_t.numpy())


def test_transpose_of_a_0d_tensor_is_itself():
    x = plast.tensor(3.0)
    assert x.transpose(0, -1) is x
    assert torch.tensor(3.0).transpose(0, -1).shape == ()


def test_movement_errors_are_clear():
    x = plast.ones(2, 3)
    with pytest.raises(ShapeError, match="only one dimension can be -1"):
        x.view(-1, -1)
    with pytest.raises(ShapeError, match="invalid for input of size 6"):
        x.reshape(4, 2)
    with pytest.raises(ShapeError, match="not a permutation"):
        x.permute(0, 0)
    with pytest.raises(IndexError, match="out of range"):
        x.transpose(0, 2)
    with pytest.raises(ShapeError, match="must match"):
        x.expand(3, 3)
    with pytest.raises(ShapeError, match="not compatible"):
        x.t().view(6)


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (2, 1, 4, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_any_rank_matches_torch(shape, bias, device):
    """Inputs of more than 2 dims run as one 2-D product (one GEMM per gradient)."""
    shapes = [shape, (6, 3)] + ([(6,)] if bias else [])

    def fp(x, w, *b):
        return plast.linear(x, w, b[0] if b else None)

    def ft(x, w, *b):
        return torch.nn.functional.linear(x, w, b[0] if b else None)

    helper_test_op(shapes, fp, ft, device=device)
    helper_test_op(shapes, fp, ft, dtype=np.float64, device=device)


def test_linear_non_contiguous_input(device):
    helper_test_op(
        [(3, 4, 5), (6, 5)],
        lambda x, w: plast.linear(x.transpose(0, 1), w),
        lambda x, w: torch.nn.functional.linear(x.transpose(0, 1), w),
        device=device,
    )


def test_matmul_and_addmm_gradients_in_the_weights_layout(device):
    helper_test_op([(4, 3), (5, 3)], lambda x, w: x @ w.T, lambda x, w: x @ w.T, device=device)
    helper_test_op([(4, 3), (3, 5)], lambda x, w: x @ w, lambda x, w: x @ w, device=device)
    helper_test_op(
        [(5,), (4, 3), (5, 3)],
        lambda b, x, w: plast.addmm(b, x, w.T, beta=0.5, alpha=2.0),
        lambda b, x, w: torch.addmm(b, x, w.T, beta=0.5, alpha=2.0),
        device=device,
    )


def test_gradients_are_written_in_place_without_copies(monkeypatch):
    """A Linear layer's weight and bias gradients reach .grad through a transpose and a reshape; both are
    computed straight into persistent memory (no copy after the realize), contiguous, and right."""
    copies = []
    orig = autograd.persistent_copy
    monkeypatch.setattr(autograd, "persistent_copy", lambda t: copies.append(t) or orig(t))
    rng = np.random.default_rng(0)
    xs, ws, bs = rng.standard_normal((4, 3)), rng.standard_normal((6, 3)), rng.standard_normal(6)
    w = plast.tensor(ws.astype(np.float32), requires_grad=True)
    b = plast.tensor(bs.astype(np.float32), requires_grad=True)
    w1 = plast.tensor(rng.standard_normal((1, 6)).astype(np.float32), requires_grad=True)
    x = plast.tensor(xs.astype(np.float32))
    loss = plast.linear(plast.linear(x, w, b).relu(), w1).sum()
    loss.backward()
    assert copies == []
    for p in (w, b, w1):
        assert p.grad.is_contiguous() and p.grad._offset == 0
    tw = torch.tensor(ws.astype(np.float32), requires_grad=True)
    tb = torch.tensor(bs.astype(np.float32), requires_grad=True)
    tw1 = torch.tensor(w1.detach().numpy(), requires_grad=True)
    torch.nn.functional.linear(
        torch.nn.functional.linear(torch.tensor(x.numpy()), tw, tb).relu(), tw1
    ).sum().backward()
    for p, t in ((w, tw), (b, tb), (w1, tw1)):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    # the gradients survive a transient reset (persistent memory) and accumulate on a second backward
    plast.reset_transient_arenas()
    loss2 = plast.linear(plast.linear(x, w, b).relu(), w1).sum()
    loss2.backward()
    torch.nn.functional.linear(
        torch.nn.functional.linear(torch.tensor(x.numpy()), tw, tb).relu(), tw1
    ).sum().backward()
    for p, t in ((w, tw), (b, tb), (w1, tw1)):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_one_gradient_shared_by_two_leaves_is_not_aliased():
    a = plast.ones(3, requires_grad=True)
    b = plast.ones(3, requires_grad=True)
    (a + b).sum().backward()
    assert a.grad.tolist() == b.grad.tolist() == [1.0, 1.0, 1.0]
    with plast.no_grad():
        a.grad.mul_(5.0)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_backward_computes_the_held_loss_in_the_same_realize():
    x = plast.tensor([[1.0, 2.0]], requires_grad=True)
    loss = ((x * 3.0) ** 2).mean()
    before = realize.scheduler_stats()["realizes"]
    loss.backward()
    assert realize.scheduler_stats()["realizes"] - before == 1
    assert loss.is_realized and loss.item() == pytest.approx(22.5)


def test_plan_cache_hits_rebuild_fused_groups():
    """The second identical step is a plan-cache hit, and its fused groups (rebuilt from positions) compute the
    same values as the first step's."""
    from plast.graph import fusion

    if not fusion.enabled() or not realize._cache_enabled():
        pytest.skip("needs fusion and the plan cache (PLAST_FUSION / PLAST_PLAN_CACHE are off)")
    rng = np.random.default_rng(1)
    w = plast.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    b = plast.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True)
    x = plast.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    grads = []
    hits = []
    for _ in range(2):
        w.grad = b.grad = None
        hits.append(realize.scheduler_stats()["hits"])
        with realize.watch_fusions() as fired:
            ((plast.linear(x, w, b).relu() * 2.0 + 1.0) ** 2).mean().backward()
        grads.append((w.grad.numpy().copy(), b.grad.numpy().copy(), list(fired)))
        plast.reset_transient_arenas()
    assert grads[0][2] == grads[1][2] and grads[0][2]
    assert realize.scheduler_stats()["hits"] > hits[1]  # the second step's realize was a hit
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def test_optimizer_argument_checks():
    p = plast.ones(2)
    h = plast.tensor([0.1, 0.0, 0.0, 0.0], dtype=plast.float64)
    with pytest.raises(TypeError, match="must be a list of tensors"):
        plast.sgd_update_(p, [plast.ones(2)], None, h)
    with pytest.raises(ValueError, match="has 2 tensors but there are 1 parameters"):
        plast.sgd_update_([p], [plast.ones(2), plast.ones(2)], None, h)
    with pytest.raises(ShapeError, match=r"grads\[0\] has shape \(3,\)"):
        plast.sgd_update_([p], [plast.ones(3)], None, h)
    with pytest.raises(ValueError, match="appears twice"):
        plast.sgd_update_([p, p], [plast.ones(2), plast.ones(2)], None, h)
    with pytest.raises(ShapeError, match="hyper must hold 4 numbers"):
        plast.sgd_update_([p], [plast.ones(2)], None, plast.tensor([0.1], dtype=plast.float64))


def test_binary_device_mismatch_message(monkeypatch):
    import fake_cuda

    with fake_cuda.installed(monkeypatch):
        a = plast.ones(2)
        g = plast.empty(2, device="cuda")  # (the fake driver allocates but runs no kernels)
        with pytest.raises(DeviceMismatchError, match="add: inputs are on"):
            a + g
        with pytest.raises(DeviceMismatchError, match="matmul: inputs are on"):
            a @ g

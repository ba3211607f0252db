"""In-place ops and version counters."""

import numpy as np
import pytest

import plast


def test_inplace_arithmetic_on_leaves_writes_memory():
    x = plast.ones(3)
    st = x._storage
    x.add_(2).mul_(3)
    x -= 1
    x /= 2
    assert x.tolist() == [4.0, 4.0, 4.0] and x._storage is st
    assert st.version == 4


def test_views_see_inplace_writes():
    z = plast.zeros(2, 3)
    z.view(6).fill_(3)
    assert z.tolist() == [[3.0] * 3] * 2
    z.T.zero_()
    assert z.tolist() == [[0.0] * 3] * 2


def test_nan_fill():
    x = plast.tensor([float("nan"), 1.0])
    x.fill_(2.0)
    assert x.tolist() == [2.0, 2.0]


def test_leaf_requiring_grad_needs_no_grad():
    w = plast.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w.add_(1)
    with plast.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 3.0] and w.requires_grad and w.is_leaf


def test_modifying_saved_input_raises_at_backward():
    w = plast.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (w * w).sum()
    with plast.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_modifying_unsaved_input_is_fine():
    w = plast.tensor([1.0, 2.0], requires_grad=True)
    y = (w + 1).sum()  # add's backward does not read w
    with plast.no_grad():
        w.mul_(2)
    y.backward()
    assert w.grad.tolist() == [1.0, 1.0]


def test_inplace_in_graph_keeps_gradient_correct():
    import torch

    a = plast.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.add_(a * a)
    b.mul_(a)
    b.sum().backward()
    at = torch.tensor([1.0, 2.0], requires_grad=True)
    bt = at * 2
    bt.add_(at * at)
    bt.mul_(at)
    bt.sum().backward()
    np.testing.assert_allclose(b.detach().numpy(), bt.detach().numpy())
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy())


def test_copy_and_shape_errors():
    x = plast.zeros(2, 3)
    x.copy_(plast.arange(3))
    assert x.tolist() == [[0.0, 1.0, 2.0]] * 2 and x.dtype == plast.float32
    with pytest.raises(plast.ShapeError):
        plast.zeros(3).add_(plast.ones(2, 3))
    with pytest.raises(RuntimeError, match="float"):
        plast.tensor([1, 2]).div_(2)


def test_random_inplace_is_seeded():
    plast.manual_seed(3)
    a = plast.empty(100).uniform_(-1, 1).numpy().copy()
    b = plast.empty(100).normal_(2.0, 0.5).numpy().copy()
    plast.manual_seed(3)
    np.testing.assert_array_equal(plast.empty(100).uniform_(-1, 1).numpy(), a)
    np.testing.assert_array_equal(plast.empty(100).normal_(2.0, 0.5).numpy(), b)
    assert -1 <= a.min() and a.max() < 1


def test_pending_reads_see_the_value_before_an_inplace_write():
    x = plast.tensor([1.0, 2.0])
    y = x * 2  # recorded, not computed
    v = x.view(2, 1) + 0
    x.add_(1)
    assert y.tolist() == [2.0, 4.0]
    assert v.tolist() == [[1.0], [2.0]]
    assert x.tolist() == [2.0, 3.0]


def test_detached_clone_is_persistent_and_eager():
    x = plast.tensor([1.0, 2.0])
    y = x * 3
    c = y.detach().clone()
    plast.reset_transient_arenas()
    assert c.tolist() == [3.0, 6.0]
    with pytest.raises(plast.StaleTensorError):
        y.tolist()


def test_inplace_on_lazy_tensor_keeps_earlier_readers_on_the_old_value():
    x = plast.arange(3).float()  # not computed yet
    y = x * 2
    x.add_(1)
    assert y.tolist() == [0.0, 2.0, 4.0]
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_write_through_a_view_of_a_lazy_tensor_reaches_the_base():
    x = plast.arange(3).float()
    v = x[1:]
    v.add_(10)
    assert x.tolist() == [0.0, 11.0, 12.0]


def test_setitem_in_graph_keeps_recorded_readers_and_gradients():
    import torch

    a = plast.ones(3, requires_grad=True)
    y = a * 1.5
    z = y * 2
    y[0] = 5.0
    assert z.tolist() == [3.0, 3.0, 3.0]
    (z.sum() + y.sum()).backward()
    at = torch.ones(3, requires_grad=True)
    yt = at * 1.5
    zt = yt * 2
    yt[0] = 5.0
    (zt.sum() + yt.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy())


def test_copy_from_a_tensor_that_requires_grad_under_no_grad_copies_values():
    # regression: copy_'s cast and expand are no-ops for a same-shaped source, so the in-place machinery got the
    # source itself back, saw requires_grad, and rebound the destination to the source's memory (an alias that
    # later updates of either changed both; DiLoCo loading its global copy into the model hit it)
    dst = plast.zeros(3)
    src = plast.ones(3).requires_grad_()
    with plast.no_grad():
        dst.copy_(src)
        src.add_(1)
    assert dst.tolist() == [1.0, 1.0, 1.0]
    assert not dst.requires_grad and dst._storage is not src._storage
    p = plast.zeros(3).requires_grad_()
    with plast.no_grad():
        p.copy_(src)
        src.add_(1)
    assert p.tolist() == [2.0, 2.0, 2.0] and p.requires_grad

"""Lazy ops on memory numpy shares (.numpy(), from_numpy) read the values of the moment they were called, as in
torch: numpy writes are invisible to the graph, so such ops must not be deferred past them."""

import numpy as np
import torch

import plast


def same(p, t):
    np.testing.assert_array_equal(np.asarray(p.detach().numpy()), t.detach().numpy())


def test_write_through_numpy_view_after_op():
    t, tt = plast.ones(4), torch.ones(4)
    v, vt = t.numpy(), tt.numpy()
    y, yt = t * 2, tt * 2
    v[:] = 9
    vt[:] = 9
    same(y, yt)
    same(t, tt)


def test_write_to_from_numpy_array_after_op():
    a, at = np.ones(4, np.float32), np.ones(4, np.float32)
    y, yt = (plast.from_numpy(a) * 2).sum(), (torch.from_numpy(at) * 2).sum()
    a[:] = 7
    at[:] = 7
    assert y.item() == yt.item() == 8.0


def test_op_recorded_before_numpy_call_reads_old_values():
    t, tt = plast.arange(6, dtype=plast.float32), torch.arange(6, dtype=torch.float32)
    y, yt = (t + 1) * t, (tt + 1) * tt
    v, vt = t.numpy(), tt.numpy()
    v[2:] = -1
    vt[2:] = -1
    same(y, yt)


def test_inplace_numpy_writes_between_ops():
    a = np.arange(5, dtype=np.float32)
    at = a.copy()
    p, t = plast.from_numpy(a), torch.from_numpy(at)
    outs, outs_t = [], []
    for k in range(3):
        outs.append(p * p + k)
        outs_t.append(t * t + k)
        a += 1
        at += 1
        p.mul_(2)  # plast and numpy both write the same memory
        t.mul_(2)
        np.testing.assert_array_equal(a, at)
    for o, ot in zip(outs, outs_t):
        same(o, ot)
    same(p.sum(), t.sum())


def test_view_of_shared_tensor():
    base, bt = plast.zeros(2, 3), torch.zeros(2, 3)
    v, vt = base.numpy(), bt.numpy()
    row, rt = base[1], bt[1]
    col, ct = base.T[2], bt.T[2]
    y, yt = row + 1, rt + 1
    z, zt = col * 3, ct * 3
    v[1, :] = 5
    vt[1, :] = 5
    same(y, yt)
    same(z, zt)
    same(row, rt)  # the view itself aliases the memory: it shows the write
    same(row * 2, rt * 2)


def test_reduction_chain_on_from_numpy_with_grad():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    at = a.copy()
    x = plast.from_numpy(a).requires_grad_()
    xt = torch.from_numpy(at).requires_grad_()
    loss, loss_t = (x * x).sum(), (xt * xt).sum()
    assert loss.item() == loss_t.item()
    loss.backward()
    loss_t.backward()
    same(x.grad, xt.grad)


def test_ops_are_eager_only_while_numpy_shares_the_memory():
    t = plast.ones(4)
    assert not (t * 2).is_realized
    v = t.numpy()
    w = v[1:]  # a view of the exported array keeps the memory shared
    del v
    assert (t * 3).is_realized
    del w
    assert not (t * 2).is_realized  # no array shares it any more: lazy (fusible) again
    assert t.numpy().sum() == 4  # a temporary array leaves nothing behind either
    assert not (t * 2).is_realized
    a = np.ones(3, np.float32)
    p = plast.from_numpy(a)
    assert (p + 1).is_realized  # the caller still holds `a`
    w = a[1:]
    del a
    assert (p + 1).is_realized  # a view of it can write the memory too
    del w
    assert not (p + 1).is_realized  # plast holds the array alone: lazy again
    q = plast.from_numpy(np.ones(3, np.float32))  # a collated batch: nobody else ever held the array
    assert not (q * 2).is_realized
    v = q.numpy()
    assert (q * 2).is_realized
    v[:] = 5
    y = q * 2
    del v
    assert y.tolist() == [10.0, 10.0, 10.0]


def test_bfloat16_numpy_export_keeps_dtype_and_shares():
    t = plast.ones(3, dtype=plast.bfloat16)
    v = t.numpy()
    assert v.dtype.name == "bfloat16"
    y = t * 2
    v[:] = 5
    assert y.float().tolist() == [2.0, 2.0, 2.0]
    assert t.float().tolist() == [5.0, 5.0, 5.0]

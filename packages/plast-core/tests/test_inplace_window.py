"""In-place window writes (graph/inplace.py ``_write_window``): ``t[i] = v`` on a tensor outside any graph
writes just the window into t's memory, with the same results as the copying path, in eager and under jit."""

import numpy as np
import pytest
import torch

import plast
from plast.kernels.cpu import kernels_indexing as kix
from plast.ops import indexing


@pytest.fixture
def window_calls(monkeypatch):
    calls = []
    orig = indexing.INDEX_PUT.window_kernels["cpu"]

    def spy(node, inputs, outputs):
        calls.append(node.args)
        return orig(node, inputs, outputs)

    monkeypatch.setitem(indexing.INDEX_PUT.window_kernels, "cpu", spy)
    return calls


CASES = [
    (lambda t, v: t.__setitem__((slice(None), 2), v), (4, 5), (4,)),
    (lambda t, v: t.__setitem__((1, slice(1, 4)), v), (4, 5), (3,)),
    (lambda t, v: t.__setitem__((slice(None), slice(None), 3), v), (2, 3, 6), (2, 3)),
    (lambda t, v: t.__setitem__((0,), v), (4, 5), ()),  # a scalar broadcast over the row
]


@pytest.mark.parametrize("write,shape,vshape", CASES)
def test_window_write_matches_torch_and_takes_the_window_path(write, shape, vshape, window_calls):
    rng = np.random.default_rng(0)
    base = rng.standard_normal(shape).astype(np.float32)
    vals = rng.standard_normal(vshape).astype(np.float32)
    p, t = plast.tensor(base), torch.tensor(base)
    view_before = p[0]  # a view of p's memory: must see the write, as in torch
    mem = p._storage
    write(p, plast.tensor(vals))
    write(t, torch.tensor(vals))
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    np.testing.assert_array_equal(view_before.numpy(), t[0].numpy())
    assert p._storage is mem and window_calls  # written in place by the window kernel


def test_kv_cache_row_with_a_position_tensor(window_calls):
    cache = plast.zeros(1, 2, 4, 8)
    ref = torch.zeros(1, 2, 4, 8)
    for pos in range(8):
        row = np.full((1, 2, 4, 1), pos + 1.0, dtype=np.float32)
        cache[:, :, :, plast.tensor([pos])] = plast.tensor(row)
        ref[:, :, :, torch.tensor([pos])] = torch.tensor(row)
    np.testing.assert_array_equal(cache.numpy(), ref.numpy())
    assert len(window_calls) == 8


def test_reads_recorded_before_the_write_see_the_old_value():
    t = plast.arange(6, dtype=plast.float32)
    before = t * 1  # recorded, not computed yet
    t[2] = 100.0
    assert before.tolist() == [0, 1, 2, 3, 4, 5]
    assert t.tolist() == [0, 1, 100, 3, 4, 5]


def test_a_value_from_the_same_memory_takes_the_copying_path(window_calls):
    p = plast.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    p[:, 1:] = p[:, :-1]  # overlapping source and destination
    t[:, 1:] = t[:, :-1].clone()
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    assert not window_calls


def test_bad_index_raises_and_leaves_the_tensor_unchanged():
    p = plast.ones(3, 4)
    with pytest.raises(IndexError, match="out of bounds"):
        p[:, plast.tensor([7])] = plast.zeros(3, 1)
    assert p.numpy().tolist() == np.ones((3, 4)).tolist()


def test_inside_a_graph_the_tensor_is_rebound_not_written(window_calls):
    w = plast.ones(3, requires_grad=True)
    x = w * 2
    x[1] = 0.0
    x.sum().backward()
    assert w.grad.tolist() == [2.0, 0.0, 2.0] and not window_calls


def test_window_writes_replay_under_jit():
    cache = plast.zeros(2, 5)

    @plast.jit
    def put(pos, row):
        cache[:, pos] = row
        return cache.sum()

    for i in range(5):
        put(plast.tensor([i]), plast.full((2, 1), float(i + 1)))
    np.testing.assert_array_equal(cache.numpy(), np.tile(np.arange(1, 6, dtype=np.float32), (2, 1)))
    assert put.replays >= 3


def test_one_element_index_key_is_basic_slicing():
    assert kix._put_key(2, (3, 4), (1,), (plast.tensor([2]),), True) == (slice(None), slice(2, 3))
    assert kix._put_key(2, (3, 4), (1,), (plast.tensor(-1),), True) == (slice(None), 3)
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 4"):
        kix._put_key(2, (3, 4), (1,), (plast.tensor([4]),), True)

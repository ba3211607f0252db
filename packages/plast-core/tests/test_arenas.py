"""Arenas (DESIGN §3): size classes, reuse, resets, stale reads and exhaustion."""

import numpy as np
import pytest

import plast
from plast.memory.arena import Arena


def test_blocks_are_reused_by_size_class():
    a = Arena("transient", True)
    s = a.new(1000)
    addr = s.address
    del s
    s2 = a.new(900)  # same size class
    assert s2.address == addr
    assert a.stats()["os_allocations"] == 1


def test_reset_makes_old_storage_stale():
    a = Arena("transient", True)
    s = a.new(64)
    a.reset()
    assert s.is_stale
    with pytest.raises(plast.StaleTensorError, match="detach\\(\\).clone\\(\\)"):
        s.check()
    assert a.stats()["in_use_bytes"] == 0


def test_exhaustion_raises_with_sizes():
    a = Arena("persistent", False, 1 << 20, grow=False)
    keep = a.new(900_000)
    with pytest.raises(plast.ArenaExhaustedError, match="requested") as e:
        a.new(500_000)
    assert isinstance(e.value, MemoryError)
    del keep


def test_stale_tensor_read_raises_and_leaves_survive():
    x = plast.tensor([1.0, 2.0, 3.0])
    y = x * 2
    y_val = y.tolist()
    plast.reset_transient_arenas()
    with pytest.raises(plast.StaleTensorError):
        y.tolist()
    assert x.tolist() == [1.0, 2.0, 3.0]  # leaves are persistent
    assert (x * 2).tolist() == y_val
    assert "stale" in repr(y)


def test_arena_scope_and_stats():
    x = plast.ones(1000)
    with plast.arena_scope():
        y = plast.forward(x + 1)
        assert plast.arena_stats()["cpu"]["transient"]["in_use_bytes"] >= 4000
    assert y._storage.is_stale


def test_init_arenas_grow_false():
    try:
        plast.init_arenas(
            device=plast.Device.CPU, persistent_bytes=1 << 20, transient_bytes=1 << 20, grow=False
        )
        with pytest.raises(plast.ArenaExhaustedError, match="persistent arena is full"):
            plast.zeros(300_000)
        x = plast.zeros(200_000)  # 800 kB of the 1 MiB persistent arena
        y = plast.forward(x + 1)  # 800 kB of the transient arena
        with pytest.raises(plast.ArenaExhaustedError, match="transient arena is full"):
            plast.forward(x + 2)
        del y
        assert plast.forward(x + 2).tolist()[:2] == [2.0, 2.0]  # y's block came back
    finally:
        plast.init_arenas(device=plast.Device.CPU)


def test_transient_numpy_is_a_copy_persistent_is_a_view():
    x = plast.tensor(np.arange(4, dtype=np.float32))
    assert np.shares_memory(x.numpy(), x.numpy())
    y = x + 0
    a, b = y.numpy(), y.numpy()
    assert not np.shares_memory(a, b)


def test_constant_memory_without_resets():
    x = plast.randn(256, 256)
    for _ in range(20):
        (x * 2 + 1).tolist()
    before = plast.arena_stats()["cpu"]["transient"]["reserved_bytes"]
    for _ in range(200):
        (x * 2 + 1).tolist()
    assert plast.arena_stats()["cpu"]["transient"]["reserved_bytes"] == before


def test_reset_returns_memory_a_one_off_borrowed():
    a = Arena("transient", True)
    big = [a.new(8 << 20) for _ in range(4)]  # a one-off: e.g. a jit trace or a big evaluation
    del big
    a.reset()  # this generation needed it: kept
    before = a.stats()["reserved_bytes"]
    s = a.new(1000)
    del s
    a.reset()
    a.reset()  # two quiet generations later the big chunks go back to the OS
    after = a.stats()
    assert after["reserved_bytes"] < before and after["os_frees"] > 0


def test_steady_loop_keeps_its_chunks():
    a = Arena("transient", True)
    for _ in range(3):
        xs = [a.new(3 << 20) for _ in range(3)]
        del xs
        a.reset()
    allocs = a.stats()["os_allocations"]
    for _ in range(20):
        xs = [a.new(3 << 20) for _ in range(3)]
        del xs
        a.reset()
    assert a.stats()["os_allocations"] == allocs and a.stats()["os_frees"] == 0


def test_jit_replay_refuses_a_captured_tensor_freed_by_reset():
    w = plast.forward(plast.ones(3) * 2)  # computed before the call: transient, captured by the function

    @plast.jit
    def f(x):
        return x * w

    f(plast.ones(3))
    assert f(plast.ones(3)).tolist() == [2.0, 2.0, 2.0]
    plast.reset_transient_arenas()
    with pytest.raises(plast.StaleTensorError):
        f(plast.ones(3))

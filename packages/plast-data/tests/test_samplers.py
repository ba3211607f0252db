"""Tests for plast.data samplers: order, determinism, resumable state, DistributedSampler shards."""

import json

import numpy as np
import pytest

import plast
from plast.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
)


def gen(seed):
    return plast.Generator().manual_seed(seed)


def test_sequential():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert len(SequentialSampler(range(4))) == 4


def test_random_is_a_seeded_permutation():
    a = list(RandomSampler(range(100), generator=gen(7)))
    b = list(RandomSampler(range(100), generator=gen(7)))
    c = list(RandomSampler(range(100), generator=gen(8)))
    assert a == b and a != c
    assert sorted(a) == list(range(100))
    assert all(type(i) is int for i in a)


def test_random_epochs_differ_and_replay_from_the_seed():
    g = gen(1)
    s = RandomSampler(range(50), generator=g)
    e1, e2 = list(s), list(s)
    assert e1 != e2 and sorted(e2) == list(range(50))
    s2 = RandomSampler(range(50), generator=gen(1))
    assert [list(s2), list(s2)] == [e1, e2]


def test_random_global_generator_follows_manual_seed():
    plast.manual_seed(123)
    a = list(RandomSampler(range(30)))
    plast.manual_seed(123)
    assert list(RandomSampler(range(30))) == a


def test_random_num_samples_and_replacement():
    s = RandomSampler(range(10), num_samples=25, generator=gen(0))
    out = list(s)
    assert len(out) == len(s) == 25
    assert sorted(out[:10]) == list(range(10)) and sorted(out[10:20]) == list(range(10))
    assert len(set(out[20:])) == 5
    r = list(RandomSampler(range(5), replacement=True, num_samples=200, generator=gen(0)))
    assert len(r) == 200 and set(r) == set(range(5))
    with pytest.raises(ValueError):
        RandomSampler(range(5), num_samples=0)
    with pytest.raises(TypeError):
        RandomSampler(range(5), replacement=1)


@pytest.mark.parametrize("generator", [True, False])
def test_random_state_resumes_mid_epoch(generator):
    plast.manual_seed(5)
    s = RandomSampler(range(40), generator=gen(3) if generator else None)
    first = list(s)
    it = iter(s)
    head = [next(it) for _ in range(13)]
    sd = json.loads(json.dumps(s.state_dict()))  # plain ints: survives JSON
    tail = list(it)
    s2 = RandomSampler(range(40), generator=gen(99) if generator else None)
    s2.load_state_dict(sd)
    assert list(s2) == tail
    assert first != head + tail
    if generator:
        # after the resumed epoch both generators are in the same place: the next epochs agree
        assert list(s2) == list(s)


def test_random_state_between_epochs_pins_the_next_epoch():
    plast.manual_seed(0)
    s = RandomSampler(range(20))
    sd = s.state_dict()  # draws the next epoch's seed now
    expected = list(s)
    s2 = RandomSampler(range(20))
    s2.load_state_dict(sd)
    assert list(s2) == expected


def test_subset_random_sampler():
    out = list(SubsetRandomSampler([10, 20, 30, 40], generator=gen(0)))
    assert sorted(out) == [10, 20, 30, 40]


def test_batch_sampler_and_resume():
    bs = BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]] and len(bs) == 4
    bd = BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=True)
    assert list(bd) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] and len(bd) == 3
    rs = BatchSampler(RandomSampler(range(23), generator=gen(4)), batch_size=5, drop_last=False)
    it = iter(rs)
    head = [next(it), next(it)]
    sd = rs.state_dict()
    tail = list(it)
    rs2 = BatchSampler(RandomSampler(range(23), generator=gen(4)), batch_size=5, drop_last=False)
    rs2.load_state_dict(sd)
    assert list(rs2) == tail
    assert sorted(sum(head + tail, [])) == list(range(23))
    with pytest.raises(ValueError):
        BatchSampler(range(3), batch_size=0, drop_last=False)


@pytest.mark.parametrize("n,replicas", [(10, 3), (7, 4), (12, 4), (2, 5), (101, 8)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_partitions(n, replicas, shuffle):
    shards = [
        list(DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle, seed=1))
        for r in range(replicas)
    ]
    per = -(-n // replicas)
    assert all(len(s) == per for s in shards)
    flat = sum(shards, [])
    assert set(flat) == set(range(n))  # every index is read
    assert len(flat) - n == per * replicas - n  # only the padding repeats
    # with drop_last: disjoint, equal and as long as possible
    dl = [
        list(DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=shuffle, drop_last=True))
        for r in range(replicas)
    ]
    flat = sum(dl, [])
    assert len(flat) == len(set(flat)) == (n // replicas) * replicas
    assert len({len(s) for s in dl}) == 1


def test_distributed_matches_torch_without_shuffle():
    torch_data = pytest.importorskip("torch.utils.data")
    for n, replicas, drop in [(10, 3, False), (10, 3, True), (2, 5, False), (13, 4, True)]:
        for r in range(replicas):
            ours = list(DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop))
            theirs = list(torch_data.DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop))
            assert ours == theirs, (n, replicas, r, drop)


def test_distributed_set_epoch_and_resume():
    s = DistributedSampler(range(50), num_replicas=2, rank=1, seed=3)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    assert e0 != e1 and len(e0) == 25
    it = iter(s)
    head = [next(it) for _ in range(10)]
    sd = s.state_dict()
    s2 = DistributedSampler(range(50), num_replicas=2, rank=1)
    s2.load_state_dict(sd)
    assert head + list(s2) == e1
    with pytest.raises(ValueError):
        DistributedSampler(range(5), num_replicas=2, rank=2)


def test_randperm_is_uniform_enough():
    # a permutation per seed; the first position should hit every index over many seeds
    firsts = {next(iter(RandomSampler(range(8), generator=gen(s)))) for s in range(200)}
    assert firsts == set(range(8))
    counts = np.bincount(
        [list(RandomSampler(range(4), generator=gen(s)))[0] for s in range(400)], minlength=4
    )
    assert counts.min() > 60


def _drawn_at_once(n, total, replacement, seed):
    """What RandomSampler's epoch was before lazy drawing: every index in one go from the generator."""
    g = gen(seed)
    if replacement:
        out = plast.randint(0, n, (total,), generator=g).numpy()
    else:
        perms = [np.argsort(plast.randint(0, 1 << 62, (n,), generator=g).numpy(), kind="stable")]
        while sum(map(len, perms)) < total:
            perms.append(np.argsort(plast.randint(0, 1 << 62, (n,), generator=g).numpy(), kind="stable"))
        out = np.concatenate(perms)[:total]
    return out.tolist(), g.get_state().numpy().tolist()


@pytest.mark.parametrize(
    "n, total, replacement",
    [(5, 200, True), (10, 25, False), (7, 3 * 65536 + 5, True), (1000, 2 * 65536, True), (300, 1000, False)],
)
def test_lazy_draws_are_the_sequence_drawn_at_once(n, total, replacement):
    expected, state_after = _drawn_at_once(n, total, replacement, seed=11)
    g = gen(11)
    s = RandomSampler(range(n), replacement=replacement, num_samples=total, generator=g)
    assert list(s) == expected
    assert g.get_state().numpy().tolist() == state_after  # the generator moves on as before
    batches = list(BatchSampler(RandomSampler(range(n), replacement, total, gen(11)), 1000, False))
    assert sum(batches, []) == expected


def test_replacement_with_a_huge_num_samples_is_lazy_and_resumable():
    import tracemalloc

    total = 10**10  # drawn at once: 80 GB of indices
    s = RandomSampler(range(50), replacement=True, num_samples=total, generator=gen(4))
    assert len(s) == total
    tracemalloc.start()
    it = s._chunks(4096)  # as BatchSampler reads it
    head = [next(it) for _ in range(40)]  # 40 batches, across 2 blocks of 65,536
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20
    assert all(len(b) == 4096 and all(0 <= i < 50 for i in b) for b in head)
    assert sum(head, []) == _drawn_at_once(50, 40 * 4096, True, seed=4)[0]  # the prefix of the same sequence
    sd = json.loads(json.dumps(s.state_dict()))
    nxt = next(it)
    s2 = RandomSampler(range(50), replacement=True, num_samples=total, generator=gen(0))
    s2.load_state_dict(sd)
    assert next(s2._chunks(4096)) == nxt
    far = RandomSampler(range(50), replacement=True, num_samples=total, generator=gen(0))
    far.load_state_dict({"version": 1, "generator_state": sd["generator_state"], "yielded": total - 3})
    # the last 3 of 10**10, without drawing the others (list(far) would size a list by len(far))
    tail = list(iter(far))
    assert len(tail) == 3 and all(0 <= i < 50 for i in tail)
    loader_batches = BatchSampler(RandomSampler(range(50), True, total, gen(4)), 4096, drop_last=True)
    assert len(loader_batches) == total // 4096
    assert next(iter(loader_batches)) == head[0]

"""Tests for plast.data datasets: TensorDataset, Subset, ConcatDataset, ChainDataset, random_split."""

import doctest
import pickle

import numpy as np
import pytest

import plast
import plast.data.collate
import plast.data.dataloader
import plast.data.dataset
import plast.data.sampler
from plast.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)


def test_tensor_dataset_rows():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    ds = TensorDataset(plast.tensor(x), plast.arange(4))
    assert len(ds) == 4
    a, b = ds[2]
    assert a.tolist() == x[2].tolist() and b.item() == 2 and b.dtype == plast.int64
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(plast.zeros(3, 2), plast.zeros(4))
    with pytest.raises(ValueError):
        TensorDataset()


def test_tensor_dataset_gather_is_one_op_per_tensor(monkeypatch):
    calls = []
    orig = plast.data.dataset._gather_rows

    def counting(array, idx):
        calls.append(len(idx))
        return orig(array, idx)

    monkeypatch.setattr(plast.data.dataset, "_gather_rows", counting)
    ds = TensorDataset(plast.tensor(np.arange(20.0, dtype=np.float32).reshape(10, 2)), plast.arange(10))
    cols = ds._gather_batch([3, 1, 7])
    assert calls == [3, 3]
    assert cols[0].tolist() == [[6.0, 7.0], [2.0, 3.0], [14.0, 15.0]] and cols[1].tolist() == [3, 1, 7]


def test_tensor_dataset_pickles_as_numpy():
    ds = TensorDataset(plast.tensor(np.ones((3, 2), np.float32)), np.arange(3))
    state = ds.__getstate__()
    assert all(isinstance(c, np.ndarray) for c in state["columns"])
    back = pickle.loads(pickle.dumps(ds))
    assert isinstance(back.tensors[0], plast.Tensor) and isinstance(back.tensors[1], np.ndarray)
    assert back[1][0].tolist() == [1.0, 1.0]


def test_subset_and_concat():
    base = list("abcdefg")
    sub = Subset(base, [6, 0, 3])
    assert len(sub) == 3 and [sub[i] for i in range(3)] == ["g", "a", "d"]
    assert sub.__getitems__([2, 0]) == ["d", "g"]
    cat = ConcatDataset([base, sub])
    assert len(cat) == 10 and cat[7] == "g" and cat[-1] == "d" and cat[0] == "a"
    with pytest.raises(IndexError):
        cat[10]

    class D(Dataset):
        def __getitem__(self, i):
            return i

        def __len__(self):
            return 2

    both = D() + D()
    assert isinstance(both, ConcatDataset) and [both[i] for i in range(4)] == [0, 1, 0, 1]


def test_chain_and_iterable():
    class It(IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

    assert list(It(2) + It(3)) == [0, 1, 0, 1, 2]
    assert list(ChainDataset([It(1), It(2)])) == [0, 0, 1]
    with pytest.raises(AssertionError):
        ConcatDataset([It(2)])


def test_random_split_lengths_and_fractions():
    parts = random_split(range(10), [3, 7], generator=plast.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    again = random_split(range(10), [3, 7], generator=plast.Generator().manual_seed(0))
    assert list(again[0]) == list(parts[0])
    with pytest.raises(ValueError):
        random_split(range(10), [3, 3])


@pytest.mark.parametrize(
    "n,fracs", [(10, [0.5, 0.5]), (11, [0.3, 0.3, 0.4]), (7, [0.1, 0.9]), (5, [1 / 3] * 3)]
)
def test_random_split_fraction_sizes_match_torch(n, fracs):
    torch = pytest.importorskip("torch")
    ours = [len(p) for p in random_split(range(n), fracs, generator=plast.Generator().manual_seed(0))]
    theirs = [len(p) for p in torch.utils.data.random_split(range(n), fracs)]
    assert ours == theirs


def test_docstring_examples_run():
    for mod in (plast.data.dataset, plast.data.sampler, plast.data.collate, plast.data.dataloader):
        result = doctest.testmod(mod, extraglobs={"plast": plast})
        assert result.attempted > 0 and result.failed == 0, mod.__name__

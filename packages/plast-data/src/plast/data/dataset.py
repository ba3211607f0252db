"""Datasets: map-style (``Dataset``: ``__getitem__`` + ``__len__``) and iterable (``IterableDataset``), as in torch.

>>> import numpy as np, plast
>>> from plast.data import TensorDataset, random_split
>>> ds = TensorDataset(plast.tensor(np.arange(12.0, dtype=np.float32).reshape(6, 2)), plast.arange(6))
>>> x, y = ds[2]
>>> x.tolist(), int(y)
([4.0, 5.0], 2)
>>> [len(s) for s in random_split(ds, [0.5, 0.5], generator=plast.Generator().manual_seed(0))]
[3, 3]
"""

from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

import plast
from plast.data.sampler import _randperm

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]


class Dataset:
    """A map-style dataset: ``ds[i]`` for ``0 <= i < len(ds)``. Subclass it and define both methods.

    ``ds1 + ds2`` concatenates. A subclass may also define ``__getitems__(indices)`` returning the list of samples
    for a whole batch; the DataLoader calls it instead of one ``__getitem__`` per index.
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset, Iterable):
    """A dataset that is a stream: define ``__iter__``. With worker processes every worker iterates its own copy,
    so split the stream by ``plast.data.get_worker_info()`` (``id``, ``num_workers``) to avoid duplicates.
    """

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


def _rows_of(t) -> np.ndarray:
    """A numpy view (or array) of a dataset column: plast tensors via a zero-copy .numpy() of persistent leaves."""
    if isinstance(t, plast.Tensor):
        return t.detach().numpy()
    return np.asarray(t)


def _gather_rows(array: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The rows `indices` of `array` in one fancy-indexing op (a fresh C-contiguous array)."""
    return array[indices]


class TensorDataset(Dataset):
    """Rows of equally long tensors (or numpy arrays): ``ds[i] == (t0[i], t1[i], ...)``.

    A DataLoader with the default collate gathers a whole batch with one indexing op per tensor
    (``_gather_batch``) instead of indexing row by row.

    >>> ds = TensorDataset(plast.zeros(4, 3), plast.arange(4))
    >>> len(ds), tuple(ds[1][0].shape)
    (4, (3,))
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = _first_dim(tensors[0])
        for i, t in enumerate(tensors):
            if _first_dim(t) != n:
                raise ValueError(
                    f"Size mismatch between tensors: tensor 0 has {n} rows, tensor {i} has {_first_dim(t)}"
                )
        self.tensors = tuple(tensors)
        self._arrays: tuple[np.ndarray, ...] | None = None

    def _columns(self) -> tuple[np.ndarray, ...]:
        if self._arrays is None:
            self._arrays = tuple(_rows_of(t) for t in self.tensors)
        return self._arrays

    def __getitem__(self, index):
        cols = self._columns()
        return tuple(_row_tensor(c, index) for c in cols)

    def __len__(self) -> int:
        return _first_dim(self.tensors[0])

    def _gather_batch(self, indices) -> tuple[np.ndarray, ...]:
        """The collated batch for `indices` as numpy arrays: one gather per tensor."""
        idx = np.asarray(indices, dtype=np.int64)
        return tuple(_gather_rows(c, idx) for c in self._columns())

    def __getstate__(self):
        # NOTE: plast tensors never cross a process boundary: a worker receives the numpy columns and rebuilds
        # plast tensors around them without copying.
        # Large columns sent to DataLoader workers go through shared memory (see _worker.share_array).
        from plast.data._worker import share_array

        cols = [share_array(np.ascontiguousarray(c)) for c in self._columns()]
        return {"columns": cols, "kinds": [isinstance(t, plast.Tensor) for t in self.tensors]}

    def __setstate__(self, state):
        cols = tuple(np.ascontiguousarray(c) for c in state["columns"])
        self._arrays = cols
        self.tensors = tuple(
            plast.from_numpy(_writeable(c)) if k else c for c, k in zip(cols, state["kinds"])
        )


def _writeable(a: np.ndarray) -> np.ndarray:
    return a if a.flags.writeable else a.copy()


def _first_dim(t) -> int:
    shape = t.shape
    if len(shape) == 0:
        raise ValueError("TensorDataset tensors need at least one dimension")
    return int(shape[0])


def _row_tensor(col: np.ndarray, index):
    row = col[index]
    if isinstance(row, np.ndarray) and row.ndim > 0:
        return plast.from_numpy(row) if row.flags.c_contiguous and row.flags.writeable else plast.tensor(row)
    return plast.tensor(np.asarray(row))


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order.

    >>> Subset(list("abcdef"), [4, 0])[1]
    'a'
    """

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        ds = self.dataset
        mapped = [self.indices[i] for i in indices]
        if callable(getattr(ds, "__getitems__", None)):
            return ds.__getitems__(mapped)
        return [ds[i] for i in mapped]

    def __len__(self) -> int:
        return len(self.indices)


def _batch_gather_fn(dataset):
    """A function mapping a list of indices to the collated numpy batch in one gather per column, or None.

    Only for datasets whose samples it reproduces exactly: a TensorDataset, or a Subset of one, whose
    ``__getitem__`` a subclass has not overridden.
    """
    if isinstance(dataset, TensorDataset) and type(dataset).__getitem__ is TensorDataset.__getitem__:
        return dataset._gather_batch
    if isinstance(dataset, Subset) and type(dataset).__getitem__ is Subset.__getitem__:
        inner = _batch_gather_fn(dataset.dataset)
        if inner is None:
            return None
        where = np.asarray(dataset.indices, dtype=np.int64)
        return lambda indices: inner(where[np.asarray(indices, dtype=np.int64)])
    return None


class ConcatDataset(Dataset):
    """Map-style datasets one after another.

    >>> ds = ConcatDataset([[1, 2], [3, 4, 5]])
    >>> len(ds), ds[2], ds[-1]
    (5, 3, 5)
    """

    def __init__(self, datasets: Iterable):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        if idx >= len(self):
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {len(self)}")
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
        return self.datasets[d][sample_idx]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another.

    >>> list(ChainDataset([range(2), range(3)]))
    [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets: Iterable):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def random_split(
    dataset, lengths: Sequence[int | float], generator: plast.Generator | None = None
) -> list[Subset]:
    """Split `dataset` into non-overlapping random ``Subset``s of the given lengths, or fractions summing to 1
    (floor of each fraction, the remainder handed out one by one from the first subset, as torch does).

    >>> parts = random_split(range(10), [3, 7], generator=plast.Generator().manual_seed(42))
    >>> sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    True
    """
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=2
                )
        lengths = sizes
    if any(not isinstance(x, (int, np.integer)) for x in lengths):
        raise ValueError(f"lengths must be ints, or fractions that sum to 1; got {lengths}")
    if sum(lengths) != n:
        raise ValueError(
            f"Sum of input lengths ({sum(lengths)}) does not equal the length of the input dataset ({n})"
        )
    perm = _randperm(n, generator).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset : offset + length]))
        offset += length
    return out

"""Text corpora that need no download.

``python_docs()`` is the text of the standard library's ``pydoc_data.topics``: the help pages of the language
reference, present in every CPython install (about 450 KB; its exact text follows the Python version).

``TokenWindows`` turns a token sequence into (x, y) next-token training pairs, and ``train_val_split`` cuts a
sequence into training and validation parts by position.
"""

from __future__ import annotations

import functools

import numpy as np

import plast
from plast.data.dataset import Dataset

__all__ = ["TokenWindows", "python_docs", "train_val_split"]


@functools.cache
def python_docs() -> str:
    """The values of ``pydoc_data.topics.topics`` joined in sorted key order with a blank line between them.

    >>> from plast.data.corpora import python_docs
    >>> text = python_docs()
    >>> len(text) > 100_000
    True
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as e:  # some distributions strip it
        raise RuntimeError(
            "this Python has no pydoc_data.topics (the standard library's help texts were removed by its "
            "packager); install the full standard library, or use your own text"
        ) from e
    return "\n\n".join(topics[key] for key in sorted(topics))


def _as_ids(ids) -> np.ndarray:
    """A 1-D integer numpy array of token ids (from a list, a numpy array or a plast tensor), without copying
    an int64/int32 array that is already one."""
    if isinstance(ids, plast.Tensor):
        ids = ids.detach().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"token ids must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"token ids must be integers, got dtype {arr.dtype}")
    if arr.dtype not in (np.int64, np.int32, np.uint16, np.uint32):
        arr = arr.astype(np.int64)
    return arr


def train_val_split(ids, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Split a token sequence by position: the first ``1 - val_fraction`` for training, the rest for
    validation (as nanoGPT does; no shuffling, so no window straddles the two parts).

    >>> train, val = train_val_split(list(range(10)), val_fraction=0.2)
    >>> train.tolist(), val.tolist()
    ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
    """
    arr = _as_ids(ids)
    if not isinstance(val_fraction, (int, float)) or not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be a number in [0, 1), got {val_fraction!r}")
    cut = len(arr) - int(round(len(arr) * val_fraction))
    return arr[:cut], arr[cut:]


class TokenWindows(Dataset):
    """(x, y) next-token pairs over a token sequence: ``x = ids[s : s + block_size]`` and ``y`` the same window
    shifted by one, for window starts ``s = 0, stride, 2 * stride, ...`` (``stride`` defaults to ``block_size``:
    windows that do not overlap). Samples are int64 numpy arrays; a DataLoader stacks them into ``(B, T)``
    tensors.

    Order comes from the sampler: ``shuffle=True`` with a seeded ``generator`` gives a deterministic order that
    ``DataLoader.state_dict()`` resumes mid-epoch; ``stride=1`` with ``RandomSampler(ds, replacement=True)``
    draws random offsets as nanoGPT's ``get_batch`` does.

    >>> ds = TokenWindows(list(range(10)), block_size=4)
    >>> len(ds)
    2
    >>> x, y = ds[1]
    >>> x.tolist(), y.tolist()
    ([4, 5, 6, 7], [5, 6, 7, 8])
    >>> len(TokenWindows(list(range(10)), block_size=4, stride=1))
    6
    """

    def __init__(self, ids, block_size: int, stride: int | None = None):
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        stride = block_size if stride is None else stride
        if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
            raise ValueError(f"stride must be a positive int, got {stride!r}")
        self.ids = _as_ids(ids)
        self.block_size = block_size
        self.stride = stride
        if len(self.ids) < block_size + 1:
            raise ValueError(
                f"a token sequence of {len(self.ids)} ids is too short for one window of block_size={block_size} "
                f"(needs {block_size + 1}: the targets are shifted by one); use more text or a smaller block_size"
            )
        self._n = (len(self.ids) - block_size - 1) // stride + 1

    def __len__(self) -> int:
        return self._n

    def _start(self, index) -> int:
        i = int(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"window index {index} is out of range for {self._n} windows")
        return i * self.stride

    def __getitem__(self, index) -> tuple[np.ndarray, np.ndarray]:
        s = self._start(index)
        chunk = self.ids[s : s + self.block_size + 1].astype(np.int64)
        return chunk[:-1], chunk[1:]

    def __getitems__(self, indices) -> list[tuple[np.ndarray, np.ndarray]]:
        return [self[i] for i in indices]

    def batch(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """The windows `indices` as two ``(len(indices), block_size)`` int64 arrays, gathered in one op.

        >>> x, y = TokenWindows(list(range(10)), block_size=3, stride=1).batch([0, 5])
        >>> x.tolist(), y.tolist()
        ([[0, 1, 2], [5, 6, 7]], [[1, 2, 3], [6, 7, 8]])
        """
        starts = np.asarray([self._start(i) for i in indices], dtype=np.int64)
        rows = self.ids[starts[:, None] + np.arange(self.block_size + 1, dtype=np.int64)].astype(np.int64)
        return np.ascontiguousarray(rows[:, :-1]), np.ascontiguousarray(rows[:, 1:])

    def __repr__(self) -> str:
        return f"TokenWindows(tokens={len(self.ids)}, block_size={self.block_size}, stride={self.stride}, windows={self._n})"
